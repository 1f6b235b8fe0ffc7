"""Bad input through each pipeline's real parse SQL on Spark: a bad line goes to quarantine
with its exact reason, a good one keeps its values.

One table of (line, expected) per pipeline. The lines are written to a real file and read by
Spark's text source, which keeps bytes that are not UTF-8, then parsed by the pipeline's own
parse and quarantine views as a batch (no streaming run, to keep it fast), and by the view
whose expectations hold a readable line to the rules on its values. Every JSON object
line is also parsed with an extra key in front, which makes it irregular: the from_json path
and the VARIANT path must give the same answer. One test runs server_logs end to end, to show
that no absurd time reaches the watermark or the handlers, and one reads a Kafka topic.
"""

from __future__ import annotations

import base64
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from engine.definitions.pipeline import Registry
from engine.definitions.sql import load_step
from engine.plan import plan_pipeline
from engine.project import Project
from engine.runtime.expectations import rejected_rows
from engine.runtime.run import RunOptions, run_pipeline
from engine.scaffold import init_pipeline
from tests.conftest import PROJECT, produce, read_table

OK = "usable"  # expected for a usable line whose values are not compared
UTF8 = "invalid UTF-8 (raw is base64)"

# pipeline: (raw view, parse view, the values of a usable row as SQL expressions)
PARSE = {
    "server_logs": (
        "raw_logs",
        "parsed_logs",
        [
            "customer_id",
            "CAST(event_time AS STRING)",
            "event_type",
            "to_json(items)",
            "source",
        ],
    ),
    "user_activity": (
        "raw_activity",
        "activity_records",
        [
            "user",
            "CAST(event_time AS STRING)",
            "CAST(arrival_time AS STRING)",
            "activity",
            "device",
            "model",
            "reading_index",
            "x",
            "y",
            "z",
        ],
    ),
    "sensor_cep": (
        "raw_readings",
        "sensor_readings",
        ["device_id", "sensor_freq", "CAST(event_time AS STRING)", "is_anomalous"],
    ),
    "order_status": ("raw_orders", "orders", ["order_id", "status"]),
}
# pipeline: the view whose DROP ROW expectations judge the parse view's readable rows
CHECKED = {"server_logs": "checked_lines", "sensor_cep": "valid_readings"}


def parse(
    spark: SparkSession,
    folder: Path,
    pipeline: str,
    lines: list[str | bytes],
    *,
    mtime: float | None = None,
) -> tuple[list[Any], dict[str, str]]:
    """Each line's result (its reject reason, or its values) and the quarantine's raw: reason."""
    folder.mkdir(parents=True)
    path = folder / "part-1.json"
    path.write_bytes(b"".join((x if isinstance(x, bytes) else x.encode()) + b"\n" for x in lines))
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    session = spark.newSession()  # the views stay out of the shared session
    raw_view, parse_view, values = PARSE[pipeline]
    # The columns engine/sources gives a folder of files, read once instead of streamed.
    session.read.text(str(path)).selectExpr(
        "value",
        "_metadata.file_path AS origin",
        "_metadata.file_modification_time AS timestamp",
    ).createOrReplaceTempView(raw_view)
    for view in (parse_view, "quarantine"):
        session.sql((PROJECT / "sql" / pipeline / f"{view}.sql").read_text())
    # The lines the expectations drop, by their raw text (the engine's own rows for quarantine).
    dropped: dict[str, str] = {}
    if pipeline in CHECKED:
        step = load_step(PROJECT / "sql" / pipeline / f"{CHECKED[pipeline]}.sql")
        session.sql(step.sql)
        at = int(NOW.timestamp() * 1000)
        rejects = rejected_rows(session, step, pipeline=pipeline, root=PROJECT, batch_ms=at)
        rejects = rejects.collect()
        assert {r.source for r in rejects} <= {f"sql/{pipeline}/{CHECKED[pipeline]}.sql"}
        dropped = {json.loads(r.raw)["raw"]: r.reason for r in rejects}
    # One partition: the rows come in the file's order.
    rows = session.table(parse_view).selectExpr("reject_reason", "raw", *values).collect()
    assert len(rows) == len(lines)
    assert not [r for r in rows if "\ufffd" in str(r)], "a replacement character got through"
    results = [r[0] or dropped.get(r[1]) or tuple(r[2:]) for r in rows]
    quarantine = {r.raw: r.reason for r in session.table("quarantine").collect()}
    assert not quarantine.keys() & dropped.keys(), "a line quarantined twice"
    return results, quarantine | dropped


