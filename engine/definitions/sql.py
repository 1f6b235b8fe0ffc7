"""Load one-view-per-file Spark SQL steps and order them by the views they read."""

from __future__ import annotations

import heapq
import re
import typing as t
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter
from itertools import pairwise
from pathlib import Path

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from engine.definitions.durations import parse_duration
from engine.definitions.expectations import Expectation, ExpectationError, parse_expectations
from engine.definitions.syntax import (
    SyntaxProblem,
    incomplete,
    parse_statements,
    syntax_problem,
)

__all__ = [
    "SparkStreaming",
    "SqlError",
    "SqlStep",
    "Watermark",
    "load_step",
    "load_steps",
    "order_steps",
    "pin_batch_time",
    "pinned_condition",
    "position",
]


class Watermark(exp.Expression):
    """A FROM item with an event-time watermark: `this WATERMARK expression DELAY OF delay`."""

    # The alias belongs to the watermarked relation: Spark only accepts it after the clause.
    arg_types: t.ClassVar[dict[str, bool]] = {
        "this": True,
        "expression": True,
        "delay": True,
        "alias": False,
    }


class SparkStreaming(Spark):
    """Spark SQL plus the `WATERMARK named_expression DELAY OF interval` FROM-item clause."""

    class Parser(Spark.Parser):
        def parse(self, raw_tokens: list[t.Any], sql: str | None = None) -> list[t.Any]:
            # `window(ts, '5 seconds')` is Spark's window function; sqlglot's GROUP BY stops at
            # a WINDOW token (the named-window clause, `WINDOW w AS (...)`), so a WINDOW
            # directly followed by "(" is made a plain name.
            for token, following in pairwise(raw_tokens):
                if (
                    token.token_type == TokenType.WINDOW
                    and following.token_type == TokenType.L_PAREN
                ):
                    token.token_type = TokenType.VAR
            return super().parse(raw_tokens, sql)

        def _parse_pipe_syntax_limit(self, query: exp.Select) -> exp.Select:
            # sqlglot 30 compares with the query's own LIMIT even where it has none (an
            # AttributeError on `SELECT * FROM t |> LIMIT 1`): without one, there is none.
            if query.args.get("limit") is None:
                query.args.pop("limit", None)
            return super()._parse_pipe_syntax_limit(query)

        def _at_watermark(self) -> bool:
            # WATERMARK is not reserved: in `FROM t watermark WHERE ...` or
            # `WITH watermark AS (...)` it is still a name.
            return (
                self._curr.token_type == TokenType.VAR
                and self._curr.text.upper() == "WATERMARK"
                and self._next.token_type not in self.TABLE_TERMINATORS | {TokenType.ALIAS}
            )

        def _parse_table_alias(
            self, alias_tokens: t.Collection[TokenType] | None = None
        ) -> exp.TableAlias | None:
            if self._at_watermark():
                return None
            return super()._parse_table_alias(alias_tokens)

        def _parse_table(self, *args: t.Any, **kwargs: t.Any) -> exp.Expr | None:
            this = super()._parse_table(*args, **kwargs)
            if not isinstance(this, (exp.Table, exp.Subquery)) or not self._at_watermark():
                return this
            if this.alias:
                self.raise_error("WATERMARK must come before the alias")
            self._advance()
            expression = self._parse_alias(self._parse_assignment(), explicit=True)
            if not self._match_text_seq("DELAY", "OF"):
                self.raise_error("Expecting DELAY OF")
            delay = self._parse_interval()
            # Several units parse into a sum of intervals, which Spark does not take as a delay.
            if not isinstance(delay, exp.Interval):
                self.raise_error("Expecting a one-unit INTERVAL such as INTERVAL 90 SECONDS")
            return self.expression(
                Watermark(
                    this=this,
                    expression=expression,
                    delay=delay,
                    alias=self._parse_table_alias(),
                )
            )

    class Generator(Spark.Generator):
        def watermark_sql(self, expression: Watermark) -> str:
            alias = self.sql(expression, "alias")
            return (
                f"{self.sql(expression, 'this')} WATERMARK {self.sql(expression, 'expression')}"
                f" DELAY OF {self.sql(expression, 'delay')}{f' AS {alias}' if alias else ''}"
            )

        # Watermark is not one of sqlglot's own classes, so *_sql methods are not found by name.
        TRANSFORMS: t.ClassVar[dict[type[exp.Expr], t.Callable[..., str]]] = {
            **Spark.Generator.TRANSFORMS,
            Watermark: watermark_sql,
        }


