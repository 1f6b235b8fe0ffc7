"""`serve-orders`: JSON orders on a TCP socket, the input of the socket pipeline (seed 004)."""

from __future__ import annotations

import argparse

from engine.commands.options import PORT, at_least

HELP = "serve JSON orders over TCP until Ctrl-C"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Where to listen, how fast, how many."""
    parser.add_argument("--port", type=PORT, default=9998, help="port to listen on (default 9998)")
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    parser.add_argument("--rate", type=float, default=10.0, help="orders per second (0: no limit)")
    parser.add_argument(
        "--count", type=at_least(1), help="stop after this many (default: no limit)"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="the same seed sends the same orders (default 0)"
    )


def execute(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C or `--count`, then print what was sent."""
    from devtools.order_server import OrderServer
    from engine.runtime.signals import stop_on_signals

    server = OrderServer(args.host, args.port, rate=args.rate, count=args.count, seed=args.seed)
    stop = stop_on_signals()
    with server:
        print(f"{server.describe()}; Ctrl-C stops", flush=True)
        summary = server.serve(stop)
    print(summary, flush=True)
    return 0
