"""The command line: parse arguments, call the engine, turn user errors into one line + exit 2."""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from engine.definitions.pipeline import Registry
from engine.errors import UserError, first_line

if TYPE_CHECKING:
    from engine.plan import Plan
    from engine.plan.deployment import Deployment
    from engine.runtime.run import RunOptions

__all__ = ["main"]

EXIT_USAGE = 2
EXIT_FAILED = 1
EXIT_PIPE = 141  # 128 + SIGPIPE


def _split_conf(pairs: Sequence[str]) -> tuple[dict[str, str], dict[str, str]]:
    spark_conf: dict[str, str] = {}
    settings: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(f"--conf {pair}: expected KEY=VALUE")
        (spark_conf if key.startswith("spark.") else settings)[key] = value
    return spark_conf, settings


def _registry(args: argparse.Namespace) -> Registry:
    return Registry(Path(args.pipelines)) if args.pipelines else Registry()


def _log_file(lake: Path) -> Path:
    return lake / "_logs" / "spark.log"


def _writable_folder(option: str, path: Path) -> Path:
    """`path` (absolute) if it is a folder or can be made one; a file or a folder without
    write permission in the way is a user error naming `option`, found before anything starts."""
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir():
        raise UserError(f"{option}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"{option}: no permission to write in {existing}")
    return path


def _cmd_pipelines(args: argparse.Namespace) -> int:
    registry = _registry(args)
    for name in registry.names():
        p = registry.get(name)
        print(f"{name}: {p.description}")
        for q in p.queries:
            topics = [f"kafka topic {t}" for t in q.topics]
            print(f"  query {q.name}: {', '.join([*q.sinks, *topics])}")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from engine.lake.run_lock import run_lock
    from engine.plan import plan_pipeline
    from engine.runtime.run import RunOptions, run_pipeline
    from engine.runtime.session import get_spark
    from engine.runtime.signals import stop_on_signals

    spark_conf, settings = _split_conf(args.conf)
    writer = settings.pop("lake.writer", None)
    if writer not in (None, "spark", "delta-rs"):
        raise UserError(f"--conf lake.writer: spark or delta-rs, not {writer!r}")
    pipeline = _registry(args).get(args.pipeline).with_settings(settings)
    opts = RunOptions(
        writer=writer,  # type: ignore[arg-type]
        lake=_writable_folder("--lake", Path(args.lake).resolve()),
        checkpoints=(
            _writable_folder("--checkpoints", Path(args.checkpoints).resolve())
            if args.checkpoints
            else None
        ),
        new_checkpoint=args.new_checkpoint,
        full_refresh=None if args.full_refresh is None else tuple(args.full_refresh),
        once=args.once,
        input_path=args.input,
    )
    if args.input is not None or pipeline.source.kind == "files":
        pipeline.input_folder(args.input)
    if args.quality and not args.once:
        raise UserError("--quality: only with --once (a continuous run has no end to check at)")
    plan = plan_pipeline(pipeline, once=args.once)  # user errors before the JVM starts
    deployment = _deployment(plan, opts, spark_conf)
    if args.dry_run:
        print(f"dry run of {plan.pipeline.name} on lake {opts.lake}: nothing was changed")
        print("\n".join(deployment.lines()))
        return EXIT_USAGE if deployment.refusals else 0
    with run_lock(opts.lake, pipeline.name):
        deployment.check()  # the run checks again, with the session's own settings
        spark = get_spark(spark_conf, log_file=None if args.debug else _log_file(opts.lake))
        result = run_pipeline(spark, plan, opts, stop=stop_on_signals())
        result.report(sys.stdout)
        if args.quality:
            from engine.quality import validate_lake

            # The pipeline's tables, not named by the user: one without a suite is skipped.
            report = validate_lake(
                opts.lake, tables=pipeline.tables, named=False, project=pipeline.project
            )
            report.print(sys.stdout)
            return 0 if report.passed else EXIT_FAILED
    return 0


def _deployment(plan: Plan, opts: RunOptions, spark_conf: Mapping[str, str]) -> Deployment:
    """What the run would do to the lake and checkpoints, decided without Spark."""
    from engine.plan.deployment import plan_deployment
    from engine.plan.fingerprint import PINNED_CONF
    from engine.runtime.conf import DEFAULT_CONF

    conf = {**DEFAULT_CONF, **spark_conf}
    return plan_deployment(
        plan,
        lake=opts.lake,
        checkpoint_root=opts.checkpoint_root,
        conf={key: conf[key] for key in PINNED_CONF if key in conf},
        new_checkpoint=opts.new_checkpoint,
        full_refresh=opts.full_refresh,
        input_path=opts.input_path,
    )


def _cmd_query(args: argparse.Namespace) -> int:
    from engine.lake import Snapshot, lake_tables
    from engine.query import SUBSTITUTE, parse_query, run_query
    from engine.query.catalog import catalog_answer
    from engine.query.output import print_rows

    lake = Path(args.lake).resolve()
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
    from engine.runtime.session import get_spark

    conf = {"spark.sql.shuffle.partitions": "2", SUBSTITUTE: "false"}
    spark = get_spark(conf, log_file=None if args.debug else _log_file(lake))
    print_rows(run_query(spark, args.sql, lake, snapshot), args.format)
    return 0


def _cmd_log(args: argparse.Namespace) -> int:
    from engine.lake import lake_tables
    from engine.lake.event_log import EventLog, event_lines
    from engine.query.output import print_rows

    lake = Path(args.lake).resolve()
    lake_tables(lake)  # a missing lake is one line
    # An unknown name lists the known ones; a known one brings the tables whose quality
    # results are its own.
    tables = _registry(args).get(args.pipeline).tables if args.pipeline else []
    events = EventLog(lake).read(pipeline=args.pipeline, tables=tables, last=args.last)
    if args.format != "text":
        print_rows(events, args.format)
    elif not events.num_rows:
        of = f" of {args.pipeline}" if args.pipeline else ""
        print(f"no events{of} in {lake} (a run writes them)")
    else:
        print("\n".join(event_lines(events)))
    return 0


def _cmd_init(args: argparse.Namespace) -> int:
    from engine.scaffold import init_pipeline

    registry = _registry(args)
    written = init_pipeline(args.name, registry.project)
    root = registry.project.root
    for path in written:
        print(f"created {path.relative_to(root) if path.is_relative_to(root) else path}")
    # The commands that follow need the same folder, or they read the engine's own project.
    where = f"--pipelines {args.pipelines} " if args.pipelines else ""
    print(
        f"next: python runner.py {where}run {args.name} --once && python runner.py {where}quality"
    )
    return 0


def _cmd_history(args: argparse.Namespace) -> int:
    from engine.lake.history import table_history
    from engine.query.output import print_rows

    print_rows(table_history(Path(args.lake).resolve(), args.table), args.format)
    return 0


def _cmd_quality(args: argparse.Namespace) -> int:
    from engine.quality import validate_lake

    report = validate_lake(
        Path(args.lake).resolve(),
        _writable_folder("--report", Path(args.report).resolve()) if args.report else None,
        args.tables,
        since_last=args.since_last,
        project=_registry(args).project,
    )
    report.print(sys.stdout)
    return 0 if report.passed else EXIT_FAILED


def _cmd_generate(args: argparse.Namespace) -> int:
    from devtools.generators import generate

    # --out stays a string: it may be kafka://HOST:PORT/TOPIC (sensor_cep, order_status).
    summary = generate(
        args.pipeline,
        args.out,
        events=args.events,
        seed=args.seed,
        faults=args.faults,
        progress=True,
    )
    print(summary.line())
    return 0


def _pipeline_topics(registry: Registry) -> list[str]:
    topics: set[str] = set()
    for name in registry.names():
        p = registry.get(name)
        if p.source.kind == "kafka" and p.source.options.get("topic"):
            topics.add(str(p.source.options["topic"]))
        topics.update(t for q in p.queries for t in q.topics)
    return sorted(topics)


def _cmd_broker(args: argparse.Namespace) -> int:
    from devtools.broker import Broker
    from engine.runtime.signals import stop_on_signals

    topics = args.topics.split(",") if args.topics else _pipeline_topics(_registry(args))
    stop = stop_on_signals()
    with Broker(port=args.port, kind=args.kind).start(topics, partitions=args.partitions) as broker:
        print(
            f"kafka broker ({broker.label}) on {broker.servers}; topics: {', '.join(topics)}; "
            "Ctrl-C stops it (its topics are lost)",
            flush=True,
        )
        while not stop.wait(0.5):
            if broker.process is None or broker.process.poll() is not None:
                raise UserError(f"broker: {broker.label} on {broker.servers} exited")
    print("broker stopped")
    return 0


def _cmd_lint(args: argparse.Namespace) -> int:
    from engine.lint import lint_pipelines

    result = lint_pipelines(_registry(args), args.pipeline_names)
    for finding in result.findings:
        print(finding)
    print(result.summary())
    return EXIT_FAILED if result.errors else 0


def _cmd_graph(args: argparse.Namespace) -> int:
    from engine.graph import pipeline_graph, to_mermaid
    from engine.graph.dot import write_graph

    graph = pipeline_graph(_registry(args).get(args.pipeline))  # planned only: no JVM
    if args.out is None:
        sys.stdout.write(to_mermaid(graph))
    else:
        write_graph(graph, Path(args.out))
    return 0


def _cmd_serve_orders(args: argparse.Namespace) -> int:
    from devtools.order_server import OrderServer
    from engine.runtime.signals import stop_on_signals

    server = OrderServer(args.host, args.port, rate=args.rate, count=args.count, seed=args.seed)
    stop = stop_on_signals()
    with server:
        print(f"{server.describe()}; Ctrl-C stops", flush=True)
        summary = server.serve(stop)
    print(summary, flush=True)
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse, its usage errors raised as UserError: one line and exit 2, like any other."""

    def error(self, message: str) -> NoReturn:
        raise UserError(f"{message} (see {self.prog} --help)")


def _at_least(low: int, *, most: int | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number of at least `low` (and at most `most`)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        if most is not None and value > most:
            raise argparse.ArgumentTypeError(f"must be at most {most}, got {value}")
        return value

    return parse


_PORT = _at_least(1, most=65535)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="runner.py",
        description="streamlake: stateful streaming pipelines written in Spark SQL, into Delta "
        "tables. `runner.py COMMAND --help` tells more.",
    )
    debug = parser.add_argument("--debug", action="store_true", help="show stack traces on errors")
    pipelines = parser.add_argument(
        "--pipelines",
        help="folder of pipeline specs, in the project folder that holds sql/, tables/ and "
        "quality/ (default: pipelines/ beside runner.py)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("pipelines", help="list pipelines and their tables").set_defaults(
        func=_cmd_pipelines
    )

    run = sub.add_parser("run", help="run a pipeline")
    run.add_argument("pipeline")
    run.add_argument("--once", action="store_true", help="process what is there, then exit")
    run.add_argument("--input", help="input folder (overrides the pipeline's)")
    run.add_argument("--lake", default="lake", help="folder of the Delta tables (default ./lake)")
    run.add_argument("--checkpoints", help="checkpoint folder (default <lake>/_checkpoints)")
    run.add_argument(
        "--new-checkpoint",
        action="store_true",
        help="write tables that another checkpoint wrote (the input is read again from its "
        "start: append tables get its rows again)",
    )
    run.add_argument(
        "--full-refresh",
        nargs="*",
        metavar="TABLE",
        help="rebuild these tables (default: all of the pipeline's) from the input with new "
        "checkpoints; the old versions stay readable (query --version)",
    )
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="print what a run would do to the lake and checkpoints, without running; exit 2 "
        "if it would refuse",
    )
    run.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="spark.* goes to Spark, anything else is a pipeline setting",
    )
    run.add_argument(
        "--quality", action="store_true", help="with --once: validate the tables after the run"
    )
    run.set_defaults(func=_cmd_run)

    query = sub.add_parser("query", help="run read-only Spark SQL over the lake's tables")
    query.add_argument("sql")
    query.add_argument("--lake", default="lake")
    query.add_argument("--format", choices=["table", "json", "csv"], default="table")
    query.add_argument(
        "--engine", choices=["duckdb", "spark"], default="duckdb", help="default duckdb (no JVM)"
    )
    when = query.add_mutually_exclusive_group()
    when.add_argument("--version", type=_at_least(0), help="read every table at this Delta version")
    when.add_argument("--as-of", metavar="TIMESTAMP", help="read the versions current then (UTC)")
    query.set_defaults(func=_cmd_query)

    hist = sub.add_parser("history", help="a table's Delta commits, newest first")
    hist.add_argument("table")
    hist.add_argument("--lake", default="lake")
    hist.add_argument("--format", choices=["table", "json", "csv"], default="table")
    hist.set_defaults(func=_cmd_history)

    log = sub.add_parser("log", help="what the runs did, from the lake's event log")
    log.add_argument(
        "pipeline", nargs="?", help="only this pipeline's runs (and its tables' quality results)"
    )
    log.add_argument(
        "--last", type=_at_least(1), default=20, help="the newest N events (default 20)"
    )
    log.add_argument("--lake", default="lake")
    log.add_argument("--format", choices=["text", "table", "json", "csv"], default="text")
    log.set_defaults(func=_cmd_log)

    init = sub.add_parser("init", help="create a new pipeline that runs on a bundled sample")
    init.add_argument("name", help="the pipeline's name (also its table's)")
    init.set_defaults(func=_cmd_init)

    qual = sub.add_parser("quality", help="validate the lake's tables with their suites")
    qual.add_argument("tables", nargs="*", metavar="TABLE", help="tables to check (default all)")
    qual.add_argument("--lake", default="lake")
    qual.add_argument("--report", help="report folder (default <lake>/_quality)")
    qual.add_argument(
        "--since-last", action="store_true", help="only rows appended since the last validation"
    )
    qual.set_defaults(func=_cmd_quality)

    broker = sub.add_parser("broker", help="run a local Kafka broker until Ctrl-C")
    broker.add_argument("--port", type=_PORT, default=9092)
    broker.add_argument("--topics", help="comma-separated (default: the pipelines' topics)")
    broker.add_argument("--partitions", type=_at_least(1), default=1, help="per new topic")
    broker.add_argument(
        "--kind",
        choices=("kafka", "tansu"),
        help="Apache Kafka (default where `make` fetched it) or tansu (in memory)",
    )
    broker.set_defaults(func=_cmd_broker)

    orders = sub.add_parser("serve-orders", help="serve JSON orders over TCP until Ctrl-C")
    orders.add_argument("--port", type=_PORT, default=9998)
    orders.add_argument("--host", default="127.0.0.1")
    orders.add_argument("--rate", type=float, default=10.0, help="orders per second (0: no limit)")
    orders.add_argument(
        "--count", type=_at_least(1), help="stop after this many (default: no limit)"
    )
    orders.add_argument("--seed", type=int, default=0)
    orders.set_defaults(func=_cmd_serve_orders)

    lint = sub.add_parser("lint", help="check the pipelines' SQL without Spark")
    lint.add_argument(
        "pipeline_names", nargs="*", metavar="PIPELINE", help="pipelines to check (default all)"
    )
    lint.set_defaults(func=_cmd_lint)

    graph = sub.add_parser("graph", help="draw a pipeline's graph (Mermaid, SVG or PNG)")
    graph.add_argument("pipeline")
    graph.add_argument(
        "--out",
        help="FILE.mmd, or FILE.svg / FILE.png laid out by Graphviz (default: Mermaid on stdout)",
    )
    graph.set_defaults(func=_cmd_graph)

    gen = sub.add_parser("generate", help="write realistic input data for a pipeline")
    gen.add_argument("pipeline")
    gen.add_argument("--out", required=True)
    gen.add_argument("--events", type=_at_least(1), default=10_000)
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--faults", action="store_true", help="add bad, duplicate and late lines")
    gen.set_defaults(func=_cmd_generate)
    # `--debug` and `--pipelines` also after the command (`run x --debug`, `init shop
    # --pipelines mine/pipelines`), where users tend to add them; unset there, they leave the
    # value given before the command alone.
    for command in sub.choices.values():
        command.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help=debug.help
        )
        command.add_argument("--pipelines", default=argparse.SUPPRESS, help=pipelines.help)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the process exit code."""
    try:
        args = _parser().parse_args(argv)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return args.func(args)
    except UserError as err:
        if args.debug:
            traceback.print_exc()
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`query ... | head`): stop quietly, as a process killed by
        # SIGPIPE would; stdout goes to /dev/null so the exit's flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE
    except Exception as err:
        if args.debug:
            traceback.print_exc()
        else:
            first = first_line(err)
            print(f"error: {first} (run with --debug for details)", file=sys.stderr)
        return EXIT_FAILED
