"""The one Spark session builder: Delta configured from local jar paths, master from settings."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from streamplan.settings import Settings

DELTA_JARS = ("delta-spark_4.2_2.13-4.4.0.jar", "delta-storage-4.4.0.jar")


def delta_jar_paths(jars_dir: Path) -> list[str]:
    """Local Delta jars fetched by infra/setup.sh; a clear error if setup has not run."""
    paths = [jars_dir / name for name in DELTA_JARS]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(
            f"Delta jars missing: {missing}. Run `bash infra/setup.sh` (fetches them with Maven)."
        )
    return [str(p) for p in paths]


def get_spark(settings: Settings, app_name: str = "streamplan", ui: bool = False) -> SparkSession:
    """A SparkSession with Delta Lake, on ``settings.spark_master`` (local[2] by default).

    Nothing is downloaded at start: the Delta jars are handed over as local paths.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.appName(app_name)
        .master(settings.spark_master)
        .config("spark.jars", ",".join(delta_jar_paths(settings.jars_dir)))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
        .config("spark.sql.shuffle.partitions", str(settings.spark_shuffle_partitions))
        .config("spark.default.parallelism", str(settings.spark_shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", str(ui).lower())
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.databricks.delta.snapshotPartitions", "2")
        # listing a table's files: few tasks instead of Spark's default 10 000 on 2 cores
        .config("spark.sql.sources.parallelPartitionDiscovery.parallelism", "2")
        .config("spark.sql.warehouse.dir", str(settings.home / "spark-warehouse"))
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={settings.home}")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