def raw_text(line: str | bytes) -> str:
    """What the quarantine keeps of a line: its text, or the base64 of its bytes."""
    if isinstance(line, str):
        return line
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        return b64(line)


def check_table(
    spark,
    tmp_path: Path,
    pipeline: str,
    cases: list[tuple[str | bytes, Any]],
) -> None:
    """Every case gives its expected reason or values, on both parse paths, and every rejected
    line is in the quarantine with the same reason."""
    lines, expected = [c[0] for c in cases], [c[1] for c in cases]
    for line, want in cases:
        if isinstance(line, str) and line.startswith('{"'):
            lines.append('{"extra": 0, ' + line[1:])  # the same line, read as VARIANT
            expected.append(want)
    results, quarantine = parse(spark, tmp_path / pipeline, pipeline, lines)
    # A usable line expected as OK matches whatever its values are.
    got = [
        OK if want == OK and not isinstance(r, str) else r
        for r, want in zip(results, expected, strict=True)
    ]
    wrong = [(line, g, w) for line, g, w in zip(lines, got, expected, strict=True) if g != w]
    assert wrong == []
    rejected = {
        raw_text(line): want
        for line, want in zip(lines, expected, strict=True)
        if isinstance(want, str) and want != OK
    }
    assert quarantine == rejected


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# ---- server_logs ---------------------------------------------------------------------------

ADD = '{"AddToCart":{"ProductId":"116_PId","Price":1.0}}'


def log(
    ts: str = '"20:06:2019 0:46:1"',
    cid: str = '"1028_CId"',
    event: str = ADD,
    source: str = '"www.filpkart.tablet.com"',
) -> str:
    """A server-log line; every argument is a JSON fragment."""
    return f'{{"timestamp":{ts},"CustomerId":{cid},"EventType":{event},"Source":{source}}}'


def item(price: str = '"12.5$"', quantity: str = "2", product: str = '"200_PId"') -> str:
    return f'{{"ProductId":{product},"Price":{price},"Quantity":{quantity}}}'


def buys(*items: str) -> str:
    return f'{{"Purchase":[{",".join(items)}]}}'


def buy(**fields: str) -> str:
    """A Purchase of one item (`item`'s fields)."""
    return buys(item(**fields))


ITEM = item()


def stamp(moment: datetime) -> str:
    return f'"{moment.day}:{moment.month}:{moment.year} {moment.hour}:{moment.minute}:0"'


def at(year: int) -> str:
    return f'"20:06:{year:04d} 0:46:1"'


