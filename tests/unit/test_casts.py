"""Casts from a view's column type to its table's: which keep every value
(engine/runtime/casts.py). No Spark: the types are plain objects."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from engine.runtime.casts import keeps_values


def item(**fields: DataType) -> StructType:
    return StructType([StructField(n, t) for n, t in fields.items()])


@pytest.mark.parametrize(
    ("source", "target", "keeps"),
    [
        (IntegerType(), IntegerType(), True),
        (NullType(), IntegerType(), True),
        (IntegerType(), LongType(), True),
        (LongType(), IntegerType(), False),
        (ShortType(), FloatType(), True),
        (IntegerType(), FloatType(), False),  # 2^24 + 1 is not a float
        (IntegerType(), DoubleType(), True),
        (LongType(), DoubleType(), False),
        (DoubleType(), IntegerType(), False),  # 12.5 would be 12
        (DoubleType(), FloatType(), False),
        (FloatType(), DoubleType(), True),
        (IntegerType(), DecimalType(10, 0), True),
        (IntegerType(), DecimalType(12, 3), False),
        (DecimalType(12, 2), DecimalType(14, 4), True),
        (DecimalType(12, 2), DecimalType(12, 1), False),
        (DecimalType(12, 2), DoubleType(), False),
        (DateType(), TimestampType(), True),
        (TimestampType(), DateType(), False),
        (TimestampType(), TimestampNTZType(), False),
        (StringType(), IntegerType(), False),
        (IntegerType(), StringType(), False),
        (ArrayType(IntegerType()), ArrayType(LongType()), True),
        (ArrayType(DoubleType()), ArrayType(IntegerType()), False),
        (MapType(StringType(), DoubleType()), MapType(StringType(), IntegerType()), False),
        (item(a=IntegerType(), b=StringType()), item(a=LongType(), b=StringType()), True),
        (item(a=IntegerType(), b=StringType()), item(b=IntegerType(), a=StringType()), False),
        (item(a=IntegerType()), item(a=IntegerType(), b=StringType()), False),
    ],
)
def test_which_casts_keep_every_value(source: DataType, target: DataType, keeps: bool) -> None:
    assert keeps_values(source, target) is keeps