class SqlError(Exception):
    """A problem with a SQL step, located as precisely as known.

    As in sqlglot, `col` is the column of the last character of the offending token.
    """

    def __init__(
        self,
        message: str,
        *,
        path: Path | None = None,
        line: int | None = None,
        col: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.line = line
        self.col = col

    def __str__(self) -> str:
        where = ":".join(str(part) for part in (self.path, self.line, self.col) if part is not None)
        return f"{where}: {self.message}" if where else self.message


@dataclass(frozen=True)
class SqlStep:
    """One `CREATE TEMP VIEW <name> AS <query>` file and what its query reads."""

    name: str
    path: Path
    sql: str
    tree: exp.Expression = field(compare=False)
    references: frozenset[str]
    watermarks: tuple[tuple[str, str], ...]
    distinct: bool
    #: For `SELECT k, any_value(c) AS c ... GROUP BY k`: the output names of the keys.
    dedup_keys: tuple[str, ...] = ()
    #: A GROUP BY that is not a deduplication: Spark keeps its groups as state.
    aggregates: bool = False
    #: The rules the file declares about the view's rows (engine/definitions/expectations.py).
    expectations: tuple[Expectation, ...] = ()

    @property
    def drops(self) -> bool:
        """Whether a rule of the view sends rows to quarantine."""
        return any(e.action == "drop" for e in self.expectations)

    def query_sql(
        self,
        *,
        drop_distinct: bool = False,
        watermark_delay: str | None = None,
        batch_time_ms: int | None = None,
    ) -> str:
        """The view's query as Spark SQL, optionally without its deduplication (top-level
        DISTINCT, or GROUP BY with any_value), with every watermark delay replaced, or with the
        current time pinned to a micro-batch's (`pin_batch_time`)."""
        query = self.tree.expression.copy()
        if batch_time_ms is not None:
            query = pin_batch_time(query, batch_time_ms)
        if drop_distinct and self.dedup_keys:
            query.set("group", None)
            for call in list(query.find_all(exp.AnyValue, exp.First)):
                call.replace(call.this)
        elif drop_distinct and self.distinct:
            query.set("distinct", None)
        if watermark_delay is not None:
            try:
                delay_sql = parse_duration(watermark_delay).interval_sql()
            except ValueError:
                raise SqlError(
                    f"watermark delay {watermark_delay!r} is not like '30 seconds' or '2 minutes'",
                    path=self.path,
                ) from None
            delay = sqlglot.parse_one(delay_sql, read=SparkStreaming)
            for watermark in list(query.find_all(Watermark)):
                watermark.set("delay", delay.copy())
        return query.sql(dialect=SparkStreaming)

    def distinct_columns(self) -> list[str]:
        """The columns that identify a duplicate: the GROUP BY keys of the any_value form,
        else every output column of the top-level SELECT (each must have a name)."""
        if self.dedup_keys:
            return list(self.dedup_keys)
        names = []
        for projection in self.tree.expression.selects:
            name = projection.output_name
            if not name or name == "*":
                line, col = position(projection)
                raise SqlError(
                    f"output column {projection.sql(dialect=SparkStreaming)!r} has no name",
                    path=self.path,
                    line=line,
                    col=col,
                )
            names.append(name)
        return names


def pin_batch_time(node: exp.Expression, batch_time_ms: int) -> exp.Expression:
    """`node` with current_timestamp(), now() and current_date() fixed at a micro-batch's
    timestamp, as Spark fixes them in the streaming part of a query: SQL run on the batch then
    decides as the streaming part did, and as a replay of the batch will."""
    at = exp.Anonymous(this="timestamp_millis", expressions=[exp.Literal.number(batch_time_ms)])

    def pinned(inner: exp.Expression) -> exp.Expression:
        if isinstance(inner, exp.CurrentTimestamp) or (
            isinstance(inner, exp.Anonymous) and inner.name.lower() == "now"
        ):
            return at.copy()
        if isinstance(inner, exp.CurrentDate):
            return exp.Anonymous(this="to_date", expressions=[at.copy()])
        return inner

    return node.transform(pinned)


def pinned_condition(condition: str, batch_time_ms: int | None) -> str:
    """An expression's SQL with the current time pinned (`pin_batch_time`), or as written."""
    if batch_time_ms is None:
        return condition
    tree = sqlglot.parse_one(condition, read=SparkStreaming)
    return pin_batch_time(tree, batch_time_ms).sql(dialect=SparkStreaming)


def position(node: exp.Expression) -> tuple[int | None, int | None]:
    """The line and column of the first token inside node that has one."""
    # Only leaf tokens such as identifiers carry a position, so take the first one inside node.
    for inner in node.walk(bfs=False):
        if "line" in inner.meta:
            return inner.meta["line"], inner.meta["col"]
    return None, None


def _table_name(table: exp.Table) -> str | None:
    # Table-valued functions such as range(10) are tables whose `this` is a function call.
    if not isinstance(table.this, exp.Identifier):
        return None
    return ".".join(part.name for part in table.parts).lower()


def _reference_tables(query: exp.Expression) -> list[tuple[str, exp.Table]]:
    # CTE names are matched anywhere in the query, which is what Spark does unless a CTE
    # shadows the view it reads (WITH t AS (SELECT * FROM t)); that case is not supported.
    ctes = {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}
    return [
        (name, table)
        for table in query.find_all(exp.Table, bfs=False)
        if (name := _table_name(table)) and name not in ctes
    ]


def _dedup_keys(query: exp.Expression, path: Path) -> tuple[str, ...]:
    """Output names of the GROUP BY keys when every other column is any_value()/first():
    such a query keeps one row per key, which is what streaming deduplication does."""
    if not isinstance(query, exp.Select) or not query.args.get("group"):
        return ()
    if query.args.get("having") or query.args.get("distinct"):
        return ()
    groups = query.args["group"].expressions
    if not groups or not all(isinstance(g, exp.Column) for g in groups):
        return ()
    wanted = {g.name.lower() for g in groups}
    keys: dict[str, str] = {}
    for projection in query.selects:
        inner = projection.this if isinstance(projection, exp.Alias) else projection
        if isinstance(inner, exp.Column) and inner.name.lower() in wanted:
            keys[inner.name.lower()] = projection.output_name
        elif isinstance(inner, (exp.AnyValue, exp.First)):
            if not isinstance(projection, exp.Alias):
                line, col = position(projection)
                raise SqlError(
                    f"name the column {projection.sql(dialect=SparkStreaming)!r} (AS name)",
                    path=path,
                    line=line,
                    col=col,
                )
        else:
            return ()
    if set(keys) != wanted:
        return ()  # a key that is not selected: a plain aggregation, left to Spark
    return tuple(keys[g.name.lower()] for g in groups)


def load_step(path: Path) -> SqlStep:
    """Read and parse a file holding exactly one `CREATE TEMP VIEW <file stem> AS <query>`."""
    sql = path.read_text()
    try:
        statements = parse_statements(sql, SparkStreaming)
    except SqlglotError as error:
        problem = syntax_problem(error)
        raise SqlError(problem.message, path=path, line=problem.line, col=problem.col) from error

    create = statements[0] if len(statements) == 1 else None
    if isinstance(create, exp.Command):
        _raise_query_problem(sql, path)
    properties = create.args.get("properties") if isinstance(create, exp.Create) else None
    if not (
        isinstance(create, exp.Create)
        and create.kind == "VIEW"
        and properties
        and [type(p) for p in properties.expressions] == [exp.TemporaryProperty]
        and isinstance(create.this, exp.Table)
        and not create.this.db
        and isinstance(create.expression, exp.Query)
    ):
        raise SqlError(
            "expected exactly one CREATE [OR REPLACE] TEMP VIEW <name> AS <query> statement",
            path=path,
        )

    problem = incomplete(sql, create, SparkStreaming)
    if problem:
        raise SqlError(problem.message, path=path, line=problem.line, col=problem.col)
    view = create.this.name
    if view.lower() != path.stem.lower():
        line, col = position(create.this)
        raise SqlError(
            f"view '{view}' must be named after its file '{path.stem}'",
            path=path,
            line=line,
            col=col,
        )

    query = create.expression
    dedup = _dedup_keys(query, path)
    try:
        expectations = parse_expectations(sql, SparkStreaming)
    except ExpectationError as err:
        raise SqlError(str(err), path=path, line=err.line) from None
    return SqlStep(
        name=view.lower(),
        path=path,
        sql=sql,
        tree=create,
        references=frozenset(name for name, _ in _reference_tables(query)),
        watermarks=tuple(
            (w.expression.alias_or_name, w.args["delay"].sql(dialect=SparkStreaming))
            for w in query.find_all(Watermark, bfs=False)
        ),
        distinct=isinstance(query, exp.Select) and bool(query.args.get("distinct") or dedup),
        dedup_keys=dedup,
        aggregates=isinstance(query, exp.Select) and bool(query.args.get("group")) and not dedup,
        expectations=expectations,
    )


# The head of a view's file, up to its query: comments (expectations) and CREATE ... AS.
_VIEW_HEAD = re.compile(
    r"(?:\s|--[^\n]*\n|/\*.*?\*/)*CREATE\s+(?:OR\s+REPLACE\s+)?TEMP(?:ORARY)?\s+VIEW\s+"
    r"[`\w]+\s+AS\s+",
    re.IGNORECASE | re.DOTALL,
)


def _raise_query_problem(sql: str, path: Path) -> None:
    """sqlglot read the file as an opaque command, which says where nothing went wrong: read
    the view's query alone, so a misspelt keyword (`SELEC`, `FORM`) gets its line and column."""
    head = _VIEW_HEAD.match(sql)
    problem = _query_problem(sql[head.end() :]) if head else None
    if problem is None:
        return
    line, col = problem.line, problem.col
    if line is not None:  # from the query's start to the file's
        before = sql[: head.end()]
        if line == 1 and col is not None:
            col += len(before) - (before.rfind("\n") + 1)
        line += before.count("\n")
    raise SqlError(problem.message, path=path, line=line, col=col)


def _query_problem(query: str) -> SyntaxProblem | None:
    """What is wrong with a view's query, where sqlglot says so; None if it reads it."""
    try:
        tokens = SparkStreaming().tokenize(query)
        if tokens and tokens[0].token_type is TokenType.VAR:  # a word no query starts with
            return SyntaxProblem(f"expected SELECT or WITH, not {tokens[0].text!r}", 1, 1)
        parse_statements(query, SparkStreaming)
    except SqlglotError as error:
        return syntax_problem(error)
    return None


def load_steps(folder: Path) -> list[SqlStep]:
    """Load every `*.sql` file in folder, sorted by file name."""
    paths = sorted(folder.glob("*.sql"))
    if not paths:
        raise SqlError("no .sql files", path=folder)
    return [load_step(path) for path in paths]


def order_steps(
    steps: Sequence[SqlStep],
    provided: Iterable[str] = (),
    extra: Mapping[str, Iterable[str]] = {},
) -> list[str]:
    """Names of the steps and extra nodes (name -> names it reads), each after what it reads.

    `provided` names exist beforehand. Names are case-insensitive and returned lower-cased;
    among nodes ready at the same time, the alphabetically first comes first. A cycle is
    reported as `cycle: a -> b -> a`, each arrow pointing from a node to one that reads it.
    """
    by_name: dict[str, SqlStep] = {}
    reads: dict[str, frozenset[str]] = {}
    for step in steps:
        if step.name in by_name:
            raise SqlError(
                f"view '{step.name}' is also defined in {by_name[step.name].path}", path=step.path
            )
        by_name[step.name] = step
        reads[step.name] = step.references
    for node, inputs in extra.items():
        if node.lower() in reads:
            raise SqlError(f"node '{node}' has the same name as another node")
        reads[node.lower()] = frozenset(name.lower() for name in inputs)

    known = reads.keys() | {name.lower() for name in provided}
    for node in sorted(reads):
        unknown = sorted(reads[node] - known)
        if not unknown:
            continue
        step = by_name.get(node)
        if step is None:
            raise SqlError(f"node '{node}' reads unknown view '{unknown[0]}'")
        table = next(
            table for name, table in _reference_tables(step.tree.expression) if name == unknown[0]
        )
        line, col = position(table)
        raise SqlError(f"unknown view '{unknown[0]}'", path=step.path, line=line, col=col)

    # Sorted inputs keep the reported cycle the same from run to run.
    sorter = TopologicalSorter({node: sorted(reads[node] & reads.keys()) for node in sorted(reads)})
    try:
        sorter.prepare()
    except CycleError as error:
        cycle = error.args[1][:-1]
        start = cycle.index(min(cycle))
        cycle = cycle[start:] + cycle[:start]
        first_step = next((by_name[node] for node in cycle if node in by_name), None)
        raise SqlError(
            f"cycle: {' -> '.join([*cycle, cycle[0]])}",
            path=first_step.path if first_step else None,
        ) from error

    order: list[str] = []
    ready = list(sorter.get_ready())
    heapq.heapify(ready)
    while ready:
        node = heapq.heappop(ready)
        order.append(node)
        sorter.done(node)
        for reader in sorter.get_ready():
            heapq.heappush(ready, reader)
    return order