NOW = datetime.now(UTC)
ADDED = (
    "1028_CId",
    "2019-06-20 00:46:01",
    "add_to_cart",
    '[{"product_id":"116_PId","price":1.0,"quantity":1}]',
    "www.filpkart.tablet.com",
)
BOUGHT = (
    "1028_CId",
    "2019-06-20 00:46:01",
    "purchase",
    '[{"product_id":"200_PId","price":12.5,"quantity":2}]',
    "www.filpkart.tablet.com",
)
SERVER_LOGS: list[tuple[str | bytes, Any]] = [
    (log(), ADDED),
    (log(event=buy()), BOUGHT),
    (log(source='"LoggedOut"'), (*ADDED[:4], "LoggedOut")),
    # The reasons from the start.
    ("", "empty line"),
    ("   ", "empty line"),
    ('{"timestamp":"20:06:2019 0:46:1","CustomerId"', "malformed JSON"),
    ("GET /cart HTTP/1.1 502", "malformed JSON"),
    ('{"a":1,"a":2}', "malformed JSON"),  # a duplicate key
    ("{}", "missing CustomerId"),
    (log(cid='" "'), "missing CustomerId"),
    (log(cid="null"), "missing CustomerId"),
    (log(ts="null"), "missing timestamp"),
    (log(ts='"yesterday"'), "unparseable timestamp: yesterday"),
    (log(ts='"31:6:2019 10:4:5"'), "unparseable timestamp: 31:6:2019 10:4:5"),
    (log(event='{"Refund":{}}'), "missing or unknown EventType"),
    (log(event='{"Purchase":[]}'), "Purchase without items"),
    (log(event='{"AddToCart":{"Price":1.0}}'), "item without ProductId"),
    (log(event=buy(price='"abc$"')), "missing, negative or unparseable Price"),
    (log(event=buy(price='"-1$"')), "missing, negative or unparseable Price"),
    (log(event=buy(price='"-Infinity$"')), "missing, negative or unparseable Price"),
    (log(event=buy(quantity="0")), "missing or non-positive Quantity"),
    (log(event=buy(quantity='"abc"')), "missing or non-positive Quantity"),
    # The item checks on a Purchase of several items, and on a null field or item.
    (log(event=buy(product="null")), "item without ProductId"),
    (log(event=buy(price="null")), "missing, negative or unparseable Price"),
    (log(event=buy(quantity="null")), "missing or non-positive Quantity"),
    (log(event=buys(ITEM, "null")), "item without ProductId"),
    (log(event=buys(ITEM, item(price='"-0.5$"'))), "missing, negative or unparseable Price"),
    (log(event=buys(item(price="null"), ITEM)), "missing, negative or unparseable Price"),
    (log(event=buys(ITEM, item(quantity="0"))), "missing or non-positive Quantity"),
    (log(event=buys(ITEM, item(quantity="-1"))), "missing or non-positive Quantity"),
    (
        log(event=buys(item(product='""', price='"0$"'), ITEM)),
        (
            *BOUGHT[:3],
            '[{"product_id":"","price":0.0,"quantity":2},'
            '{"product_id":"200_PId","price":12.5,"quantity":2}]',
            BOUGHT[4],
        ),
    ),
    # Not UTF-8: kept as base64, not parsed.
    (log(cid='"10\xff28_CId"').encode("latin-1"), UTF8),
    (b"\xc3\x28", UTF8),  # a lead byte without its continuation
    (b"\xc0\xaf", UTF8),  # an overlong '/'
    (b"\xed\xa0\x80", UTF8),  # a surrogate
    (b'{"CustomerId":"\xe2\x82"}', UTF8),  # cut inside a character
    # Wrong JSON types: not coerced.
    (log(cid='{"id":1}'), "wrong type: CustomerId is OBJECT, expected STRING"),
    (log(cid='["1028_CId"]'), "wrong type: CustomerId is ARRAY, expected STRING"),
    (log(cid="true"), "wrong type: CustomerId is BOOLEAN, expected STRING"),
    (log(cid="1028"), "wrong type: CustomerId is INTEGER, expected STRING"),
    (log(cid="10.5"), "wrong type: CustomerId is DECIMAL, expected STRING"),
    (log(source="false"), "wrong type: Source is BOOLEAN, expected STRING"),
    (log(source="1e3"), "wrong type: Source is DOUBLE, expected STRING"),
    (
        log(event='{"ProductView":{"ProductId":116,"Price":1.0}}'),
        "wrong type: ProductId is INTEGER, expected STRING",
    ),
    (
        log(event='{"AddToCart":{"ProductId":"116_PId","Price":"1.0"}}'),
        "wrong type: Price is STRING, expected NUMBER",
    ),
    (
        log(event='{"AddToCart":{"ProductId":"116_PId","Price":true}}'),
        "wrong type: Price is BOOLEAN, expected NUMBER",
    ),
    (log(event=buy(quantity="1.5")), "wrong type: Quantity is DECIMAL, expected INTEGER"),
    (log(event=buy(quantity='"2"')), "wrong type: Quantity is STRING, expected INTEGER"),
    (log(event=buy(price="12.5")), "wrong type: Price is DECIMAL, expected STRING"),
    (log(event=buy(product="true")), "wrong type: ProductId is BOOLEAN, expected STRING"),
    # Times out of range, before any watermark sees them.
    (log(ts=at(9999)), "expectation event_time_in_range"),
    (log(ts=at(2200)), "expectation event_time_in_range"),
    (log(ts=at(1)), "expectation event_time_in_range"),
    (log(ts=at(1969)), "expectation event_time_in_range"),
    (log(ts='"31:12:1999 23:59:59"'), "expectation event_time_in_range"),
    (log(ts='"1:1:2000 0:0:0"'), (*ADDED[:1], "2000-01-01 00:00:00", *ADDED[2:])),
    (log(ts=stamp(NOW + timedelta(hours=1))), OK),
    (
        log(ts=stamp(NOW + timedelta(days=2))),
        "expectation event_time_in_range",
    ),
    # Numbers that are not finite.
    (log(event=buy(price='"NaN$"')), "expectation finite_prices"),
    (log(event=buy(price='"Infinity$"')), "expectation finite_prices"),
    (log(event=buy(price='"1e309$"')), "expectation finite_prices"),
    (log(event=buy(price='"1e308$"')), "expectation finite_amounts"),
    (
        log(event=buy(price='"1e308$"', quantity="1")),
        (*BOUGHT[:3], '[{"product_id":"200_PId","price":1.0E308,"quantity":1}]', BOUGHT[4]),
    ),
    (
        log(event='{"AddToCart":{"ProductId":"116_PId","Price":1e400}}'),
        "expectation finite_prices",
    ),
    # Text after the object (both parsers stop at its end) and two event types in one line:
    # nothing is cut off unseen.
    (log() + " xyz", "text after the JSON object"),
    (log() + "}", "text after the JSON object"),
    (log() + " {}", "text after the JSON object"),
    (log() + ",", "text after the JSON object"),
    (log() + "\x00", "text after the JSON object"),
    (log() + log(), "text after the JSON object"),
    (log() + ", " + log(), "text after the JSON object"),
    (log() + " \t", ADDED),
    (log(source='"www.{shop}.com"'), (*ADDED[:4], "www.{shop}.com")),
    (
        log(event='{"ProductView":{"ProductId":"1","Price":1.0},"Purchase":[' + ITEM + "]}"),
        ("more than one EventType"),
    ),
    (
        log(event=ADD[:-1] + ',"ProductView":{"ProductId":"1","Price":1.0}}'),
        ("more than one EventType"),
    ),
    # A Purchase price is a number with a $ before or after it, nothing else Java would parse.
    (log(event=buy(price='"12$5"')), "missing, negative or unparseable Price"),
    (log(event=buy(price='"0x1p3$"')), "missing, negative or unparseable Price"),
    (log(event=buy(price='"12.5f$"')), "missing, negative or unparseable Price"),
    (log(event=buy(price='"7d"')), "missing, negative or unparseable Price"),
    (log(event=buy(price='"$12.5"')), BOUGHT),
    (log(event=buy(price='" 12.5 $ "')), BOUGHT),
    (log(event=buy(price='"1.25e1$"')), BOUGHT),
]


