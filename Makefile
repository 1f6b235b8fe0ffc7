# Two entry points (README): `make demo` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEMO_LAKE ?= lake

.PHONY: setup java graphviz demo test lint bench clean

JARS := .jars/.fetched

setup: java graphviz $(STAMP) $(JARS)

# Spark needs a JVM; install one where it is missing (Debian/Ubuntu).
java:
	@command -v java >/dev/null 2>&1 || { \
	  echo "java not found: installing openjdk-17-jre-headless"; \
	  $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q openjdk-17-jre-headless; }
	@java -version 2>&1 | head -1

# `runner.py graph --out FILE.svg|FILE.png` has Graphviz's `dot` lay the graph out.
graphviz:
	@command -v dot >/dev/null 2>&1 || { \
	  echo "dot not found: installing graphviz"; \
	  $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q graphviz; }
	@dot -V 2>&1 | head -1

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@touch $@

# Spark's Delta and Kafka packages, and Apache Kafka's broker, from Maven (engine/runtime/jars.py).
# Where they cannot be fetched, one line says which and the project runs on the embedded path.
$(JARS): $(STAMP) jars/pom.xml jars/kafka-broker/pom.xml
	@command -v mvn >/dev/null 2>&1 || { \
	  echo "mvn not found: installing maven"; \
	  ($(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q maven) >/dev/null 2>&1 || true; }
	$(PY) -m engine.runtime.jars

demo: setup
	rm -rf $(DEMO_LAKE)
	$(PY) runner.py run server_logs --once --quality --lake $(DEMO_LAKE)
	@for t in events sessions carts purchases quarantine; do \
	  echo "== $$t"; $(PY) runner.py query "SELECT * FROM $$t ORDER BY 1, 2" --lake $(DEMO_LAKE) || exit 1; done
	@echo "quality report: $(abspath $(DEMO_LAKE))/_quality/index.html"

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Two pytest processes, a test file each at a time (docs/decisions.md, "The suite runs in two
# processes"); TEST_WORKERS=0 runs it in this one.
TEST_WORKERS ?= 2

test: lint
	$(PY) runner.py lint
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

bench: setup
	$(PY) bench/bench_server_logs.py
	$(PY) bench/bench_sensor_cep.py

clean:
	rm -rf $(VENV) .jars lake build *.egg-info .pytest_cache .ruff_cache
