"""Text as Spark handles it: `LIKE` escapes with `\\`, `substring(s, 0, n)` reads the 0 as 1,
`format_string` is printf-style (stopping at a NULL argument, which Spark prints as 'null';
a tie in `%.Nf` rounds to even, `%.1f` of 1.25 is 1.2 where Spark's Java gives 1.3), a
DOUBLE, FLOAT or DECIMAL concatenated is cast to text first, so that it reads as Spark
writes it, and `url_encode`, `url_decode`, `upper('ß')` and `to_json` are Java's
(`_JAVA_TEXT`), as is the replacement of `regexp_replace` (`$1` for a group, where DuckDB
reads `\\1`); `substring_index` and `format_number`, which DuckDB lacks, are written in its
SQL; JSON that does not parse gives NULL to `get_json_object`, `json_object_keys`,
`json_array_length` and `try_parse_json` (`_SPARK_JSON`), where DuckDB stopped."""

from __future__ import annotations

from sqlglot import exp

from engine.errors import UserError
from engine.query.duckdb.inferred import operand_type
from engine.query.duckdb.sql import SPARK_HINT, STOP, duckdb_expr, is_duckdb_own

__all__ = [
    "CONCATENATIONS",
    "FORMAT_NULL",
    "URL_UNDECODABLE",
    "format_numbers",
    "format_strings",
    "java_text",
    "json_reads",
    "like_escapes",
    "numbers_concatenated",
    "regexp_replacements",
    "regexp_substrings",
    "substring_indexes",
    "substrings",
]

FORMAT_NULL = "format_string() of a NULL: Spark prints it as 'null', DuckDB's printf cannot"
URL_UNDECODABLE = "The provided URL cannot be decoded"


#: The nodes of Spark's concatenations: concat(...), `a || b`, concat_ws(sep, ...).
CONCATENATIONS: tuple[type[exp.Expr], ...] = (exp.Concat, exp.DPipe, exp.ConcatWs)
# The types DuckDB writes otherwise than Spark when it concatenates them.
_WRITTEN_OTHERWISE = frozenset(
    {exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT, exp.DataType.Type.DECIMAL}
)


def _operands(call: exp.Expr) -> list[tuple[str, int, exp.Expr]]:
    """A concatenation's operands, each with its argument's name and place there."""
    if isinstance(call, exp.DPipe):
        return [("this", 0, call.this), ("expression", 0, call.expression)]
    return [("expressions", place, e) for place, e in enumerate(call.expressions)]


def numbers_concatenated(tree: exp.Expr) -> None:
    """A DOUBLE, FLOAT or DECIMAL concatenated cast to text first, for the casts to write it as
    Spark does (DuckDB wrote 1e10 as 10000000000.0, Spark 1.0E10; a DECIMAL(2, 2) 0.25 as .25),
    where sqlglot could tell it."""
    for call in list(tree.find_all(*CONCATENATIONS)):
        for name, place, operand in _operands(call):
            if operand_type(call, name, place) in _WRITTEN_OTHERWISE:
                operand.replace(exp.cast(operand.copy(), exp.DataType.Type.TEXT))


def like_escapes(tree: exp.Expr) -> None:
    """Spark's LIKE takes `\\` as its escape (`'a\\_c'` matches `a_c` only); DuckDB's has none
    unless told."""
    for like in list(tree.find_all(exp.Like, exp.ILike)):
        if isinstance(like.parent, exp.Escape) or isinstance(like.expression, exp.Any | exp.All):
            continue
        like.replace(exp.Escape(this=like.copy(), expression=exp.Literal.string("\\")))


def _whole_number(node: exp.Expr | None) -> bool:
    """Whether `node` is a literal number not below 0 (a count the rewrites need not guard)."""
    return isinstance(node, exp.Literal) and node.is_int and node.to_py() >= 0


