"""The session a run starts from (engine/runtime/conf.py), checked on a real Spark session."""

from __future__ import annotations

from pyspark.sql import SparkSession


def compiled_classes(spark: SparkSession) -> int:
    """How many classes Spark's code generator has compiled in this JVM so far."""
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics  # type: ignore[union-attr]
    return metrics.METRIC_COMPILATION_TIME().getCount()


def test_compiled_code_outlives_more_queries_than_sparks_default_cache(spark):
    """A batch of a pipeline generates more code than Spark's 100-class cache holds; with the
    run's cache, the first of 120 distinct queries still finds its code compiled."""
    # Each literal is written into the generated code, so each query compiles a class of its own.
    queries = [spark.range(3).selectExpr(f"id * {i} + {i} AS x") for i in range(2, 122)]
    for query in queries:
        query.collect()
    before = compiled_classes(spark)
    assert queries[0].collect()[2].x == 2 * 2 + 2
    assert compiled_classes(spark) == before
