"""Which casts from a view's column type to its table's column type keep every value: a table
takes a view's rows only through those, so a DOUBLE is never cut to an INT on the way in."""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    IntegralType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

__all__ = ["keeps_values"]

# Digits of the largest value of each integral type, and the float types that hold them all.
_DIGITS = {ByteType: 3, ShortType: 5, IntegerType: 10, LongType: 19}
_EXACT_IN = {
    ByteType: (FloatType, DoubleType),
    ShortType: (FloatType, DoubleType),
    IntegerType: (DoubleType,),
}


def keeps_values(source: DataType, target: DataType) -> bool:
    """Whether casting `source` to `target` keeps every value as it is (nullability aside):
    the same type, a wider one, or NULLs."""
    if isinstance(source, NullType):
        return True
    if type(source) is type(target) and _same_shape(source, target):
        return _nested(source, target)
    if isinstance(source, IntegralType):
        if isinstance(target, IntegralType):
            return _DIGITS[type(target)] >= _DIGITS[type(source)]
        if isinstance(target, DecimalType):
            return target.precision - target.scale >= _DIGITS[type(source)]
        return isinstance(target, _EXACT_IN.get(type(source), ()))
    if isinstance(source, FloatType):
        return isinstance(target, DoubleType)
    if isinstance(source, DecimalType) and isinstance(target, DecimalType):
        return (
            target.scale >= source.scale
            and target.precision - target.scale >= source.precision - source.scale
        )
    if isinstance(source, DateType):
        return isinstance(target, (TimestampType, TimestampNTZType))
    return False


def _same_shape(source: DataType, target: DataType) -> bool:
    if isinstance(source, DecimalType):
        return (source.precision, source.scale) == (target.precision, target.scale)  # type: ignore[attr-defined]
    if isinstance(source, StructType):
        # Spark casts a struct field by field in order, so the names must match too.
        names = [f.name.lower() for f in source.fields]
        return names == [f.name.lower() for f in target.fields]  # type: ignore[attr-defined]
    return True


def _nested(source: DataType, target: DataType) -> bool:
    if isinstance(source, ArrayType):
        return keeps_values(source.elementType, target.elementType)  # type: ignore[attr-defined]
    if isinstance(source, MapType):
        return keeps_values(source.keyType, target.keyType) and keeps_values(  # type: ignore[attr-defined]
            source.valueType,
            target.valueType,  # type: ignore[attr-defined]
        )
    if isinstance(source, StructType):
        return all(
            keeps_values(s.dataType, t.dataType)
            for s, t in zip(source.fields, target.fields, strict=True)  # type: ignore[attr-defined]
        )
    return True