def substrings(tree: exp.Expr) -> None:
    """Spark's substring reads a start of 0 as 1 (`substring('hello', 0, 2)` is 'he'; DuckDB
    counts the 0 as a place before the text, 'h'); a length, or a count of `left` and
    `right`, below 0 gives '' (DuckDB counted back from the end: `left('abc', -1)` was 'ab');
    `locate` from a place below 1, or NULL, finds nothing (0; DuckDB looked from the start)."""
    one = exp.Literal.number(1)
    for call in reversed(list(tree.find_all(exp.Substring, exp.Left, exp.Right))):
        start = call.args.get("start")
        if isinstance(start, exp.Literal):
            if start.to_py() == 0:
                call.set("start", one.copy())
        elif start is not None:
            zero = exp.EQ(this=start.copy(), expression=exp.Literal.number(0))
            call.set("start", exp.Case().when(zero, one.copy()).else_(start.copy()))
        count = call.args.get("length" if isinstance(call, exp.Substring) else "expression")
        if count is not None and not _whole_number(count):
            empty = "CASE WHEN __0 IS NULL THEN NULL WHEN __1 < 0 THEN '' ELSE __2 END"
            call.replace(duckdb_expr(empty, call.this, count, call.copy()))
    for locate in list(tree.find_all(exp.StrPosition)):
        place = locate.args.get("position")
        if place is not None and not (_whole_number(place) and place.to_py() >= 1):
            # Spark's order: a NULL place finds nothing, a NULL text or substring is NULL.
            found = duckdb_expr(
                "CASE WHEN __0 IS NULL THEN 0 WHEN __1 IS NULL OR __2 IS NULL THEN NULL "
                "WHEN __0 < 1 THEN 0 ELSE __3 END",
                place,
                locate.args["substr"],
                locate.this,
                locate.copy(),
            )
            locate.replace(found)


def _format_string(call: exp.Format) -> exp.Expr:
    """Spark's format_string is printf's (sqlglot's FORMAT is DuckDB's `{}` format, which gave
    the pattern back as it was); a NULL argument, which Spark prints as 'null', stops it."""
    args = [call.this, *call.expressions]
    printf = exp.Anonymous(this="printf", expressions=[a.copy() for a in args])
    stop = exp.Anonymous(this=STOP, expressions=[exp.Literal.string(FORMAT_NULL)])
    null = exp.or_(*(exp.Is(this=exp.Paren(this=a.copy()), expression=exp.Null()) for a in args))
    return exp.Case().when(null, stop).else_(printf)


def format_strings(tree: exp.Expr) -> None:
    """format_string as printf."""
    for formatted in reversed(list(tree.find_all(exp.Format))):
        if not is_duckdb_own(formatted):  # format_number's is DuckDB's `{}` format
            formatted.replace(_format_string(formatted))


# Text functions as Java computes them for Spark, as DuckDB SQL over their argument __0: a
# space is '+' in a URL and '*' stays as it is, '~' does not (DuckDB: '%20', '%2A', '~');
# '+' is a space when decoded, and a '%' without two hex digits stops the query (DuckDB kept
# both); the upper case of 'ß' is 'SS' (DuckDB: 'ẞ').
_UNDECODABLE = f"'{URL_UNDECODABLE}: ' || __0"
_DECODED = "url_decode(replace(__0, '+', ' '))"
_DECODABLE = "regexp_full_match(__0, '([^%]|%[0-9A-Fa-f]{2})*')"
_JAVA_TEXT: dict[type[exp.Expr] | str, str] = {
    "url_encode": "replace(replace(replace(url_encode(__0), '%20', '+'), '%2A', '*'), '~', '%7E')",
    "url_decode": f"CASE WHEN {_DECODABLE} THEN {_DECODED} ELSE {STOP}({_UNDECODABLE}) END",
    "try_url_decode": f"CASE WHEN {_DECODABLE} THEN {_DECODED} END",
    exp.Upper: "upper(replace(__0, 'ß', 'ss'))",
    # a struct's NULL fields are left out, at any depth (DuckDB wrote `"b":null`); a map's
    # are kept, as Spark keeps them (not in a map inside a struct, which this strips)
    exp.JSONFormat: "CAST(CASE WHEN typeof(__0) LIKE 'MAP%' THEN to_json(__0) "
    "ELSE json_strip_nulls(to_json(__0)) END AS VARCHAR)",
}


