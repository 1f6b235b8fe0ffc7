"""Spark's error texts as the one line a user sees (engine/runtime/errors.py)."""

from __future__ import annotations

import pytest

from engine.errors import KafkaUnavailable, UserError
from engine.runtime.errors import WorkerStartFailed, as_user_error, spark_error_line

PROXY = (
    "An exception was raised by the Python Proxy. Return Message: Traceback (most recent call "
    'last):\n  File "engine/sinks/writer.py", line 112, in _write\n    rows = part.count()\n'
)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            "[TABLE_OR_VIEW_NOT_FOUND] The table `x` cannot be found. SQLSTATE: 42P01\n== SQL ==",
            "[TABLE_OR_VIEW_NOT_FOUND] The table `x` cannot be found. SQLSTATE: 42P01",
        ),
        (
            "Job aborted.\norg.apache.spark.api.python.PythonException: Traceback:\n"
            "engine.errors.UserError: sql/x.sql: no rows\n",
            "sql/x.sql: no rows",
        ),
        (
            PROXY + "pyspark.errors.exceptions.captured.NumberFormatException: "
            "[CAST_INVALID_INPUT] The value 'EUR' cannot be cast to \"INT\". SQLSTATE: 22018\n"
            "== SQL (line 1, position 77) ==\n...CAST(currency AS INT) AS code FROM li...\n"
            "                ^^^^^^^^^^\n\n=== Streaming Query ===\nIdentifier: main\n",
            "[CAST_INVALID_INPUT] The value 'EUR' cannot be cast to \"INT\". "
            "(in SQL ...CAST(currency AS INT) AS code FROM li...)",
        ),
        (
            PROXY + "ValueError: a handler emitted 3 values\n\n=== Streaming Query ===\n"
            "org.apache.spark.SparkException: not this one\n",
            "ValueError: a handler emitted 3 values (engine/sinks/writer.py:112 in _write)",
        ),
        (
            PROXY + "pyspark.errors.exceptions.captured.PythonException: \n  An exception was "
            "thrown from the Python worker.\nTraceback (most recent call last):\n"
            '  File "/v/lib/python3.11/site-packages/pyspark/worker.py", line 9, in main\n'
            '  File "handlers/carts.py", line 67, in update\n    1 / 0\n'
            "ZeroDivisionError: division by zero\n",
            "ZeroDivisionError: division by zero (handlers/carts.py:67 in update)",
        ),
        (
            PROXY + "py4j.protocol.Py4JJavaError: An error occurred while calling o1091.count.\n"
            ": org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error "
            "while reading file file:///in/bad.json.gz.  SQLSTATE: KD001\n"
            "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.cannotReadFilesError(x:940)\n"
            "Caused by: java.io.IOException: wrapped\n\tat x.y(z:1)\n"
            "Caused by: java.io.EOFException: Unexpected end of input stream\n\tat x.y(z:2)\n",
            "[FAILED_READ_FILE.NO_HINT] Encountered error while reading file file:///in/bad.json.gz."
            " (EOFException: Unexpected end of input stream)",
        ),
        (
            PROXY + "py4j.protocol.Py4JJavaError: An error occurred while calling o1027.save.\n"
            ": org.apache.spark.sql.delta.schema.DeltaInvariantViolationException: "
            "[DELTA_NOT_NULL_CONSTRAINT_VIOLATED] NOT NULL constraint violated for column: "
            "currency.\n\tat org.apache.spark.sql.delta.A.b(c:1)\n",
            "[DELTA_NOT_NULL_CONSTRAINT_VIOLATED] NOT NULL constraint violated for column: "
            "currency.",
        ),
    ],
)
def test_the_line_a_user_sees(text: str, line: str) -> None:
    assert spark_error_line(Exception(text)) == line


def test_an_input_file_or_option_spark_refuses_is_a_usage_error() -> None:
    err = as_user_error(
        Exception(
            PROXY + "py4j.protocol.Py4JJavaError: An error occurred while calling o1.count.\n"
            ": org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error "
            "while reading file file:///in/a:b.json.  SQLSTATE: KD001\n"
        ),
        "query main: ",
    )
    assert isinstance(err, UserError)
    assert str(err) == (
        "query main: [FAILED_READ_FILE.NO_HINT] Encountered error while reading file "
        "file:///in/a:b.json."
    )
    option = "Invalid value 'abc' for option 'maxFilesPerTrigger', must be a positive integer"
    assert isinstance(as_user_error(Exception(option)), UserError)
    assert type(as_user_error(Exception("[DIVIDE_BY_ZERO] no"))) is RuntimeError


