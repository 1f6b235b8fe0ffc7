"""`run`: run a pipeline into the lake, once or until stopped (`--dry-run`: what it would do)."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from engine.commands.options import (
    EXIT_FAILED,
    EXIT_USAGE,
    a_path,
    add_conf,
    add_lake,
    lake_folder,
    lake_log_file,
    registry,
    split_conf,
    writable_folder,
)
from engine.errors import UserError

if TYPE_CHECKING:
    from engine.definitions.pipeline import Pipeline, Registry
    from engine.plan import Plan
    from engine.plan.deployment import Deployment
    from engine.runtime.run import RunOptions

HELP = "run a pipeline"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The pipeline, where it reads and writes, and how the run goes."""
    parser.add_argument("pipeline", help="the pipeline's name (`runner.py pipelines` lists them)")
    parser.add_argument("--once", action="store_true", help="process what is there, then exit")
    parser.add_argument("--input", type=a_path, help="input folder (overrides the pipeline's)")
    add_lake(parser)
    parser.add_argument(
        "--checkpoints", type=a_path, help="checkpoint folder (default <lake>/_checkpoints)"
    )
    parser.add_argument(
        "--new-checkpoint",
        action="store_true",
        help="write tables that another checkpoint wrote (the input is read again from its "
        "start: append tables get its rows again)",
    )
    parser.add_argument(
        "--full-refresh",
        nargs="*",
        metavar="TABLE",
        help="rebuild these tables (default: all of the pipeline's) from the input with new "
        "checkpoints; the old versions stay readable (query --version)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print what a run would do to the lake and checkpoints, without running; exit 2 "
        "if it would refuse",
    )
    add_conf(parser, "spark.* goes to Spark, anything else is a pipeline setting")
    parser.add_argument(
        "--quality", action="store_true", help="with --once: validate the tables after the run"
    )


def execute(args: argparse.Namespace) -> int:
    """Plan (user errors before the JVM starts), then run under the lake's run lock."""
    from engine.lake.run_lock import run_lock
    from engine.plan import plan_pipeline
    from engine.runtime.run import RunOptions, run_pipeline
    from engine.runtime.session import get_spark
    from engine.runtime.signals import stop_on_signals

    spark_conf, settings = split_conf(args.conf)
    writer = settings.pop("lake.writer", None)
    if writer not in (None, "spark", "delta-rs"):
        raise UserError(f"--conf lake.writer: spark or delta-rs, not {writer!r}")
    pipelines = registry(args)
    pipeline = pipelines.get(args.pipeline).with_settings(settings)
    opts = RunOptions(
        writer=writer,  # type: ignore[arg-type]
        lake=writable_folder("--lake", lake_folder(args)),
        checkpoints=(
            writable_folder("--checkpoints", Path(args.checkpoints).resolve())
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
    if pipeline.source.kind == "kafka" and args.input is None:
        from engine.sources.kafka_topic import KafkaOptions, kafka_options

        # Option values (startingOffsets, timeout, ...): the source reads them once Spark runs,
        # so the dry run passed what the run then refused.
        KafkaOptions.parse(kafka_options(pipeline.source, pipeline.kafka))
    if args.quality and not args.dry_run:
        from engine.lint.suites import check_suites

        # A suite `quality` cannot read stopped the command after the run had written its batch.
        broken = check_suites(pipeline)
        if broken:
            raise broken[0].error()
    deployment = _deployment(plan, opts, spark_conf)
    if args.dry_run:
        print(f"dry run of {plan.pipeline.name} on lake {opts.lake}: nothing was changed")
        print("\n".join(deployment.lines() + _chained(pipelines, deployment, opts)))
        stops = _lint_errors(pipeline, quality=args.quality)
        for line in stops:
            print(line)
        return EXIT_USAGE if deployment.refusals or stops else 0
    # Before the lock, whose file would be the only trace a refused run left in a new lake;
    # a refused change first, as it needs no server to be said.
    deployment.check()
    _check_servers(pipeline, args, spark_conf)
    with run_lock(opts.lake, pipeline.name):
        spark = get_spark(spark_conf, log_file=None if args.debug else lake_log_file(opts.lake))
        stop = stop_on_signals()
        result = run_pipeline(spark, plan, opts, stop=stop)
        result.report(sys.stdout)
        for line in _chained(pipelines, deployment, opts):
            print(line)
        if result.cut_short:
            # The shell's status for a process ended by that signal: a scheduler sees the run
            # did not finish, and its tables are not checked half-way.
            return 128 + (stop.signum or signal.SIGTERM)
        if args.quality:
            from engine.quality import validate_lake

            # The pipeline's tables, not named by the user: one without a suite is skipped.
            report = validate_lake(
                opts.lake, tables=pipeline.tables, named=False, project=pipeline.project
            )
            report.print(sys.stdout)
            return 0 if report.passed else EXIT_FAILED
    return 0


def _lint_errors(pipeline: Pipeline, *, quality: bool) -> list[str]:
    """What `lint` finds that the run would stop on (an unknown column or function: Spark's
    analysis of the batch), as refusals of the dry run; the suites only with `--quality`."""
    from engine.lint import lint_pipeline

    _, findings = lint_pipeline(pipeline, suites=quality)
    errors = [f for f in findings if f.severity == "error"]
    return [f"refused: {f.where}: {f.message} [{f.code}]" for f in errors]


def _check_servers(
    pipeline: Pipeline, args: argparse.Namespace, spark_conf: Mapping[str, str]
) -> None:
    """The Spark master or Connect server, a socket server or a Kafka broker that accepts no
    connection is one line now, before Spark starts and anything is written (the first batch,
    or the Kafka client after 15 s of asking, would fail later). A continuous run waits for its
    broker instead."""
    from engine.runtime.session import check_spark

    check_spark(spark_conf)
    if pipeline.source.kind == "socket" and args.input is None:
        from engine.sources.socket_lines import check_server, server_address

        check_server(*server_address(dict(pipeline.source.options)))
    if args.once and pipeline.needs_broker(args.input):
        from engine.sinks.kafka import check_listening

        check_listening(pipeline.kafka)


def _chained(pipelines: Registry, deployment: Deployment, opts: RunOptions) -> list[str]:
    """A line for each pipeline that streams a table this run rebuilds, from a checkpoint of
    its own: Delta's stream cannot follow the rewrite, so it is rebuilt too."""
    rebuilt = {name for name, action in deployment.tables.items() if action.verb == "rebuild"}
    lines = []
    for name in pipelines.names():
        try:
            source = pipelines.get(name).source
        except UserError:  # another pipeline's broken spec is for its own run to say
            continue
        read = source.table if source.kind == "delta" else None
        if read in rebuilt and (opts.checkpoint_root / name).is_dir():
            lines.append(
                f"table {read}: rebuilt, and pipeline {name} streams it: run {name} with "
                "--full-refresh too (its stream cannot follow rows rewritten)"
            )
    return lines


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