def test_server_logs_bad_lines(spark, tmp_path):
    check_table(spark, tmp_path, "server_logs", SERVER_LOGS)


# ---- user_activity -------------------------------------------------------------------------

CREATED = 1424686733000000000  # 2015-02-23 10:18:53 UTC


def record(**fields: str) -> str:
    """An activity record; every value is a JSON fragment, None leaves the field out."""
    base = {
        "Arrival_Time": "1424686733040",
        "Creation_Time": str(CREATED),
        "Device": '"nexus4_1"',
        "Index": "1",
        "Model": '"nexus4"',
        "User": '"a"',
        "gt": '"stand"',
        "x": "0.01",
        "y": "-0.02",
        "z": "0.03",
    }
    base.update(fields)
    return "{" + ", ".join(f'"{k}": {v}' for k, v in base.items() if v is not None) + "}"


def ns(year: int) -> str:
    return str(int(datetime(year, 1, 1, tzinfo=UTC).timestamp()) * 1_000_000_000)


RECORD = (
    "a",
    "2015-02-23 10:18:53",
    "2015-02-23 10:18:53.04",
    "stand",
    "nexus4_1",
    "nexus4",
    1,
    0.01,
    -0.02,
    0.03,
)
USER_ACTIVITY: list[tuple[str | bytes, Any]] = [
    (record(), RECORD),
    (record(Arrival_Time=None), (*RECORD[:2], None, *RECORD[3:])),
    # The reasons from the start.
    ("garbage {", "malformed JSON"),
    (record(User=None), "missing User"),
    (record(User='""'), "missing User"),
    (record(Creation_Time='"soon"'), "missing or non-numeric Creation_Time"),
    (record(Creation_Time="1e30"), "missing or non-numeric Creation_Time"),
    (record(gt=None), "missing gt (activity)"),
    # Not UTF-8.
    (record(User='"\xe9"').encode("latin-1"), UTF8),
    # Wrong JSON types.
    (record(User="true"), "wrong type: User is BOOLEAN, expected STRING"),
    (record(User='{"name":"a"}'), "wrong type: User is OBJECT, expected STRING"),
    (record(gt="[1]"), "wrong type: gt is ARRAY, expected STRING"),
    (record(Device="7"), "wrong type: Device is INTEGER, expected STRING"),
    (record(Creation_Time=f'"{CREATED}"'), "wrong type: Creation_Time is STRING, expected INTEGER"),
    (
        record(Creation_Time="1.4246867330000001E18"),
        "wrong type: Creation_Time is DOUBLE, expected INTEGER",
    ),
    (
        record(Arrival_Time="1424686733040.5"),
        "wrong type: Arrival_Time is DECIMAL, expected INTEGER",
    ),
    (record(Index="1.5"), "wrong type: Index is DECIMAL, expected INTEGER"),
    (record(x='"0.01"'), "wrong type: x is STRING, expected NUMBER"),
    (record(z="false"), "wrong type: z is BOOLEAN, expected NUMBER"),
    # Times out of range.
    (record(Creation_Time=ns(2200)), f"Creation_Time out of range: {ns(2200)}"),
    (record(Creation_Time=ns(1969)), f"Creation_Time out of range: {ns(1969)}"),
    (
        record(Creation_Time="-9223372036854775808"),
        "Creation_Time out of range: -9223372036854775808",
    ),
    (record(Arrival_Time="1"), "Arrival_Time out of range: 1"),
    (record(Arrival_Time="9223372036854775807"), "Arrival_Time out of range: 9223372036854775807"),
    # Past BIGINT: it was read as a missing Arrival_Time, and the record kept as an event.
    (record(Arrival_Time="1" + "0" * 20), "Arrival_Time out of range: 1" + "0" * 20),
    # Numbers that are not finite.
    (record(x="1e400"), "non-finite number: x"),
    (record(y="-1e400"), "non-finite number: y"),
    (record(z="1" + "0" * 400), "non-finite number: z"),
    # Text after the object, which both parsers would leave unread.
    (record() + " xyz", "text after the JSON object"),
    (record() + "}", "text after the JSON object"),
    (record() + record(), "text after the JSON object"),
    (record() + ", " + record(), "text after the JSON object"),
    (record() + " ", OK),
    (record(gt='"st}and"'), OK),
]


