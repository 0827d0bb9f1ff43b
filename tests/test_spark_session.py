"""The session builder gives a working Delta session from local jars."""

from pyspark.sql import SparkSession


def test_delta_roundtrip_and_merge(spark: SparkSession, tmp_path) -> None:
    from delta.tables import DeltaTable

    path = str(tmp_path / "t")
    spark.createDataFrame([(1, "a"), (2, "b")], "id INT, v STRING").write.format("delta").save(path)
    updates = spark.createDataFrame([(2, "B"), (3, "c")], "id INT, v STRING")
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(updates.alias("u"), "t.id = u.id")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )
    rows = sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
    assert rows == [(1, "a"), (2, "B"), (3, "c")]
    assert DeltaTable.forPath(spark, path).history().count() == 2
