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


def test_merge_insert_adds_new_optional_columns_to_an_older_table(spark: SparkSession,
                                                                  tmp_path) -> None:
    """A silver table written before a contract gained a field (``bytes_out``) takes rows
    with it: the column is added, older rows hold null, re-running changes nothing."""
    from pipelines.delta_io import merge_insert

    path = str(tmp_path / "silver")
    spark.createDataFrame([(1, 10)], "id INT, records_out INT").write.format("delta").save(path)
    newer = spark.createDataFrame([(2, 20, 640)], "id INT, records_out INT, bytes_out BIGINT")
    for _ in range(2):
        merge_insert(spark, newer, path, ["id"], evolve_schema=True)
    rows = sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
    assert rows == [(1, 10, None), (2, 20, 640)]