def test_user_activity_bad_records(spark, tmp_path):
    check_table(spark, tmp_path, "user_activity", USER_ACTIVITY)


# ---- sensor_cep ----------------------------------------------------------------------------


def reading(
    device: str = "377412", freq: str = "44.49", time: str = '"2023-04-12 10:15:30.123"'
) -> str:
    return f'{{"device_id": {device}, "sensor_freq": {freq}, "event_time": {time}}}'


READING = ("377412", 44.49, "2023-04-12 10:15:30.123", False)
SENSOR_CEP: list[tuple[str | bytes, Any]] = [
    (reading(), READING),
    (reading(device='"377412"'), READING),
    (reading(freq="-5"), ("377412", -5.0, READING[2], True)),
    # The reasons from the start.
    ('{"device_id": 1', "malformed JSON"),
    (reading(device="null"), "missing device_id"),
    (reading(freq="null"), "missing or non-numeric sensor_freq"),
    (reading(freq='"fast"'), "missing or non-numeric sensor_freq"),
    ('{"device_id": 377412, "sensor_freq": 44.49}', "missing event_time"),
    (reading(time='"yesterday"'), "unparseable event_time: yesterday"),
    # Not UTF-8.
    (reading(device='"dev\xfc"').encode("latin-1"), UTF8),
    # Wrong JSON types.
    (reading(device="true"), "wrong type: device_id is BOOLEAN, expected STRING or INTEGER"),
    (reading(device="3.5"), "wrong type: device_id is DECIMAL, expected STRING or INTEGER"),
    (reading(device='{"id":1}'), "wrong type: device_id is OBJECT, expected STRING or INTEGER"),
    (reading(freq='"44.49"'), "wrong type: sensor_freq is STRING, expected NUMBER"),
    (reading(freq="true"), "wrong type: sensor_freq is BOOLEAN, expected NUMBER"),
    # Times out of range.
    (reading(time='"9999-12-31 23:59:59"'), "expectation event_time_in_range"),
    (reading(time='"2200-01-01 00:00:00"'), "expectation event_time_in_range"),
    (reading(time='"0001-01-01 00:00:00"'), "expectation event_time_in_range"),
    (reading(time='"1969-12-31 23:59:59"'), "expectation event_time_in_range"),
    # Numbers that are not finite.
    (reading(freq="1e400"), "expectation finite_sensor_freq"),
    (reading(freq="-1e400"), "expectation finite_sensor_freq"),
    # Text after the object.
    (reading() + " xyz", "text after the JSON object"),
    (reading() + " {}", "text after the JSON object"),
    (reading() + reading(), "text after the JSON object"),
    (reading() + "\t", READING),
]


