"""Tests for the order generator of seed 003 (plain Python, no Spark)."""

from __future__ import annotations

import json
import socket
import threading
from collections import Counter
from itertools import islice
from pathlib import Path

import pytest

from devtools.broker import Broker
from devtools.generators.order_status import (
    MALFORMED_RATE,
    GenerationSummary,
    OrderLines,
    generate_order_status,
)
from devtools.order_server import STATUSES, OrderServer, orders
from engine.errors import UserError
from tests.conftest import consume


def read_folder(folder: Path) -> list[str]:
    names = sorted(path.name for path in folder.iterdir())
    assert names == [f"part-{i:05d}.json" for i in range(1, len(names) + 1)]
    return [text for name in names for text in (folder / name).read_text().splitlines()]


def valid_status(text: str) -> str | None:
    """The status of a valid order line, None for a malformed one."""
    try:
        record = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("order_id"), str):
        return None
    status = record.get("status")
    return status if status in STATUSES else None


def expected_lines(seed: int, events: int) -> list[str]:
    return [json.dumps(order) for order in islice(orders(seed), events)]


def test_same_seed_gives_same_bytes(tmp_path: Path) -> None:
    def files(name: str, seed: int) -> list[bytes]:
        folder = tmp_path / name
        generate_order_status(folder, events=3000, seed=seed, faults=True, lines_per_file=700)
        return [path.read_bytes() for path in sorted(folder.iterdir())]

    assert files("a", 5) == files("b", 5)
    assert files("c", 5) != files("d", 6)


@pytest.mark.parametrize("faults", [False, True])
def test_summary_matches_the_files(tmp_path: Path, faults: bool) -> None:
    folder = tmp_path / "orders"
    summary = generate_order_status(folder, events=5000, seed=2, faults=faults, lines_per_file=800)
    lines = read_folder(folder)
    statuses = [valid_status(text) for text in lines]
    by_status = Counter(s for s in statuses if s is not None)
    assert summary.as_dict() == {
        "lines": len(lines),
        "orders": 5000,
        "malformed": statuses.count(None),
        "files": 7,
        "by_status": {status: by_status[status] for status in STATUSES},
    }
    assert list(summary.by_status) == list(STATUSES)
    assert summary.malformed == (round(5000 * MALFORMED_RATE) if faults else 0)
    assert summary.lines == summary.orders + summary.malformed
    # About 40/30/20/10 %.
    shares = [summary.by_status[s] / summary.orders for s in STATUSES]
    assert shares == pytest.approx([0.4, 0.3, 0.2, 0.1], abs=0.03)


@pytest.mark.parametrize("faults", [False, True])
def test_valid_lines_are_the_order_sequence(tmp_path: Path, faults: bool) -> None:
    folder = tmp_path / "orders"
    generate_order_status(folder, events=2000, seed=9, faults=faults)
    lines = read_folder(folder)
    valid = [text for text in lines if valid_status(text) is not None]
    assert valid == expected_lines(9, 2000)
    if not faults:
        assert lines == valid


def test_lines_are_what_the_order_server_sends(tmp_path: Path) -> None:
    folder = tmp_path / "orders"
    generate_order_status(folder, events=300, seed=4)
    with OrderServer("127.0.0.1", 0, rate=0, count=300, seed=4) as server:
        stop = threading.Event()
        thread = threading.Thread(target=server.serve, args=(stop,), daemon=True)
        thread.start()
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
                received = b""
                while chunk := sock.recv(65536):
                    received += chunk
        finally:
            stop.set()
            thread.join(10)
    assert received.decode().splitlines() == read_folder(folder)


def test_malformed_lines_cover_every_kind() -> None:
    stream = OrderLines(events=30_000, seed=1, faults=True)
    kinds: Counter[str] = Counter()
    previous = ""
    for text, key in stream:
        assert key is None
        if valid_status(text) is not None:
            previous = text
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError:
            kinds["not_json"] += 1
            continue
        if not isinstance(record, dict) or "status" not in record:
            kinds["no_status"] += 1
        else:
            assert record["status"] not in STATUSES
            kinds["bad_status"] += 1
        # A broken line follows a valid order, and names it if it names any.
        if isinstance(record, dict) and "order_id" in record:
            assert record["order_id"] == json.loads(previous)["order_id"]
    assert set(kinds) == {"not_json", "no_status", "bad_status"}
    assert kinds.total() == stream.summary().malformed == 300


def test_a_single_order_with_faults_has_one_malformed_line() -> None:
    texts = [text for text, _ in OrderLines(events=1, faults=True)]
    assert len(texts) == 2
    assert texts[0] == expected_lines(0, 1)[0]
    assert valid_status(texts[1]) is None


@pytest.mark.parametrize("options", [{"events": 0}, {"events": 10, "lines_per_file": 0}])
def test_rejects_bad_arguments(tmp_path: Path, options: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        generate_order_status(tmp_path / "out", **options)
    assert not (tmp_path / "out").exists()


def test_rejects_a_malformed_kafka_url() -> None:
    with pytest.raises(UserError, match=r"^--out: expected kafka://HOST:PORT/TOPIC"):
        generate_order_status("kafka://host/orders", events=10)


def test_order_lines_are_read_once() -> None:
    stream = OrderLines(events=10)
    assert len(list(stream)) == 10
    with pytest.raises(RuntimeError):
        iter(stream)


def test_kafka_output_matches_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "orders"
    expected = generate_order_status(folder, events=1500, seed=4, faults=True)
    with Broker().start(["orders"]) as broker:
        summary = generate_order_status(
            f"kafka://{broker.servers}/orders", events=1500, seed=4, faults=True
        )
        messages = [
            (m.key(), m.value()) for m in consume(broker.servers, "orders", expect=summary.lines)
        ]
    assert summary == GenerationSummary(**{**expected.as_dict(), "files": 0})
    assert [value.decode() for _, value in messages] == read_folder(folder)
    assert all(key is None for key, _ in messages)