def java_text(tree: exp.Expr) -> None:
    """The functions of `_JAVA_TEXT` as Spark computes them."""
    for call in reversed(list(tree.find_all(exp.Upper, exp.JSONFormat, exp.Anonymous))):
        name = call.name.lower() if isinstance(call, exp.Anonymous) else type(call)
        operands = call.expressions if isinstance(call, exp.Anonymous) else [call.this]
        if name in _JAVA_TEXT and len(operands) == 1 and not call.args.get("options"):
            call.replace(duckdb_expr(_JAVA_TEXT[name], *operands))


# JSON read as Spark reads it, as DuckDB SQL over the text __0 (and the call itself, __1):
# text that is not JSON, such as a quarantined line, gives NULL where DuckDB stopped the query,
# and there are keys only of an object and a length only of an array (DuckDB: [] and 0).
_READABLE = "json_valid(__0)"
_SPARK_JSON: dict[type[exp.Expr] | str, str] = {
    exp.JSONExtractScalar: f"CASE WHEN {_READABLE} THEN __1 END",  # get_json_object
    exp.JSONKeys: f"CASE WHEN {_READABLE} AND json_type(__0) = 'OBJECT' THEN json_keys(__0) END",
    "json_array_length": f"CASE WHEN {_READABLE} AND json_type(__0) = 'ARRAY' "
    "THEN CAST(json_array_length(__0) AS INTEGER) END",
    "try_parse_json": f"CASE WHEN {_READABLE} THEN json(__0) END",
}


def json_reads(tree: exp.Expr) -> None:
    """The functions of `_SPARK_JSON` as Spark computes them."""
    for call in reversed(list(tree.find_all(exp.JSONExtractScalar, exp.JSONKeys, exp.Anonymous))):
        name = call.name.lower() if isinstance(call, exp.Anonymous) else type(call)
        if name not in _SPARK_JSON or is_duckdb_own(call):
            continue
        if isinstance(call, exp.Anonymous):
            if len(call.expressions) == 1:
                call.replace(duckdb_expr(_SPARK_JSON[name], *call.expressions))
        else:
            call.replace(duckdb_expr(_SPARK_JSON[name], call.this, call.copy()))


def _re2_replacement(java: str) -> str:
    """A Java regex replacement (Spark's) as RE2's (DuckDB's): `$n` is group n (RE2's `\\n`),
    `\\x` is x as it is, and a `\\` in the result is RE2's `\\\\`."""
    out, i = [], 0
    while i < len(java):
        c = java[i]
        if c == "\\":
            if i + 1 == len(java):
                raise UserError(
                    f"query: regexp_replace: replacement {java!r} ends in a lone '\\' (as on Spark)"
                )
            out.append("\\\\" if java[i + 1] == "\\" else java[i + 1])
            i += 2
        elif c == "$":
            if i + 1 == len(java) or not java[i + 1].isdigit():
                raise UserError(
                    f"query: regexp_replace: replacement {java!r}: '$' must be followed by a "
                    "group number, '\\$' writes a dollar (as on Spark)"
                )
            out.append("\\" + java[i + 1])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def regexp_replacements(tree: exp.Expr) -> None:
    """regexp_replace's replacement written in Java's way ($1) read as Spark reads it (DuckDB
    wrote `$1` as it is); one that is no literal stays DuckDB's."""
    for call in tree.find_all(exp.RegexpReplace):
        if is_duckdb_own(call):
            continue
        replacement = call.args.get("replacement")
        if isinstance(replacement, exp.Literal) and replacement.is_string:
            replacement.replace(exp.Literal.string(_re2_replacement(replacement.name)))