def test_sensor_cep_bad_readings(spark, tmp_path):
    check_table(spark, tmp_path, "sensor_cep", SENSOR_CEP)


# ---- order_status --------------------------------------------------------------------------

ORDER_STATUS: list[tuple[str | bytes, Any]] = [
    ('{"order_id": "o-00000001", "status": "PLACED"}', ("o-00000001", "PLACED")),
    # The reasons from the start.
    ("order_id,status", "malformed JSON"),
    ('["o-00000001", "PLACED"]', "missing order_id"),
    ('{"order_id": "o-00000001"}', "missing status"),
    ('{"order_id": "o-00000001", "status": "SHIPPED"}', "unknown status: SHIPPED"),
    ('{"order_id": "o-00000001", "status": 3}', "unknown status: 3"),
    # Not UTF-8.
    (b'{"order_id": "o-\xff", "status": "PLACED"}', UTF8),
    # Wrong JSON types.
    ('{"order_id": 17, "status": "PLACED"}', "wrong type: order_id is INTEGER, expected STRING"),
    (
        '{"order_id": {"n": 17}, "status": "PLACED"}',
        "wrong type: order_id is OBJECT, expected STRING",
    ),
    # Text after the object.
    ('{"order_id": "o-00000001", "status": "PLACED"} xyz', "text after the JSON object"),
    (
        '{"order_id": "o-1", "status": "PLACED"}{"order_id": "o-2", "status": "PLACED"}',
        ("text after the JSON object"),
    ),
    ('{"order_id": "o-1", "status": "PLACED"}, {}', "text after the JSON object"),
    ('{"order_id": "o-00000001", "status": "PLACED"}  ', ("o-00000001", "PLACED")),
]


def test_order_status_bad_lines(spark, tmp_path):
    check_table(spark, tmp_path, "order_status", ORDER_STATUS)


def test_order_arrival_time_out_of_range(spark, tmp_path):
    # A file's lines arrive at its modification time; a Kafka producer may set any time.
    line = '{"order_id": "o-00000001", "status": "PLACED"}'
    results, quarantine = parse(
        spark,
        tmp_path / "old",
        "order_status",
        [line],
        mtime=datetime(1999, 12, 31, tzinfo=UTC).timestamp(),
    )
    assert results == ["arrival_time out of range: 1999-12-31 00:00:00"]
    assert quarantine == {line: results[0]}


# ---- end to end ----------------------------------------------------------------------------


def test_absurd_times_do_not_poison_the_watermark_or_reach_the_handlers(spark, tmp_path):
    """Years 9999 and 2200 used to stop the run (a handler's Arrow cast) or move the watermark
    past every later line; 0001 and 1969 were counted as late. Now all four are quarantined
    and the valid line after them is an event, in a session."""
    folder = tmp_path / "in"
    folder.mkdir()
    # One file per batch: the watermark the first batch leaves is the one the second applies.
    batches = [
        [log(), log(ts=at(9999)), log(ts=at(2200)), log(cid='"10\xff28_CId"').encode("latin-1")],
        [
            log(ts=at(1)),
            log(ts=at(1969)),
            log(ts='"20:06:2019 0:47:0"', event=buy(price='"NaN$"')),
            log(ts='"20:06:2019 0:47:1"'),
        ],
    ]
    for number, lines in enumerate(batches, start=1):
        path = folder / f"part-{number}.json"
        path.write_bytes(
            b"".join((x if isinstance(x, bytes) else x.encode()) + b"\n" for x in lines)
        )
        os.utime(path, (1_700_000_000 + number, 1_700_000_000 + number))
    pipeline = Registry().get("server_logs").with_settings({"source.maxFilesPerTrigger": "1"})
    lake = tmp_path / "lake"
    opts = RunOptions(lake=lake, once=True, input_path=str(folder), quiet=True)
    result = run_pipeline(spark, plan_pipeline(pipeline, once=True), opts)

    events = read_table(lake, "events")
    assert [str(e["event_time"].replace(tzinfo=None)) for e in events] == [
        "2019-06-20 00:46:01",
        "2019-06-20 00:47:01",
    ]
    (session,) = read_table(lake, "sessions")
    assert (session["customer_id"], session["total_events"]) == ("1028_CId", 2)
    # A line an expectation dropped is kept with its fields as JSON, the line as read among them.
    reasons = sorted(
        (
            r["reason"],
            json.loads(r["raw"])["raw"] if r["reason"].startswith("expectation") else r["raw"],
        )
        for r in read_table(lake, "quarantine")
    )
    assert reasons == sorted(
        [
            (UTF8, b64(log(cid='"10\xff28_CId"').encode("latin-1"))),
            ("expectation finite_prices", log(ts='"20:06:2019 0:47:0"', event=buy(price='"NaN$"'))),
            *(("expectation event_time_in_range", log(ts=at(y))) for y in (1, 1969, 2200, 9999)),
        ]
    )
    totals = result.listener.totals["main"]
    assert (totals.source_rows, totals.accepted, totals.duplicates, totals.late) == (8, 2, 0, 0)


