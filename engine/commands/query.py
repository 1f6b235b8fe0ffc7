"""`query`: one read-only statement over the lake's tables, on DuckDB or Spark."""

from __future__ import annotations

import argparse

from engine.commands.options import (
    add_conf,
    add_format,
    add_lake,
    at_least,
    lake_folder,
    split_conf,
)
from engine.errors import UserError

HELP = "run read-only Spark SQL over the lake's tables"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The statement, the lake, the engine and the version read."""
    parser.add_argument(
        "sql",
        help="one SELECT, SHOW TABLES, SHOW COLUMNS, SHOW TBLPROPERTIES, DESCRIBE or EXPLAIN "
        "(with --engine spark); tables by their names (FROM events)",
    )
    add_lake(parser)
    add_format(parser)
    parser.add_argument(
        "--engine", choices=["duckdb", "spark"], default="duckdb", help="default duckdb (no JVM)"
    )
    add_conf(parser, "a Spark setting (spark.*) for --engine spark, e.g. spark.driver.memory=8g")
    when = parser.add_mutually_exclusive_group()
    when.add_argument("--version", type=at_least(0), help="read every table at this Delta version")
    when.add_argument("--as-of", metavar="TIMESTAMP", help="read the versions current then (UTC)")


def execute(args: argparse.Namespace) -> int:
    """Answer from the Delta logs where they can (SHOW, DESCRIBE), else run on the engine."""
    from engine.lake import Snapshot, lake_tables
    from engine.query import SUBSTITUTE, explained_query, parse_query, run_query
    from engine.query.catalog import catalog_answer
    from engine.query.output import print_rows

    spark_conf, others = split_conf(args.conf)
    if others:
        raise UserError(f"--conf {next(iter(others))}: query takes Spark settings only (spark.*)")
    if spark_conf and args.engine != "spark":
        raise UserError(f"--conf {next(iter(spark_conf))}: a Spark setting needs --engine spark")
    lake = lake_folder(args)
    snapshot = Snapshot.parse(args.version, args.as_of)
    lake_tables(lake)  # a missing lake and a statement that is not a query are reported
    answer = catalog_answer(args.sql, lake, snapshot)  # SHOW TABLES, DESCRIBE: from the logs
    if answer is not None:
        print_rows(answer, args.format)
        return 0
    parse_query(args.sql)  # before any engine starts
    if args.engine == "duckdb":
        from engine.query.duckdb import run_duckdb

        print_rows(run_duckdb(args.sql, lake, snapshot), args.format)
        return 0
    from engine.runtime.scratch import scratch_folder
    from engine.runtime.session import get_spark

    # Variable substitution stays off whatever --conf says: `${...}` in a query is text.
    conf = {"spark.sql.shuffle.partitions": "2", **spark_conf, SUBSTITUTE: "false"}
    # Read-only: Spark's log goes to a folder of this process's, not to <lake>/_logs.
    log = None if args.debug else scratch_folder("streamlake-query-") / "spark.log"
    spark = get_spark(conf, log_file=log)
    result = run_query(spark, args.sql, lake, snapshot)
    if explained_query(args.sql) is not None and args.format == "table":
        print(result.column("plan")[0].as_py().rstrip("\n"))  # the plan as Spark prints it
    else:
        print_rows(result, args.format)
    return 0
