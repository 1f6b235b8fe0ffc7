"""A pipeline spec that is not what the engine reads (YAML that does not parse, a key repeated
or misspelt at any level, a value of the wrong type) is one line naming the file and the key,
exit 2, never a Python error; the spec `init` writes is the starting point of each case."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.commands import main
from engine.definitions.pipeline import Registry
from engine.errors import UserError
from engine.project import Project
from engine.scaffold import init_pipeline


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """The `pipelines/` folder of a project holding only what `init shop` writes."""
    init_pipeline("shop", Project(tmp_path))
    return tmp_path / "pipelines"


def _edit(folder: Path, old: str, new: str) -> Path:
    """Replace `old` (which must be there) with `new` in pipelines/shop.yaml."""
    path = folder / "shop.yaml"
    spec = path.read_text()
    assert old in spec, old
    path.write_text(spec.replace(old, new, 1))
    return path


KNOWN_TOP = "name, description, source, sql, handlers, tables, topics, queries, settings, kafka"
QUERY_KEYS = "sinks, topics, trigger, pool, output_mode"
TABLES = "  shop: kept\n  quarantine: quarantine\n"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        # Misspelt keys, at every level.
        ("settings: {}", "colour: red", f"unknown key 'colour' (known: {KNOWN_TOP})"),
        (
            "  options:",
            "  optons:",
            "unknown key 'optons' in source (known: view, kind, path, table, options)",
        ),
        (
            "settings: {}",
            "queries:\n  main:\n    triger: 5 seconds",
            f"unknown key 'triger' in queries.main (known: {QUERY_KEYS})",
        ),
        (
            "settings: {}",
            "handlers:\n  h:\n    clas: x.y:Z\n    input: records",
            "unknown key 'clas' in handlers.h (known: class, input)",
        ),
        # A key given twice: PyYAML would keep the last one.
        (
            "sql: sql/shop",
            "sql: sql/shop\nsql: sql/other",
            "line 11, column 1: key 'sql' repeated (first at line 10)",
        ),
        # Values of the wrong type.
        (TABLES, "  [shop]\n", "tables: expected a mapping (table: view), got a list"),
        ("settings: {}", "settings: [1]", "settings: expected a mapping (name: value), got a list"),
        (
            "  quarantine: quarantine",
            "  quarantine:",
            "tables.quarantine: expected a view name, got nothing",
        ),
        (
            "  options:\n    maxFilesPerTrigger: 10",
            "  options: x",
            "source.options: expected a mapping (option: value), got the text 'x'",
        ),
        (
            "maxFilesPerTrigger: 10",
            "maxFilesPerTrigger: [10]",
            "source.options.maxFilesPerTrigger: expected a single value, got a list",
        ),
        (
            "settings: {}",
            "queries: [main]",
            "queries: expected a mapping (query name: how it runs), got a list",
        ),
        (
            "settings: {}",
            "queries:\n  main:\n    trigger: 5",
            "queries.main.trigger: expected a duration such as '5 seconds', or real-time, "
            "got the number 5",
        ),
        ("path: data/shop", "path: 5", "source.path: expected a folder, got the number 5"),
        ("sql: sql/shop", "sql: 5", "sql: expected a folder (sql/<pipeline>), got the number 5"),
        ("kind: files", "kind: [files]", "source.kind: expected text, got a list"),
        (
            "view: raw_shop",
            "view: yes",
            "source.view: expected a view name, got true (a yes/no value)",
        ),
        (
            "settings: {}",
            "handlers: [h]",
            "handlers: expected a mapping (handler name: its class and input), got a list",
        ),
        (
            "settings: {}",
            "handlers:\n  h:\n    input: records",
            "missing 'handlers.h.class'",
        ),
        (
            "settings: {}",
            "settings: {1: a}",
            "settings: key 1 is the number 1, not text; quote it: '1'",
        ),
        (
            "settings: {}",
            "kafka:\n  bootstrap.servers:",
            "kafka.bootstrap.servers: expected a single value, got nothing",
        ),
        (
            "settings: {}",
            "kafka:\n  bootstrap.servers: ' '",
            "kafka.bootstrap.servers: empty; give HOST:PORT[,HOST:PORT]",
        ),
        (
            "description: Records read",
            "description: [Records]  #",
            "description: expected text, got a list",
        ),
        # A misspelt source option: Spark's reader ignored it (the whole folder in one batch).
        (
            "maxFilesPerTrigger: 10",
            "maxFilesPerTriger: 10",
            "source.options.maxFilesPerTriger: not an option of a files source; did you mean "
            "maxFilesPerTrigger? (options: maxFilesPerTrigger, maxBytesPerTrigger, latestFirst, "
            "fileNameOnly, maxFileAge, maxCachedFiles, discardCachedInputRatio, cleanSource, "
            "sourceArchiveDir, pathGlobFilter, recursiveFileLookup, modifiedBefore, "
            "modifiedAfter, ignoreCorruptFiles, ignoreMissingFiles, wholetext, lineSep)",
        ),
        (
            "kind: files",
            "kind: socket",
            "source.options.maxFilesPerTrigger: not an option of a socket source (options: "
            "host, port)",
        ),
    ],
)
def test_a_bad_spec_is_one_line_naming_file_and_key(
    folder: Path, old: str, new: str, message: str
) -> None:
    path = _edit(folder, old, new)
    with pytest.raises(UserError) as err:
        Registry(folder).get("shop")
    assert str(err.value) == f"{path}: {message}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "name: shop\nsource:\n\tview: x\n",
            "line 3, column 1: found character '\\t' that cannot start any token",
        ),
        (
            "name: shop\nsettings: [a, b\n",
            "line 3, column 1: expected ',' or ']', but got '<stream end>' "
            "(while parsing a flow sequence at line 2, column 11)",
        ),
        ("name: shop\n  source: x\n", "line 2, column 9: mapping values are not allowed here"),
        ("- name: shop\n", "expected a mapping of keys (name, source, ...), got a list"),
        ("", "missing 'source'"),
    ],
)
def test_yaml_that_does_not_parse_is_one_line_with_line_and_column(
    folder: Path, text: str, message: str
) -> None:
    path = folder / "shop.yaml"
    path.write_text(text)
    with pytest.raises(UserError) as err:
        Registry(folder).get("shop")
    assert str(err.value) == f"{path}: {message}"


def test_bytes_that_are_not_utf8_are_one_line(folder: Path) -> None:
    path = folder / "shop.yaml"
    path.write_bytes(b"name: \xff\n")
    with pytest.raises(UserError, match=r"shop.yaml: not UTF-8 text \(byte 6\)$"):
        Registry(folder).get("shop")


def test_the_cli_prints_the_one_line_and_exits_2(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _edit(folder, "  options:", "  optons:")
    assert main(["--pipelines", str(folder), "pipelines"]) == 2
    known = "view, kind, path, table, options"
    err = capsys.readouterr().err
    assert err == f"error: {path}: unknown key 'optons' in source (known: {known})\n"


def test_setting_names_are_the_users_own(folder: Path) -> None:
    # `settings:` holds the user's names (any spelling); an empty value is empty text.
    _edit(folder, "settings: {}", "settings:\n  cart_tl: 1\n  note:")
    pipeline = Registry(folder).get("shop")
    assert pipeline.settings == {"cart_tl": "1", "note": ""}
    assert pipeline.source.options == {"maxFilesPerTrigger": 10}

    # Options Spark's readers know beyond the common ones pass, in any case; so do Hadoop's
    conf = {"source.MAXFILESPERTRIGGER": "2", "source.fs.s3a.endpoint": "x", "source.encoding": "x"}
    options = pipeline.with_settings(conf).source.options
    assert {"MAXFILESPERTRIGGER", "fs.s3a.endpoint", "encoding"} < set(options)


@pytest.mark.parametrize(
    ("name", "conf", "options"),
    [
        # The spec's options are its reader's: another kind keeps those its reader also takes.
        ("order_status", {"source.kind": "kafka", "source.topic": "o"}, {"topic": "o"}),
        ("server_logs", {"source.kind": "kafka", "source.topic": "o"}, {"topic": "o"}),
        ("server_logs", {"source.kind": "delta", "source.table": "t"}, {"maxFilesPerTrigger": 100}),
        ("order_status", {"source.port": "1"}, {"host": "127.0.0.1", "port": "1"}),
    ],
)
def test_another_kind_keeps_the_options_its_reader_takes(
    name: str, conf: dict[str, str], options: dict[str, object]
) -> None:
    assert Registry().get(name).with_settings(conf).source.options == options


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"cart_tl": "1"}, "--conf cart_tl: not a setting of pipeline shop (settings: none)"),
        ({"source.path": "x"}, "--conf source.path: give the folder to read with --input PATH"),
        ({"source.view": "x"}, "--conf source.view: the view the SQL reads is set in "),
        # Spark's reader takes any case; this project's Kafka source reads names exactly
        (
            {"source.kind": "kafka", "source.startingoffsets": "latest"},
            "--conf source.startingoffsets: not an option of a kafka source; did you mean "
            "startingOffsets?",
        ),
        (
            {"source.kind": "kafka", "source.maxOffsetsPerTrigger": "5"},
            "--conf source.maxOffsetsPerTrigger: write maxRecordsPerBatch, this project's name",
        ),
        (
            {"kafka.bootstrap.servers": " "},
            "--conf kafka.bootstrap.servers: empty; give HOST:PORT",
        ),
        # Spark's own refusals named no option, exit 1.
        (
            {"source.kind": "kafka", "source.kafkaConsumer.pollTimeoutMs": "abc"},
            "--conf source.kafkaConsumer.pollTimeoutMs: a whole number, not 'abc'",
        ),
        (
            {"source.kind": "kafka", "source.endingOffsets": "latest"},
            "--conf source.endingOffsets: Spark's Kafka connector reads it in batch queries only",
        ),
        (
            {"source.kind": "delta", "source.table": "t", "source.startingVersoin": "3"},
            "--conf source.startingVersoin: not an option of a delta source; did you mean "
            "startingVersion?",
        ),
    ],
)
def test_conf_names_only_what_the_spec_has(
    folder: Path, conf: dict[str, str], message: str
) -> None:
    with pytest.raises(UserError) as err:
        Registry(folder).get("shop").with_settings(conf)
    assert str(err.value).startswith(message)


def test_a_source_path_from_the_home_folder(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _edit(folder, "path: data/shop", "path: ~/logs/shop")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    pipeline = Registry(folder).get("shop")
    with pytest.raises(UserError, match=f"input folder not found: {tmp_path}/home/logs/shop$"):
        pipeline.input_folder()
    (tmp_path / "home" / "logs" / "shop").mkdir(parents=True)
    assert pipeline.input_folder() == tmp_path / "home" / "logs" / "shop"


@pytest.mark.parametrize("name", Registry().names())
def test_every_bundled_spec_loads(name: str) -> None:
    assert Registry().get(name).queries


@pytest.mark.parametrize(
    ("name", "settings", "input_path", "needs"),
    [
        ("sensor_cep", {}, None, True),  # reads a topic
        ("sensor_cep", {}, "readings", True),  # files in, alerts still sent to a topic
        ("order_status", {"source.kind": "kafka", "source.topic": "orders"}, None, True),
        ("order_status", {"source.kind": "kafka", "source.topic": "orders"}, "in", False),
        ("order_status", {}, None, False),
        ("server_logs", {}, None, False),
    ],
)
def test_which_runs_need_the_kafka_broker(name, settings, input_path, needs) -> None:
    assert Registry().get(name).with_settings(settings).needs_broker(input_path) is needs


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        # tables/<name>.sql would not parse, and every command parses all of tables/.
        ("select", "it is a SQL keyword, which cannot name its table"),
        ("union", "it is a SQL keyword, which cannot name its table"),
        # `tables: {<name>: records}` in the yaml would hold a value, not the name.
        ("null", "YAML reads it as None, not as a name"),
        ("no", "YAML reads it as False, not as a name"),
    ],
)
def test_init_refuses_names_the_files_cannot_hold(tmp_path: Path, name: str, problem: str) -> None:
    with pytest.raises(UserError) as err:
        init_pipeline(name, Project(tmp_path))
    assert str(err.value) == f"init: {name!r} is not a usable pipeline name: {problem}"
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_init_in_a_new_project_folder_gives_it_the_shared_files(tmp_path: Path) -> None:
    from engine.lint import lint_pipelines
    from engine.project import PROJECT

    written = init_pipeline("shop", Project(tmp_path))
    shared = tmp_path / "tables" / "quarantine.sql"
    suite = tmp_path / "quality" / "suites" / "quarantine.yaml"
    conftest = tmp_path / "tests" / "conftest.py"
    assert written[-3:] == [shared, suite, conftest]
    assert shared.read_text() == (PROJECT.tables / "quarantine.sql").read_text()
    assert suite.read_text() == (PROJECT.suites / "quarantine.yaml").read_text()
    assert "from engine.testing import spark" in conftest.read_text()
    result = lint_pipelines(Registry(tmp_path / "pipelines"))
    assert (result.files, result.findings) == (4, ())
    # A second pipeline finds them there and leaves them be.
    edits = {shared: "-- edited\n", suite: "# edited\n", conftest: "# edited\n"}
    for path, edit in edits.items():
        path.write_text(path.read_text() + edit)
    assert not set(edits) & set(init_pipeline("till", Project(tmp_path)))
    assert all(path.read_text().endswith(edit) for path, edit in edits.items())


@pytest.mark.parametrize("name", ["order", "window", "y"])
def test_init_takes_words_that_still_name_a_table(tmp_path: Path, name: str) -> None:
    from engine.definitions.tables import load_table

    init_pipeline(name, Project(tmp_path))
    assert load_table(tmp_path / "tables" / f"{name}.sql").name == name
    assert list(Registry(tmp_path / "pipelines").get(name).tables) == [name, "quarantine"]


def test_init_writes_into_the_pipelines_folder_named_and_prints_commands_that_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shlex

    from engine.lint import lint_pipelines

    # A folder of another name than pipelines/, below a folder with a space in its name.
    specs = tmp_path / "my project" / "pipes"
    assert main(["--pipelines", str(specs), "init", "shop"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert (specs / "shop.yaml").is_file()
    assert not (tmp_path / "my project" / "pipelines").exists()
    # The next line, as the shell splits it, names that folder (it was split at the space).
    first = shlex.split(out[-1].removeprefix("next: "))
    assert first[first.index("--pipelines") + 1] == str(specs)
    assert lint_pipelines(Registry(specs)).findings == ()
    test = (tmp_path / "my project" / "tests" / "pipeline" / "test_shop.py").read_text()
    assert 'Registry(PROJECT / "pipes")' in test
