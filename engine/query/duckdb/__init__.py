"""The embedded engine of `query`: Spark SQL transpiled by sqlglot, run by DuckDB in memory.

The query's tables arrive as Arrow (read with delta-rs, `engine.query.read_tables`) and are
registered in a fresh in-memory DuckDB connection under their names, which then loses
file-system access and has its configuration locked (`run`). sqlglot's Spark-to-DuckDB
translation is completed where it leaves out or gets wrong what Spark computes (`translate`,
which runs the rewrites in order): times and dates (`times`), arithmetic, casts and rounding
(`numbers`), text (`text`), arrays and LATERAL VIEW (`arrays`), aggregates and PIVOT
(`aggregates`), and the names of unaliased outputs (`names`). What DuckDB cannot give as Spark
does is refused in one line with the hint to try `--engine spark`.
"""

from engine.query.duckdb.run import connect, run_duckdb
from engine.query.duckdb.translate import to_duckdb_sql

__all__ = ["connect", "run_duckdb", "to_duckdb_sql"]
