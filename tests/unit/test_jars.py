"""Spark packages: the pom read without Maven, the cache folder, and a package Maven lacks."""

from __future__ import annotations

from pathlib import Path

from engine.runtime.jars import POM, artifacts, fetch, find_packages


def test_the_pom_names_delta_for_spark_4_2_and_the_kafka_connector():
    coordinates = [a.coordinate for a in artifacts(POM)]
    assert coordinates == [
        "io.delta:delta-spark_4.2_2.13:4.4.0",
        "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0",
    ]


def test_an_empty_cache_means_the_embedded_path(tmp_path):
    found = find_packages(tmp_path)
    assert (found.delta, found.kafka, found.jars) == (False, False, ())
    assert found.spark_conf() == {}


def test_a_cache_with_delta_only_loads_it_with_the_delta_catalog(tmp_path):
    (tmp_path / "delta-spark_4.2_2.13-4.4.0.jar").write_bytes(b"")
    (tmp_path / "delta-storage-4.4.0.jar").write_bytes(b"")
    found = find_packages(tmp_path)
    assert (found.delta, found.kafka) == (True, False)
    conf = found.spark_conf()
    assert conf["spark.jars"].split(",") == [str(p) for p in sorted(tmp_path.glob("*.jar"))]
    assert conf["spark.sql.catalog.spark_catalog"].endswith("DeltaCatalog")


def test_an_artifact_maven_cannot_fetch_is_one_line_naming_it(tmp_path):
    pom = tmp_path / "pom.xml"
    pom.write_text(POM.read_text().replace("delta-spark_4.2_2.13", "delta-spark_9.9_2.13", 1))
    line = fetch(tmp_path / "jars", pom)
    assert line is not None and "\n" not in line
    assert line.startswith("jars: cannot fetch ")
    assert "io.delta:delta-spark_9.9_2.13:4.4.0" in line
    assert not (tmp_path / "jars").exists() or not list(Path(tmp_path / "jars").iterdir())
