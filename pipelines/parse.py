"""Bronze raw lines → typed silver candidates, plus the lines that cannot be parsed.

Pure DataFrame → DataFrame transforms. Parsing rules (not JSON, not an object, unknown kind,
wrong app, a field of the wrong type, an unreadable timestamp) are decided here; everything a
parsed row must satisfy is a Great Expectations rule (``expectations/``).
"""

from __future__ import annotations

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame

from pipelines.tables import COMMON, KIND_TO_TABLE, SILVER_TABLES, SilverTable

FAILURE_COLUMNS = ("row_id", "table", "rule", "field", "detail")


def with_fields(bronze: DataFrame) -> DataFrame:
    """Add ``_fields``: the line as a string→string map (null when it is not a JSON object)."""
    return bronze.withColumn("_fields", F.from_json("raw", "MAP<STRING,STRING>"))


def _failure(df: DataFrame, table: Column | str, rule: str, field: str, detail: Column) -> DataFrame:
    table_col = F.lit(table) if isinstance(table, str) else table
    return df.select(
        "row_id",
        table_col.alias("table"),
        F.lit(rule).alias("rule"),
        F.lit(field).alias("field"),
        detail.alias("detail"),
    )


def line_failures(lines: DataFrame, app: str) -> DataFrame:
    """Failures decided before the line's kind is known (one per row at most)."""
    kind = F.col("_fields")["kind"]
    line_app = F.col("_fields")["app"]
    snippet = F.substring(F.coalesce(F.col("raw"), F.lit("")), 1, 80)
    known = list(KIND_TO_TABLE)
    file_err = lines.where(F.col("file_error").isNotNull())
    text = lines.where(F.col("file_error").isNull())
    not_object = text.where(F.col("_fields").isNull())
    objects = text.where(F.col("_fields").isNotNull())
    no_kind = objects.where(kind.isNull())
    bad_kind = objects.where(kind.isNotNull() & ~kind.isin(known))
    wrong_app = objects.where(kind.isin(known) & ~F.coalesce(line_app, F.lit("")).eqNullSafe(app))
    return (
        _failure(file_err, "", "file", "<file>", F.concat(F.lit("whole file rejected: "),
                                                          F.col("file_error")))
        .unionByName(_failure(not_object, "", "json", "<line>",
                              F.concat(F.lit("not a JSON object: "), snippet)))
        .unionByName(_failure(no_kind, "", "required(kind)", "kind",
                              F.lit("field 'kind' is missing")))
        .unionByName(_failure(bad_kind, "", "known(kind)", "kind",
                              F.concat(F.lit("unknown kind '"), kind, F.lit(f"' (known: {known})"))))
        .unionByName(_failure(wrong_app, "", "known(app)", "app",
                              F.concat(F.lit("app '"), F.coalesce(line_app, F.lit("null")),
                                       F.lit(f"' does not match landing app '{app}'"))))
    )


def typed_rows(lines: DataFrame, table: SilverTable) -> DataFrame:
    """Rows of one kind parsed with the table's schema; ``ts`` parsed, ``ts_raw`` kept."""
    parsed = lines.where(F.col("_fields")["kind"] == table.kind).withColumn(
        "_p", F.from_json("raw", table.json_schema)
    )
    cols = [F.col(f"_p.{f.name}").alias(f.name) for f in COMMON + list(table.fields)]
    return parsed.select("row_id", "_fields", *cols).withColumn("ts_raw", F.col("ts")).withColumn(
        "ts", F.try_to_timestamp(F.col("ts_raw"))
    )


def type_failures(rows: DataFrame, table: SilverTable) -> DataFrame:
    """A field present in the line whose value does not have the contract's type.

    One projection per table: an array of per-field checks, exploded to one row per failure.
    """
    checks = []
    for f in COMMON[1:] + list(table.fields):
        raw_value = F.col("_fields")[f.name]
        typed = F.col("ts") if f.name == "ts" else F.col(f.name)
        expected = "an ISO-8601 timestamp" if f.name == "ts" else f.dataType.simpleString()
        detail = F.concat(F.lit(f"{f.name} must be {expected}, got "), F.substring(raw_value, 1, 80))
        failure = F.struct(
            F.lit(f"type({f.name})").alias("rule"), F.lit(f.name).alias("field"),
            detail.alias("detail"),
        )
        checks.append(F.when(raw_value.isNotNull() & typed.isNull(), failure))
    found = rows.select("row_id", F.explode(F.filter(F.array(*checks), lambda c: c.isNotNull()))
                        .alias("f"))
    return found.select(
        "row_id", F.lit(table.name).alias("table"), "f.rule", "f.field", "f.detail"
    )


def parse_bronze(bronze: DataFrame, app: str) -> tuple[dict[str, DataFrame], DataFrame]:
    """Split bronze rows into typed candidates per silver table and parse failures.

    Candidates exclude every row that failed parsing; failures carry ``FAILURE_COLUMNS``.
    """
    lines = with_fields(bronze)
    failures = line_failures(lines, app)
    candidates: dict[str, DataFrame] = {}
    for table in SILVER_TABLES.values():
        rows = typed_rows(lines.where(F.col("_fields")["app"].eqNullSafe(app)), table)
        bad = type_failures(rows, table)
        failures = failures.unionByName(bad)
        candidates[table.name] = rows.join(bad.select("row_id"), "row_id", "left_anti").drop(
            "_fields"
        )
    return candidates, failures
