"""Spark packages (Delta Lake for Spark, Spark's Kafka connector): fetched once, found at run time.

`jars/pom.xml` names the packages. `python -m engine.runtime.jars` (run by `make`) copies them
and their dependencies from Maven into `.jars/`, leaving out the jars Spark already ships. A
run then loads what is there with `spark.jars`; a package missing from the folder means the
embedded path for it (delta-rs writer, Python Kafka source).
STREAMLAKE_JARS points at another folder.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from engine.project import PROJECT

__all__ = [
    "BROKER_POM",
    "POM",
    "Artifact",
    "SparkPackages",
    "artifacts",
    "broker_dir",
    "cache_dir",
    "fetch",
    "find_packages",
]

POM = PROJECT.root / "jars" / "pom.xml"
#: Apache Kafka's broker, run in a JVM of its own (devtools/broker.py), so nothing is left out.
BROKER_POM = PROJECT.root / "jars" / "kafka-broker" / "pom.xml"
_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
# A jar file name without its version: "delta-spark_4.2_2.13-4.4.0.jar" -> "delta-spark_4.2_2.13".
_VERSIONED = re.compile(r"^(?P<name>.+?)-\d[\w.\-]*\.jar$")

DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


@dataclass(frozen=True)
class Artifact:
    """One Maven package of the pom."""

    group: str
    name: str
    version: str

    @property
    def coordinate(self) -> str:
        """group:artifact:version, as Maven and spark.jars.packages write it."""
        return f"{self.group}:{self.name}:{self.version}"

    @property
    def jar(self) -> str:
        """The file name Maven copies it as."""
        return f"{self.name}-{self.version}.jar"


def artifacts(pom: Path = POM) -> list[Artifact]:
    """The packages `pom` depends on directly."""
    root = ET.parse(pom).getroot()
    return [
        Artifact(
            group=d.findtext("m:groupId", namespaces=_NS) or "",
            name=d.findtext("m:artifactId", namespaces=_NS) or "",
            version=d.findtext("m:version", namespaces=_NS) or "",
        )
        for d in root.iterfind("m:dependencies/m:dependency", _NS)
    ]


def cache_dir() -> Path:
    """Where the jars are kept: `.jars/` in the project, or $STREAMLAKE_JARS."""
    return Path(os.environ.get("STREAMLAKE_JARS") or PROJECT.root / ".jars")


@dataclass(frozen=True)
class SparkPackages:
    """The jars found in the cache, and which packages they make available."""

    jars: tuple[Path, ...] = ()
    delta: bool = False
    kafka: bool = False

    def spark_conf(self) -> Mapping[str, str]:
        """Spark settings that load the jars (and Delta's SQL extension where it is there)."""
        if not self.jars:
            return {}
        conf = {"spark.jars": ",".join(str(j) for j in self.jars)}
        if self.delta:
            conf["spark.sql.extensions"] = "io.delta.sql.DeltaSparkSessionExtension"
            conf["spark.sql.catalog.spark_catalog"] = DELTA_CATALOG
        return conf


def find_packages(folder: Path | None = None, pom: Path = POM) -> SparkPackages:
    """What `folder` (default the cache) holds of the pom's packages."""
    folder = folder or cache_dir()
    jars = tuple(sorted(folder.glob("*.jar"))) if folder.is_dir() else ()
    names = {j.name for j in jars}
    have = {a.name.split("_")[0]: a.jar in names for a in artifacts(pom)}
    return SparkPackages(
        jars=jars if any(have.values()) else (),
        delta=have.get("delta-spark", False),
        kafka=have.get("spark-sql-kafka-0-10", False),
    )


def _spark_jars() -> set[str]:
    """Names (without versions) of the jars pyspark ships: Spark's own copies win anyway."""
    import pyspark

    folder = Path(pyspark.__file__).parent / "jars"
    return {m.group("name") for j in folder.glob("*.jar") if (m := _VERSIONED.match(j.name))}


def broker_dir() -> Path:
    """Where Apache Kafka's broker jars are kept."""
    return cache_dir() / "kafka-broker"


def fetch(folder: Path | None = None, pom: Path = POM, *, for_spark: bool = True) -> str | None:
    """Copy the pom's packages and their dependencies into `folder` (default the cache),
    leaving out what Spark ships when `for_spark`; returns None when done, else one line
    saying which artifact could not be fetched."""
    folder = folder or cache_dir()
    wanted = artifacts(pom)
    if all((folder / a.jar).is_file() for a in wanted):
        return None
    mvn = shutil.which("mvn")
    names = ", ".join(a.coordinate for a in wanted)
    if mvn is None:
        return f"jars: cannot fetch {names}: mvn (Maven) not found"
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            [
                mvn,
                "-q",
                "-B",
                "-f",
                str(pom),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={tmp}",
                "-DincludeScope=runtime",
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            text = done.stdout + done.stderr
            missing = next((a for a in wanted if a.coordinate.replace(":", ":jar:") in text), None)
            culprit = missing.coordinate if missing else names
            detail = next((ln for ln in text.splitlines() if "ERROR" in ln), "mvn failed")
            return f"jars: cannot fetch {culprit} ({detail.removeprefix('[ERROR] ')[:160]})"
        shipped = _spark_jars() if for_spark else set()
        folder.mkdir(parents=True, exist_ok=True)
        for jar in Path(tmp).glob("*.jar"):
            m = _VERSIONED.match(jar.name)
            if m is None or m.group("name") not in shipped:
                shutil.copy2(jar, folder / jar.name)
    return None


def main() -> int:
    """`python -m engine.runtime.jars`: fetch, or say in one line why the embedded path will be
    used."""
    problem = fetch() or fetch(broker_dir(), BROKER_POM, for_spark=False)
    if problem:
        print(f"{problem}; running on the embedded path (delta-rs, Python Kafka source)")
        return 0
    found = find_packages()
    (cache_dir() / ".fetched").touch()  # make's stamp: fetched once
    print(f"jars: {len(found.jars)} in {cache_dir()} (delta: {found.delta}, kafka: {found.kafka})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