def test_kafka_data_loss_on_spark_connector_names_the_pipeline_option() -> None:
    text = (
        "Some data may have been lost because they are not available in Kafka any more;\n"
        "either the data was aged out by Kafka or the topic may have been deleted before all "
        "the data in the\ntopic was processed.\nIf you don't want your streaming query to fail "
        "on such cases, set the source option failOnDataLoss to false.\n"
        "Reason: Partition sensor-readings-0 offset was changed from 5030 to 0.\n"
        "This could be either 1) a user error that the start offset is set beyond available "
        "offset when starting query, or 2) the kafka topic-partition is deleted and re-created.\n"
    )
    err = as_user_error(Exception(text), "query main: ")
    assert isinstance(err, UserError)
    assert str(err) == (
        "query main: kafka source: the broker lost data the checkpoint had read (Partition "
        "sensor-readings-0 offset was changed from 5030 to 0); set source.failOnDataLoss=false "
        "to go on"
    )


class _Captured(Exception):
    """An error as pyspark hands a failed query's over: its cause and JVM traces kept aside."""

    def __init__(self, text: str, trace: str = "", cause: Exception | None = None) -> None:
        super().__init__(text)
        self._stackTrace = trace
        self._cause = cause


KAFKA_TIMEOUT = (
    "Job aborted due to stage failure: Task 0 in stage 10.0 failed 1 times, most recent "
    "failure: Lost task 0.0 in stage 10.0 (TID 16) (localhost executor driver): "
    "org.apache.kafka.common.errors.TimeoutException: Timeout of 60000ms expired before the "
    "position for partition sensor-readings-0 could be determined\n\tat x.y(z:1)\n"
)


def test_spark_kafka_client_giving_up_on_the_broker_names_it_and_is_retried() -> None:
    err = as_user_error(_Captured(KAFKA_TIMEOUT), "query main: ", kafka_servers="h:9092")
    assert isinstance(err, KafkaUnavailable)  # a continuous run retries it
    assert str(err) == (
        "query main: kafka broker h:9092 unreachable (kafka.bootstrap.servers): Timeout of "
        "60000ms expired before the position for partition sensor-readings-0 could be determined"
    )
    fetch = "java.util.concurrent.TimeoutException: Cannot fetch record for offset 1500 in "
    fetch += "3000 milliseconds\n\tat o.a.s.s.k.c.InternalKafkaConsumer.fetch(x:1)\n"
    err = as_user_error(_Captured("Job aborted", "", _Captured("", fetch)), kafka_servers="h:1")
    assert isinstance(err, KafkaUnavailable)
    assert str(err) == (
        "kafka broker h:1 unreachable (kafka.bootstrap.servers): Cannot fetch record for offset "
        "1500 in 3000 milliseconds"
    )
    # Without Spark's Kafka client in the run, the text is not taken for one of its errors.
    assert type(as_user_error(_Captured(KAFKA_TIMEOUT), "query main: ")) is RuntimeError


@pytest.mark.parametrize(
    "text",
    [
        # The Python source's worker, started as the query plans its first batch.
        "Python worker failed to connect back.",
        # A worker a task started.
        "Job aborted due to stage failure: Task 0 in stage 3.0 failed 1 times, most recent "
        "failure: Lost task 0.0 in stage 3.0 (TID 5) (localhost executor driver): "
        "org.apache.spark.SparkException: Python worker failed to connect back.",
    ],
)
def test_a_python_worker_that_did_not_start_in_time_is_restartable(text: str) -> None:
    err = as_user_error(_Captured(text), "query alerts: ", kafka_servers="h:9092")
    assert isinstance(err, WorkerStartFailed) and not isinstance(err, UserError)
    assert str(err).startswith("query alerts: ") and str(err).endswith("connect back")


def test_spark_kafka_client_refusing_the_settings_is_a_usage_error_with_its_reason() -> None:
    config = (
        "org.apache.kafka.common.KafkaException: Failed to create new KafkaAdminClient\n\tat a.b"
        "(c:1)\nCaused by: org.apache.kafka.common.config.ConfigException: The specified value "
        "of default.api.timeout.ms must be no smaller than the value of request.timeout.ms.\n"
    )
    failed = _Captured(
        "Failed to create new KafkaAdminClient", "\tat q.r(s:2)", _Captured("", config)
    )
    err = as_user_error(failed, "query main: ", kafka_servers="h:9092")
    assert isinstance(err, UserError) and not isinstance(err, KafkaUnavailable)
    assert str(err) == (
        "query main: kafka settings: The specified value of default.api.timeout.ms must be no "
        "smaller than the value of request.timeout.ms."
    )


