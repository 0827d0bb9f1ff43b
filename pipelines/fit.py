"""Silver telemetry → fitted queueing model (gold), in Spark.

Heavy lifting (per-window aggregation over all instances, percentiles, sums) runs in Spark;
the per-operator arithmetic on a handful of aggregates runs on the driver.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pyspark.sql.functions as F
from pyspark.sql import DataFrame, Row, SparkSession
from scipy.optimize import nnls

from pipelines.delta_io import merge_insert, table_exists, table_version
from pipelines.tables import SILVER_TABLES, gold_path, silver_path
from streamplan.config import AppConfig
from streamplan.fitted import (
    Deployment,
    FittedModel,
    LinkModel,
    NodeModel,
    NodeState,
    OperatorModel,
    PlacementCosts,
    QueryModel,
)

Z95 = 1.96
MIN_NODE_WINDOWS = 5  # windows a per-node regression (interference, power) needs at least
SATURATED_UTIL = 0.99  # a node this busy hides its interference (utilisation clips at 1)
COLLINEAR_COND = 30.0  # condition number beyond which per-operator rates cannot be told apart


def _gold_dtypes(rows: list[dict]) -> dict[str, str]:
    """Optional numeric fields may be None in every row: give them a float dtype."""
    return {k: "float64" for k, v in rows[0].items() if v is None or isinstance(v, float)}


def read_window(
    spark: SparkSession, lake: Path, table: str, app: str, start: datetime, end: datetime
) -> DataFrame | None:
    """Silver rows of ``app`` with start < ts <= end (windows are stamped at their end)."""
    path = silver_path(lake, table)
    if not table_exists(spark, path):
        return None
    df = spark.read.format("delta").load(path)
    return df.where((F.col("app") == app) & (F.col("ts") > start) & (F.col("ts") <= end))


def operator_windows(ops: DataFrame) -> DataFrame:
    """One row per (operator, window): sums over instances."""
    return ops.groupBy("operator", "ts").agg(
        F.first("window_s").alias("window_s"),
        F.sum("records_in").alias("rin"),
        F.sum("records_out").alias("rout"),
        F.sum("busy_ms").alias("busy"),
        F.sum("service_ms_sum").alias("svc"),
        F.sum("service_ms_sqsum").alias("svc2"),
        F.min(F.col("service_ms_sum").isNotNull().cast("int")).alias("direct"),
        F.count("*").alias("instances"),
    )


def operator_aggregates(windows: DataFrame) -> list[Row]:
    """Per operator: rate statistics, totals, and the spread of per-window service time."""
    rate = F.col("rin") / F.col("window_s")
    b_w = F.when(F.col("rin") > 0, F.col("busy") / F.col("rin"))
    return (
        windows.groupBy("operator")
        .agg(
            F.avg(rate).alias("rate_mean"),
            F.percentile_approx(rate, 0.95, 10000).alias("rate_p95"),
            F.max(rate).alias("rate_max"),
            F.sum("rin").alias("rin"),
            F.sum("rout").alias("rout"),
            F.sum("busy").alias("busy"),
            F.sum("svc").alias("svc"),
            F.sum("svc2").alias("svc2"),
            F.min("direct").alias("direct"),
            F.avg(F.col("busy") / (F.col("window_s") * 1000.0)).alias("util"),
            F.avg(b_w).alias("b_mean"),
            F.stddev(b_w).alias("b_sd"),
            F.count(b_w).alias("b_n"),
            F.count("*").alias("windows"),
        )
        .collect()
    )


def outputs_by_type(ops: DataFrame) -> dict[str, dict[str, int]]:
    """Per operator: total ``records_out_by_type`` per event type (operators reporting it)."""
    rows = (
        ops.select("operator", F.explode("records_out_by_type").alias("type", "n"))
        .groupBy("operator", "type")
        .agg(F.sum("n").alias("n"))
        .collect()
    )
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        out.setdefault(r["operator"], {})[r["type"]] = int(r["n"] or 0)
    return out


def selectivity_by_type(rout_by_type: dict[str, int], rin: int) -> dict[str, float]:
    """Outputs of each type per processed record (seed 001 digest §9: the selectivity
    function's measured counterpart, records_out_by_type[T] / records_in).

    >>> selectivity_by_type({"A": 30, "B": 10}, 100)
    {'A': 0.3, 'B': 0.1}
    """
    return {t: n / rin for t, n in sorted(rout_by_type.items())} if rin else {}


def fit_operator(row: Row, query: str, source: str) -> OperatorModel:
    """Service-time moments of one operator from its aggregates.

    direct: b = Σ service / Σ records, M2 = Σ service² / Σ records (2b², the exponential
    assumption of seed 000 §5, when the telemetry has service sums but no squares); busy_time:
    b = Σ busy / Σ records and M2 = 2b².
    """
    rin = row["rin"] or 0
    use_direct = source in ("auto", "direct") and row["direct"] == 1 and rin > 0
    if use_direct:
        b = row["svc"] / rin / 1000.0
        m2 = row["svc2"] / rin / 1e6 if row["svc2"] is not None else 2.0 * b * b
    else:
        b = (row["busy"] or 0.0) / rin / 1000.0 if rin else 0.0
        m2 = 2.0 * b * b
    scv = m2 / (b * b) - 1.0 if b > 0 else 0.0
    ci = None
    if row["b_n"] and row["b_n"] > 1 and row["b_sd"] is not None:
        half = Z95 * row["b_sd"] / math.sqrt(row["b_n"]) / 1000.0
        ci = (max(0.0, row["b_mean"] / 1000.0 - half), row["b_mean"] / 1000.0 + half)
    return OperatorModel(
        operator=row["operator"],
        query=query,
        arrival_rate_mean=row["rate_mean"] or 0.0,
        arrival_rate_p95=float(row["rate_p95"] or 0.0),
        arrival_rate_max=row["rate_max"] or 0.0,
        service_mean_s=b,
        service_m2_s2=m2,
        service_scv=max(0.0, scv),
        service_mean_ci=ci,
        selectivity=(row["rout"] / rin) if rin else 0.0,
        utilisation=row["util"] or 0.0,
        calibration="direct" if use_direct else "busy_time",
        samples=row["windows"],
    )


def query_rates(windows: DataFrame, sources: dict[str, list[str]]) -> dict[str, Row]:
    """Per query: input-rate statistics over windows (input = records into source operators)."""
    pairs = [(op, q) for q, ops in sources.items() for op in ops]
    spark = windows.sparkSession
    src = spark.createDataFrame(pairs, "operator STRING, query STRING")
    per_window = (
        windows.join(src, "operator")
        .groupBy("query", "ts")
        .agg((F.sum("rin") / F.first("window_s")).alias("ar"), F.sum("rin").alias("rin"))
    )
    rows = per_window.groupBy("query").agg(
        F.avg("ar").alias("mean"),
        F.percentile_approx("ar", 0.95, 10000).alias("p95"),
        F.max("ar").alias("max"),
        F.sum("rin").alias("rin"),
    )
    return {r["query"]: r for r in rows.collect()}


def low_load_calibration(
    ops: DataFrame, nodes: DataFrame | None, config: AppConfig
) -> dict[str, tuple[float, int]]:
    """Seed 000 §3 low-load calibration: b_i = mean over windows of ρ/AR_i, using windows where
    EPN i is its node's only tenant and 0 < AR_i < ``fit.cal_max_rate``."""
    if nodes is None:
        return {}
    spark = ops.sparkSession
    op_query = spark.createDataFrame(
        [(o.name, o.query) for o in config.operators], "operator STRING, query STRING"
    )
    sources = spark.createDataFrame(
        [(op, q.name) for q in config.queries for op in q.sources], "operator STRING, src_q STRING"
    )
    tagged = ops.join(op_query, "operator")
    tenants = tagged.groupBy("node", "ts").agg(F.countDistinct("query").alias("tenants"))
    alone = tagged.join(tenants, ["node", "ts"]).where(F.col("tenants") == 1)
    rates = (
        alone.join(sources, "operator")
        .groupBy("src_q", "node", "ts")
        .agg((F.sum("records_in") / F.first("window_s")).alias("ar"))
    )
    util = nodes.select("node", "ts", "cpu_util")
    ratios = (
        rates.join(util, ["node", "ts"])
        .where((F.col("ar") > 0) & (F.col("ar") < config.fit.cal_max_rate))
        .groupBy("src_q")
        .agg(F.avg(F.col("cpu_util") / F.col("ar")).alias("b"), F.count("*").alias("n"))
    )
    return {
        r["src_q"]: (r["b"], r["n"])
        for r in ratios.collect()
        if r["n"] >= config.fit.min_cal_windows
    }


def fit_query(
    config: AppConfig,
    query: str,
    operators: dict[str, OperatorModel],
    records_in: dict[str, int],
    rates: Row | None,
    calibration: tuple[float, int] | None,
    measured: Row | None,
) -> QueryModel:
    """The query's EPN as one M/G/1 super-operator (seed 000 §3).

    b_i = Σ_o v_o b_o with v_o = records into o per input event; M2_i = b_i² + Σ_o v_o Var_o,
    which treats visit counts as fixed (exact for selectivity 1 upstream of each operator).
    """
    q = next(x for x in config.queries if x.name == query)
    ops = [operators[o] for o in config.query_operators(query) if o in operators]
    src_in = rates["rin"] if rates else 0
    b = m2_var = 0.0
    for om in ops:
        visits = records_in.get(om.operator, 0) / src_in if src_in else 0.0
        b += visits * om.service_mean_s
        m2_var += visits * max(0.0, om.service_m2_s2 - om.service_mean_s**2)
    source = "direct" if ops and all(o.calibration == "direct" for o in ops) else "busy_time"
    cal_b, cal_n = calibration if calibration else (None, 0)
    if config.fit.service_source == "low_load" or (src_in == 0 and cal_b is not None):
        if cal_b is None:
            raise ValueError(
                f"fit.service_source=low_load but query {query!r} has fewer than "
                f"{config.fit.min_cal_windows} low-load windows alone on a node"
            )
        b, m2_var, source = cal_b, cal_b * cal_b, "low_load"  # M2 = 2b² (seed 000 §5)
    events = int(measured["events"]) if measured and measured["events"] else 0
    return QueryModel(
        query=q.name,
        arrival_rate_mean=rates["mean"] if rates else 0.0,
        arrival_rate_p95=float(rates["p95"]) if rates else 0.0,
        arrival_rate_max=rates["max"] if rates else 0.0,
        service_mean_s=b,
        service_m2_s2=b * b + m2_var,
        calibration=source,
        cal_service_mean_s=cal_b,
        cal_windows=cal_n,
        measured_rt_ms=(measured["rt_sum"] / events) if events else None,
        events=events,
    )


def measured_rt(queries: DataFrame | None) -> dict[str, Row]:
    """Per query: Σ events and Σ response time over the window."""
    if queries is None:
        return {}
    rows = queries.groupBy("query").agg(
        F.sum("events").alias("events"), F.sum("rt_ms_sum").alias("rt_sum")
    )
    return {r["query"]: r for r in rows.collect()}


def latest_deployment(deployments: DataFrame | None, config: AppConfig) -> Deployment:
    """The deployment in force at the end of the window; the config's when none was reported."""
    row = None
    if deployments is not None:
        row = deployments.orderBy(F.col("ts").desc(), F.col("row_id")).first()
    if row is None:
        return Deployment(
            placement=dict(config.deployment),
            nodes={n.name: NodeState(type=n.type) for n in config.nodes},
        )
    nodes = {k: NodeState(**v) for k, v in json.loads(row["nodes"]).items()}
    placement = {k: [tuple(e) for e in v] for k, v in json.loads(row["placement"]).items()}
    return Deployment(placement=placement, nodes=nodes)


def node_types(deployment: Deployment, config: AppConfig) -> dict[str, str]:
    """node -> node type: the reported deployment's, else the config's."""
    return {**{n.name: n.type for n in config.nodes},
            **{n: s.type for n, s in deployment.nodes.items()}}


def node_windows(ops: DataFrame, nodes: DataFrame, cores: DataFrame) -> DataFrame:
    """One row per (node, window): the node's ``cpu_util``, the utilisation D its operators'
    exclusive busy time predicts (Σ busy / (window x cores)) and the number m of co-located
    operators with records in the window."""
    per_window = ops.groupBy("node", "ts").agg(
        F.sum("busy_ms").alias("busy"),
        F.first("window_s").alias("window_s"),
        F.countDistinct(F.when(F.col("records_in") > 0, F.col("operator"))).alias("m"),
    )
    exclusive = F.col("busy") / (F.col("window_s") * 1000.0 * F.col("cores"))
    return (
        nodes.select("node", "ts", "cpu_util")
        .join(per_window, ["node", "ts"])
        .join(cores, "node")
        .withColumn("D", exclusive)
    )


def interference_slopes(windows: DataFrame) -> dict[str, float | None]:
    """Per node: the slope s of π(m) = s(m − 1) (seed 004 digest §9, A1: utilisation =
    D(1 + π(m))), by least squares of (cpu_util/D − 1) on (m − 1) over the node's windows,
    clipped at 0. None with fewer than 2 distinct m or ``MIN_NODE_WINDOWS`` windows; windows
    with nothing running (D = 0) or a saturated node are left out."""
    usable = windows.where(
        (F.col("D") > 0) & (F.col("m") >= 1) & (F.col("cpu_util") < SATURATED_UTIL)
    ).select("node", (F.col("m") - 1).alias("x"), (F.col("cpu_util") / F.col("D") - 1).alias("y"))
    rows = usable.groupBy("node").agg(
        # least squares slope = cov(x, y) / var(x)
        F.covar_samp("x", "y").alias("cov"),
        F.var_samp("x").alias("var"),
        F.countDistinct("x").alias("levels"),
        F.count("*").alias("n"),
    ).collect()
    return {
        r["node"]: max(0.0, r["cov"] / r["var"])
        if r["levels"] >= 2 and r["n"] >= MIN_NODE_WINDOWS else None
        for r in rows
    }


def power_samples(ops: DataFrame, nodes: DataFrame) -> dict[str, tuple[list[str], np.ndarray,
                                                                      np.ndarray]]:
    """Per node with ``power_w`` readings: its hosted operators, the [window, operator] matrix
    of their input rates (records_in/s, 0 when idle) and the power readings per window."""
    rates = ops.groupBy("node", "ts", "operator").agg(
        (F.sum("records_in") / F.first("window_s")).alias("rate")
    )
    power = nodes.where(F.col("power_w").isNotNull()).select("node", "ts", "power_w")
    rows = power.join(rates, ["node", "ts"], "left").collect()
    cells: dict[str, dict] = {}
    for r in rows:
        node = cells.setdefault(r["node"], {"power": {}, "rate": {}})
        node["power"][r["ts"]] = r["power_w"]
        if r["operator"] is not None:
            node["rate"][(r["ts"], r["operator"])] = r["rate"] or 0.0
    out = {}
    for name, c in cells.items():
        windows = sorted(c["power"])
        hosted = sorted({op for _, op in c["rate"]})
        x = np.array([[c["rate"].get((ts, op), 0.0) for op in hosted] for ts in windows])
        out[name] = (hosted, x.reshape(len(windows), len(hosted)),
                     np.array([c["power"][ts] for ts in windows]))
    return out


def _collinear(x: np.ndarray) -> bool:
    """Columns that cannot be told apart (e.g. the operators of one chain see the same rate)."""
    centred = x - x.mean(axis=0)
    norms = np.linalg.norm(centred, axis=0)
    if np.any(norms == 0):
        return True
    return np.linalg.cond(centred / norms) > COLLINEAR_COND


def fit_power(rates: np.ndarray, power: np.ndarray) -> tuple[float, np.ndarray] | None:
    """κ (W) and ε per operator (J/event) of one node: non-negative least squares of power_w on
    [1, input rate of each hosted operator] (seed 004 digest §9: intercept κ, slopes ε; the
    E7 model P = κ + Σ ω_i ε_i). Collinear rates share one ε (NNLS on [1, Σ rates]).
    None with fewer than ``MIN_NODE_WINDOWS`` windows."""
    if len(power) < MIN_NODE_WINDOWS:
        return None
    busy = rates.any(axis=0)
    x = rates[:, busy]
    pooled = x.shape[1] > 1 and _collinear(x)
    cols = x.sum(axis=1, keepdims=True) if pooled else x
    coef, _ = nnls(np.column_stack([np.ones(len(power)), cols]), power)
    eps = np.zeros(rates.shape[1])
    eps[busy] = coef[1] if pooled else coef[1:]
    return float(coef[0]), eps


def service_by_type(ops: DataFrame, types: DataFrame) -> dict[str, dict[str, float]]:
    """Per operator and node type: exclusive service time λ = Σ busy_ms / Σ records_in (s)
    over the windows it ran on nodes of that type (seed 004 digest §9, λ_i^p)."""
    rows = (
        ops.join(types, "node")
        .groupBy("operator", "type")
        .agg(F.sum("busy_ms").alias("busy"), F.sum("records_in").alias("rin"))
        .where(F.col("rin") > 0)
        .collect()
    )
    out: dict[str, dict[str, float]] = {}
    for r in rows:
        out.setdefault(r["operator"], {})[r["type"]] = r["busy"] / r["rin"] / 1000.0
    return out


def battery_levels(nodes: DataFrame) -> dict[str, float]:
    """Per node: the last ``battery_wh`` reading of the window."""
    rows = nodes.where(F.col("battery_wh").isNotNull()).groupBy("node").agg(
        F.max_by("battery_wh", "ts").alias("wh")
    ).collect()
    return {r["node"]: r["wh"] for r in rows}


def fit_links(links: DataFrame | None) -> list[LinkModel]:
    """Per (src, dst): mean latency and mean bandwidth over the link records that have both."""
    if links is None:
        return []
    rows = (
        links.where(F.col("bandwidth_mbps").isNotNull())
        .groupBy("src", "dst")
        .agg(F.avg("latency_ms").alias("lat"), F.avg("bandwidth_mbps").alias("bw"))
        .orderBy("src", "dst")
        .collect()
    )
    return [LinkModel(src=r["src"], dst=r["dst"], latency_ms=r["lat"], bandwidth_mbps=r["bw"])
            for r in rows]


def fit_nodes(
    ops: DataFrame, nodes: DataFrame | None, types: dict[str, str], config: AppConfig
) -> tuple[dict[str, NodeModel], dict[str, dict[str, float]]]:
    """Per node: utilisation, power, interference slope, κ and battery; and per operator the
    fitted ε per node type (mean over the nodes of that type it ran on)."""
    if nodes is None:
        return {}, {}
    spark = ops.sparkSession
    cores = {t.name: t.cores for t in config.node_types}
    cores_df = spark.createDataFrame(
        [(n, cores[t]) for n, t in types.items() if t in cores], "node STRING, cores INT"
    )
    slopes = interference_slopes(node_windows(ops, nodes, cores_df))
    battery = battery_levels(nodes)
    idle: dict[str, float] = {}
    energy: dict[str, dict[str, list[float]]] = {}
    for node, (hosted, rates, power) in power_samples(ops, nodes).items():
        fitted = fit_power(rates, power)
        if fitted is None:
            continue
        idle[node], eps = fitted
        for op, e, used in zip(hosted, eps.tolist(), rates.any(axis=0).tolist()):
            if used and node in types:
                energy.setdefault(op, {}).setdefault(types[node], []).append(e)
    models = {}
    for r in nodes.groupBy("node").agg(
        F.avg("cpu_util").alias("u"), F.avg("power_w").alias("p")
    ).collect():
        n = r["node"]
        models[n] = NodeModel(node=n, cpu_util_mean=r["u"], power_w_mean=r["p"],
                              interference_slope=slopes.get(n), idle_power_w=idle.get(n),
                              battery_wh=battery.get(n))
    per_type = {op: {t: float(np.mean(v)) for t, v in by_type.items()}
                for op, by_type in energy.items()}
    return models, per_type


def event_sizes(ops: DataFrame) -> dict[str, float]:
    """Per operator reporting ``bytes_out``: mean output event size δ = Σ bytes_out /
    Σ records_out over the windows that report it (seed 004's δ_i, bytes)."""
    if "bytes_out" not in ops.columns:
        return {}
    rows = (
        ops.where(F.col("bytes_out").isNotNull())
        .groupBy("operator")
        .agg(F.sum("bytes_out").alias("bytes"), F.sum("records_out").alias("rout"))
        .where(F.col("rout") > 0)
        .collect()
    )
    return {r["operator"]: r["bytes"] / r["rout"] for r in rows}


def placement_costs(
    ops: DataFrame, types: dict[str, str], energy: dict[str, dict[str, float]]
) -> dict[str, PlacementCosts]:
    """Per operator: fitted λ and ε per node type and the output event size (seed 004);
    without ``bytes_out`` telemetry ``event_bytes`` stays None (the config's value applies)."""
    types_df = ops.sparkSession.createDataFrame(list(types.items()), "node STRING, type STRING")
    service = service_by_type(ops, types_df)
    sizes = event_sizes(ops)
    return {
        op: PlacementCosts(service_mean_s_by_type=service.get(op, {}),
                           energy_j_per_event_by_type=energy.get(op, {}),
                           event_bytes=sizes.get(op))
        for op in sorted(set(service) | set(energy) | set(sizes))
    }


def fit_model(
    spark: SparkSession, lake: Path, config: AppConfig, start: datetime, end: datetime
) -> FittedModel:
    """Fit the whole model for ``config.app`` from silver rows in (start, end]."""
    app = config.app
    ops = read_window(spark, lake, "operator_metrics", app, start, end)
    if ops is None or ops.limit(1).count() == 0:
        raise ValueError(f"no operator telemetry for app {app!r} in ({start}, {end}]")
    ops = ops.cache()
    windows = operator_windows(ops).cache()
    op_query = {o.name: o.query for o in config.operators}
    aggregates = operator_aggregates(windows)
    operators = {
        r["operator"]: fit_operator(r, op_query[r["operator"]], config.fit.service_source)
        for r in aggregates
    }
    records_in = {r["operator"]: r["rin"] or 0 for r in aggregates}
    for op, counts in outputs_by_type(ops).items():
        operators[op] = operators[op].model_copy(
            update={"selectivity_by_type": selectivity_by_type(counts, records_in[op])}
        )
    rates = query_rates(windows, {q.name: q.sources for q in config.queries})
    nodes_df = read_window(spark, lake, "node_metrics", app, start, end)
    nodes_df = nodes_df.cache() if nodes_df is not None else None
    calibration = low_load_calibration(ops, nodes_df, config)
    measured = measured_rt(read_window(spark, lake, "query_metrics", app, start, end))
    queries = {
        q.name: fit_query(
            config, q.name, operators, records_in, rates.get(q.name), calibration.get(q.name),
            measured.get(q.name),
        )
        for q in config.queries
    }
    deployment = latest_deployment(read_window(spark, lake, "deployments", app, start, end), config)
    types = node_types(deployment, config)
    nodes, energy = fit_nodes(ops, nodes_df, types, config)
    costs = placement_costs(ops, types, energy)
    links = fit_links(read_window(spark, lake, "link_metrics", app, start, end))
    windows.unpersist()
    ops.unpersist()
    if nodes_df is not None:
        nodes_df.unpersist()
    versions = {t: table_version(spark, silver_path(lake, t)) for t in SILVER_TABLES}
    return FittedModel(
        model_id=f"{app}-{end.strftime('%Y%m%dT%H%M%SZ')}",
        app=app,
        window_start=start.isoformat(),
        window_end=end.isoformat(),
        rate_statistic=config.fit.rate_statistic,
        operators=operators,
        queries=queries,
        nodes=nodes,
        links=links,
        placement_costs=costs,
        deployment=deployment,
        delta_versions=versions,
    )


def write_gold(spark: SparkSession, lake: Path, model: FittedModel) -> dict[str, int]:
    """Store the fitted model in gold (MERGE on model id + entity: re-fitting overwrites)."""
    common = {"model_id": model.model_id, "app": model.app, "window_end": model.window_end}
    op_rows = [
        {**common, **om.model_dump(exclude={"service_mean_ci", "selectivity_by_type"})}
        for om in model.operators.values()
    ]
    q_rows = [{**common, **qm.model_dump(exclude={"service_mean_ci"})}
              for qm in model.queries.values()]
    versions = {}
    for table, rows, key in (
        ("operator_models", op_rows, ["model_id", "operator"]),
        ("query_models", q_rows, ["model_id", "query"]),
    ):
        df = spark.createDataFrame(pd.DataFrame(rows).astype(_gold_dtypes(rows)))
        merge_insert(spark, df, gold_path(lake, table), key, update=True)
        versions[table] = table_version(spark, gold_path(lake, table))
    return versions
