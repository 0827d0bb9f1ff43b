"""Per-row bounds and flags the suites compare against, added to a candidate before GE runs.

GE's column-pair expectations compare two columns; a bound that depends on other fields
(a node's cores, the records_in of the same row) is computed here as a column, and the rule
itself stays a GE expectation in :mod:`expectations.suites`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

if TYPE_CHECKING:
    from expectations.suites import ValidationContext

BUSY_CAPACITY_MS = "busy_capacity_ms"
RECORDS_OUT_BOUND = "records_out_bound"
CPU_CAPACITY = "cpu_capacity"
JSON_OBJECT_COLUMNS = ("placement", "nodes")


def json_object_flag(column: str) -> str:
    """Name of the flag column: true when ``column`` holds a JSON object."""
    return f"{column}_is_json_object"


def _cores(ctx: ValidationContext) -> Column:
    """Cores of the row's node; ``ctx.max_cores`` for a node not in ``ctx.node_cores``."""
    pairs = [F.lit(x) for node, cores in sorted(ctx.node_cores.items()) for x in (node, cores)]
    by_node = F.create_map(*pairs)[F.col("node")] if pairs else F.lit(None)
    return F.coalesce(by_node, F.lit(ctx.max_cores)).cast("double")


def _is_json_object(column: str) -> Column:
    """Null stays null (the not-null rule judges it); otherwise: parses as a JSON object."""
    value = F.col(column)
    return F.when(value.isNull(), None).otherwise(F.json_object_keys(value).isNotNull())


def with_derived_columns(table: str, df: DataFrame, ctx: ValidationContext) -> DataFrame:
    """``df`` plus the derived columns the suite of ``table`` refers to."""
    if table == "operator_metrics":
        return df.withColumns(
            {
                BUSY_CAPACITY_MS: F.col("window_s") * 1000.0 * _cores(ctx),
                # a negative records_in is its own rule's failure, not an implausible output
                RECORDS_OUT_BOUND: F.greatest(F.col("records_in"), F.lit(0))
                * ctx.max_selectivity
                + 1.0,
            }
        )
    if table == "node_metrics":
        return df.withColumn(CPU_CAPACITY, _cores(ctx))
    if table == "deployments":
        flags = {json_object_flag(c): _is_json_object(c) for c in JSON_OBJECT_COLUMNS}
        return df.withColumns(flags)
    return df