def test_a_delta_source_table_rewritten_under_the_stream_says_what_to_do() -> None:
    # The text of Delta's error class for a MERGE's commit (a DELETE's is in test_chain.py).
    text = (
        "[DELTA_SOURCE_TABLE_IGNORE_CHANGES] Detected a data update (for example part-0.parquet)"
        " in the source table at version 7. This is currently not supported. If this is going "
        "to happen regularly and you are okay to skip changes, set the option "
        "'skipChangeCommits' to 'true'. If you would like the data update to be reflected, "
        "please restart this query with a fresh checkpoint directory. The source table can be "
        "found at path file:/lake/sessions. SQLSTATE: 0A000"
    )
    err = as_user_error(Exception(text), "query spend: ")
    assert isinstance(err, UserError)
    assert str(err) == (
        "query spend: delta source: the table /lake/sessions had rows deleted or rewritten in "
        "its version 7 (its pipeline's --full-refresh, a DELETE or a MERGE), which a stream of "
        "its appends cannot follow: run again with --full-refresh to read it from its start, or "
        "set source.skipChangeCommits=true to skip such versions"
    )


KEPT = (
    "-- The kept records.\nCREATE OR REPLACE TEMP VIEW kept AS\n"
    "SELECT id, round(amount, 'x') AS amount, CAST(currency AS INT) AS code FROM records\n"
)
CAST_FAILED = "[CAST_INVALID_INPUT] The value 'x' cannot be cast to \"INT\". SQLSTATE: 22018\n"


# (Spark's context under the error, where it is said to be; None: not told)
@pytest.mark.parametrize(
    ("context", "where"),
    [
        # The view named, its line cut at the end: line and column in the file.
        (
            "== SQL of VIEW kept (line 1, position 12) ==\n"
            "SELECT id, round(amount, 'x') AS amount, CAST(cur...\n           ^^^^^^^^\n",
            "kept.sql:3:12",
        ),
        # Cut at both ends, no view named: found by its text in the one file that has it.
        (
            "== SQL (line 1, position 42) ==\n...AS amount, CAST(currency AS INT) AS code...\n"
            "              ^^^^^^^^^^\n",
            "kept.sql:3:42",
        ),
        # Raised through the engine's writer: neither its frame nor the excerpt is repeated.
        (
            PROXY
            + "pyspark.errors.exceptions.captured.NumberFormatException: "
            + CAST_FAILED
            + "== SQL of VIEW kept (line 1, position 12) ==\n"
            "SELECT id, round(amount, 'x') AS amount, CAST(cur...\n           ^^^^^^^^\n",
            "kept.sql:3:12",
        ),
        # A step run on the batch: sqlglot wrote its SQL again on one line, so the
        # underlined text is what is found (case aside).
        (
            "== SQL (line 1, position 21) ==\n"
            "SELECT id, ROUND(amount, 'x') AS amount, CAST(currency AS INT) AS code FROM...\n"
            "                                         ^^^^^^^^^^^^^^^^^^^^^\n",
            "kept.sql:3:42",
        ),
        # No caret line: the line alone.
        (
            "== SQL of VIEW kept (line 1, position 12) ==\nSELECT id, round(amount, 'x')\n",
            "kept.sql:3",
        ),
        # Text in no file, or no context at all.
        ("== SQL (line 1, position 1) ==\nSELECT nothing of ours\n^\n", None),
        ("", None),
    ],
)
def test_an_error_in_a_views_sql_names_its_file_and_line(
    tmp_path, context: str, where: str | None
) -> None:
    kept = tmp_path / "kept.sql"
    kept.write_text(KEPT)
    (tmp_path / "records.sql").write_text("SELECT id, amount, currency FROM lines\n")
    views = {"kept": kept, "records": tmp_path / "records.sql"}
    found = as_user_error(Exception(CAST_FAILED + context), "query main: ", views=views)
    if where is None:
        assert type(found) is RuntimeError
        assert str(found) == "query main: " + CAST_FAILED.strip()
    else:
        assert type(found) is UserError
        assert str(found) == (
            f"query main: {tmp_path}/{where}: [CAST_INVALID_INPUT] The value 'x' cannot be cast "
            'to "INT".'
        )