# ---- Kafka ---------------------------------------------------------------------------------


@pytest.mark.parametrize("connector", ["native", "python"])
def test_kafka_values_that_are_not_utf8_keep_their_bytes(spark, broker, tmp_path, connector):
    """Spark's connector casts the value's bytes to STRING as they are, and so does the Python
    source: the parse SQL sees them, quarantines the record and keeps its bytes in base64."""
    from engine.sources.streams import open_source

    bad = reading(device='"dev\xfc"').encode("latin-1")
    produce(broker.servers, "sensor-readings", [reading(), bad])
    pipeline = Registry().get("sensor_cep")
    pipeline = pipeline.with_settings(
        {"source.connector": connector, "kafka.bootstrap.servers": broker.servers}
    )
    session = spark.newSession()
    stream = open_source(session, pipeline)
    stream.createOrReplaceTempView("raw_readings")
    for view in ("sensor_readings", "quarantine"):
        session.sql((PROJECT / "sql" / "sensor_cep" / f"{view}.sql").read_text())
    name = f"parsed_{connector}"
    query = (
        session.table("sensor_readings")
        .selectExpr("raw", "device_id", "reject_reason")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(120)
    finally:
        query.stop()
    rows = sorted(tuple(r) for r in session.table(name).collect())
    assert rows == sorted([(reading(), "377412", None), (b64(bad), None, UTF8)])


def _record(**fields: str) -> str:
    values = {"id": '"w1"', "amount": "1.0", "currency": '"EUR"', "event_time": '"2026-01-08"'}
    return "{" + ", ".join(f'"{k}": {v}' for k, v in (values | fields).items()) + "}"


# A line of `init`'s records, and whether its `lines` view calls it malformed. from_json alone
# read a number or an object into a text field as its text, kept the last of a key given
# twice and dropped text after the object: all kept unseen (found by a user of init).
INIT_LINES = [
    (_record(), False),
    (_record(amount="4"), False),
    (_record(currency="null"), False),
    ('{"id": "w1", "amount": 1.0}', False),  # absent fields are the rules' to judge
    (_record(id="5"), True),
    (_record(id='{"x": 1}'), True),
    (_record(currency='["EUR"]'), True),
    (_record(currency="12"), True),
    (_record(currency="true"), True),
    (_record(event_time="1767866409"), True),
    (_record() + " trailing", True),
    (_record() + _record(), True),
    (_record() + ", " + _record(), True),
    (_record()[:-1] + ', "id": "w7"}', True),
    (_record(amount="NaN"), True),
    (_record(amount='"12.5"'), True),
    ("[1, 2]", True),
    ('"just text"', True),
    ("not json at all", True),
]


def test_the_init_templates_lines_are_malformed_unless_of_the_records_shape(spark, tmp_path):
    init_pipeline("shop", Project(tmp_path / "shop"))
    path = tmp_path / "part-1.json"
    path.write_text("".join(line + "\n" for line, _ in INIT_LINES))
    session = spark.newSession()  # the views stay out of the shared session
    session.read.text(str(path)).selectExpr(
        "value", "_metadata.file_path AS origin", "_metadata.file_modification_time AS timestamp"
    ).createOrReplaceTempView("raw_shop")
    session.sql((tmp_path / "shop" / "sql" / "shop" / "lines.sql").read_text())
    got = [(r.raw, r.malformed) for r in session.table("lines").collect()]  # one partition
    assert got == INIT_LINES
