"""The TCP probe asked before Spark starts: addresses read from a setting, and refusals."""

from __future__ import annotations

import socket

import pytest

from engine.errors import KafkaUnavailable
from engine.reachable import endpoints, refusals
from engine.sinks.kafka import check_listening


@pytest.mark.parametrize(
    ("hosts", "expected"),
    [
        ("127.0.0.1:9092", [("127.0.0.1", 9092)]),
        ("a:1, b:2", [("a", 1), ("b", 2)]),
        ("PLAINTEXT://k1:9093,SASL_SSL://k2:9094", [("k1", 9093), ("k2", 9094)]),
        ("spark-master:7077/", [("spark-master", 7077)]),
        ("[::1]:9092", [("::1", 9092)]),
        ("kafka", [("kafka", 9092)]),
        ("[::1]", [("::1", 9092)]),
        ("", []),
        ("host:port", []),
    ],
)
def test_endpoints_of_a_list_of_servers(hosts, expected):
    assert endpoints(hosts, default_port=9092) == expected


def test_an_entry_without_a_port_and_no_default_is_left_out():
    assert endpoints("master, m2:7077") == [("m2", 7077)]


def test_refusals_stop_at_the_first_address_that_accepts():
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        assert refusals([("127.0.0.1", port)]) == []
    # The same port, closed now; a listening one after it still answers.
    assert refusals([("127.0.0.1", port)]) == [f"127.0.0.1:{port} Connection refused"]
    with socket.create_server(("127.0.0.1", 0)) as other:
        assert refusals([("127.0.0.1", port), other.getsockname()]) == []


def test_a_kafka_client_with_no_broker_listening_is_one_line():
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        check_listening({"bootstrap.servers": f"127.0.0.1:{port}"})
    with pytest.raises(KafkaUnavailable) as caught:
        check_listening({"bootstrap.servers": f"127.0.0.1:{port}"})
    assert str(caught.value) == (
        f"kafka broker 127.0.0.1:{port} unreachable (kafka.bootstrap.servers): "
        f"127.0.0.1:{port} Connection refused"
    )