def regexp_substrings(tree: exp.Expr) -> None:
    """`regexp_substr(s, re)`, which DuckDB lacks: the first match, or NULL where none."""
    for found in reversed(list(tree.find_all(exp.RegexpSubstr))):  # innermost first
        if found.args.get("expression") is not None:
            first = "CASE WHEN regexp_matches(__0, __1) THEN regexp_extract(__0, __1) END"
            found.replace(duckdb_expr(first, found.this, found.expression))


# Spark's substring_index(s, delimiter, count) over __0, __1, __2: the text before the count-th
# delimiter (after the count-th from the end for a count below 0), all of it where there are
# fewer; '' for a count of 0 or an empty delimiter.
_SUBSTRING_INDEX = (
    "CASE WHEN __0 IS NULL OR __1 IS NULL OR __2 IS NULL THEN NULL "
    "WHEN __1 = '' OR __2 = 0 THEN '' "
    "WHEN __2 > 0 THEN array_to_string(string_split(__0, __1)[1:__2], __1) "
    "ELSE array_to_string(string_split(__0, __1)[__2:], __1) END"
)


def substring_indexes(tree: exp.Expr) -> None:
    """substring_index as Spark's (DuckDB has none)."""
    for call in reversed(list(tree.find_all(exp.SubstringIndex))):  # innermost first
        operands = (call.this, call.args["delimiter"], call.args["count"])
        call.replace(duckdb_expr(_SUBSTRING_INDEX, *operands))


def _format_number(x: exp.Expr, places: int) -> exp.Expr:
    """Spark's format_number(x, places): thousands separated by ',', rounded half to even. A
    DOUBLE's exact value is rounded, as Java does (DuckDB's `format`); a DECIMAL or an integer
    is rounded as a decimal and written from its digits (DuckDB's `format` went through a
    DOUBLE and lost digits past 2^53)."""
    rounded = f"round_even(__0, {places})"
    digits = f"CAST(abs({rounded}) AS VARCHAR)"
    fraction = f" || '.' || rpad(split_part({digits}, '.', 2), {places}, '0')" if places else ""
    exact = (
        "CASE WHEN __0 < 0 THEN '-' ELSE '' END "
        f"|| format('{{:,}}', CAST(trunc(abs({rounded})) AS HUGEINT)){fraction}"
    )
    return duckdb_expr(
        "CASE WHEN __0 IS NULL THEN NULL WHEN typeof(__0) IN ('DOUBLE', 'FLOAT') THEN "
        "CASE WHEN isnan(__0) THEN 'NaN' WHEN isinf(__0) AND __0 > 0 THEN '∞' "
        "WHEN isinf(__0) THEN '-∞' "
        f"ELSE format('{{:,.{places}f}}', CAST(__0 AS DOUBLE)) END ELSE {exact} END",
        x,
    )


def format_numbers(tree: exp.Expr) -> None:
    """format_number(x, places) as Spark's (DuckDB has none); fewer than 0 places give NULL.
    A pattern (`'#,###.#'`) or places not written as a number are refused."""
    for call in reversed(list(tree.find_all(exp.Anonymous))):  # innermost first
        if call.name.lower() != "format_number" or len(call.expressions) != 2:
            continue
        x, places = call.expressions
        if isinstance(places, exp.Neg) and places.this.is_int:
            call.replace(exp.cast(exp.Null(), exp.DataType.Type.TEXT))
        elif places.is_int:
            call.replace(_format_number(x, int(places.to_py())))
        else:
            raise UserError(
                f"query: format_number(x, {places.sql(dialect='spark')}): the DuckDB engine "
                f"takes a number of places written in the query only ({SPARK_HINT})"
            )
