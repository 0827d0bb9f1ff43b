"""Seed 004 (Ghosh et al.): energy-aware placement of dynamic DAGs on edge + cloud.

Reproduces, on the digest's placeholder costs (the paper prints none of its measured inputs)
with link latencies calibrated on two figures it does print (``comparison.calibration``:
edge→cloud 20 ms from Fig. 3's level, edge↔edge 10 ms from Fig. 4's "up to 20 %"; the
digest's 60/2 ms and an edge↔edge grid are in ``sensitivity_small.links``):

* Fig. 3 — sum of makespans L̂ per interval without rebalancing, TopSet / TopSet/P / GAI /
  GAG, with the Edge-Only and Cloud-Only bounds, on Small (96 + 4) and Large (960 + 40), for
  the Poisson and random-walk (RW 2±0, 2±0.5, 2±1) workloads;
* Fig. 4 — the reduction of L̂ by vertex, edge and vertex + edge rebalancing;
* Fig. 5 — planning time φ per algorithm (target: TopSet < 1 s on Large) and the GA slowdown;
* Figs. 6–7 — migrations and stabilisation time;
* energy per algorithm and strategy (edge power drawn by queries, smallest battery margin);
* the heuristics' gap to the exact MILP on small instances (≤ 10 vertices, ≤ 8 resources);
* a battery run-down scenario (eviction + rebalancing stays valid).

Every 5th plan of the Small runs and every 50th of the Large runs (and the last of each) is
checked with the independent checker. GA work is bounded by environment variables so the whole
benchmark finishes in about 10–15 minutes on two shared cores:

``SEED004_GA_POP`` (100), ``SEED004_GA_GENS`` (500), ``SEED004_GAI_TIME_S`` (3, per
arrival), ``SEED004_GAG_TIME_S`` (2, per interval), ``SEED004_GAG_INTERVALS`` (30 on Small),
``SEED004_LARGE_GA_INTERVALS`` (12), ``SEED004_LARGE_INTERVALS`` (400),
``SEED004_MILP_INSTANCES`` (40), ``SEED004_MILP_TIME_S`` (60).

Run: ``.venv/bin/python -m pytest -m bench benchmarks/test_seed004.py -p no:cacheprovider``;
results: ``benchmarks/results/seed004.json`` and the MLflow experiment
``streamplan-seed004-bench``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
import time
from typing import Any

import numpy as np
import pytest

from optimizers.edgecloud import Dag, Instance, Options, State, check_plan, compile_dag
from optimizers.edgecloud.generator import (
    SETUPS,
    Trace,
    dag_pool,
    make_setup,
    poisson_trace,
    random_dag,
    rw_trace,
)
from optimizers.edgecloud.genetic import GaParams, gag_replan
from optimizers.edgecloud.loop import Controller, IntervalRecord
from optimizers.edgecloud.milp import MilpLimits, solve_milp
from optimizers.edgecloud.params import DEFAULT_LINKS, DIGEST_LINKS, LinkSpec
from optimizers.edgecloud.rebalance import rebalance
from optimizers.edgecloud.topset import topset_place
from streamplan.settings import REPO_ROOT, load_settings

pytestmark = pytest.mark.bench

RESULTS = REPO_ROOT / "benchmarks" / "results" / "seed004.json"
ENV = {
    "SEED004_GA_POP": int(os.environ.get("SEED004_GA_POP", "100")),
    "SEED004_GA_GENS": int(os.environ.get("SEED004_GA_GENS", "500")),
    "SEED004_GAI_TIME_S": float(os.environ.get("SEED004_GAI_TIME_S", "3")),
    "SEED004_GAG_TIME_S": float(os.environ.get("SEED004_GAG_TIME_S", "2")),
    "SEED004_GAG_INTERVALS": int(os.environ.get("SEED004_GAG_INTERVALS", "30")),
    "SEED004_LARGE_GA_INTERVALS": int(os.environ.get("SEED004_LARGE_GA_INTERVALS", "12")),
    "SEED004_LARGE_INTERVALS": int(os.environ.get("SEED004_LARGE_INTERVALS", "400")),
    "SEED004_MILP_INSTANCES": int(os.environ.get("SEED004_MILP_INSTANCES", "40")),
    "SEED004_MILP_TIME_S": float(os.environ.get("SEED004_MILP_TIME_S", "60")),
}
SEED = 0
STRATEGIES = ("none", "vertex", "edge", "vertex+edge")
INTERVALS = {"small": 100, "large": ENV["SEED004_LARGE_INTERVALS"]}
INITIAL = {"small": 16, "large": 70}


def ga_params(time_limit_s: float) -> GaParams:
    return GaParams(population=ENV["SEED004_GA_POP"], generations=ENV["SEED004_GA_GENS"],
                    time_limit_s=time_limit_s)


# --- workloads ---------------------------------------------------------------------------------
def traces(pool: list[Dag], inst: Instance, setup: str) -> dict[str, Trace]:
    n = INTERVALS[setup]
    out = {"poisson": poisson_trace(pool, inst, initial=INITIAL[setup], intervals=n, seed=1)}
    for band in (0.0, 0.5, 1.0):
        out[f"rw2±{band:g}"] = rw_trace(pool, inst, utilisation=2.0, band=band, intervals=n,
                                        seed=1)
    return out


# --- one run -------------------------------------------------------------------------------------
@dataclasses.dataclass
class Run:
    records: list[IntervalRecord]
    active: list[frozenset[str]]
    wall_s: float
    checked: int
    violations: list[str]
    idle_w: float


def run(inst: Instance, trace: Trace, method: str, strategy: str, *, ga: GaParams | None = None,
        intervals: int | None = None, check_every: int = 1) -> Run:
    ctl = Controller(inst, method, strategy, ga=ga, seed=SEED)
    dags: dict[str, Dag] = {}
    recs, active, bad = [], [], []
    checked = 0
    t0 = time.perf_counter()
    for i, event in enumerate(trace.events[:intervals]):
        rec = ctl.step(event)
        if event.kind == "add" and rec.ok:
            dags[event.name] = event.dag
        recs.append(rec)
        active.append(frozenset(ctl.state.dags))
        if check_every and (i % check_every == 0 or i == len(trace.events) - 1):
            claimed = {d: ctl.state.makespan(d) for d in ctl.state.dags}
            report = check_plan(inst, [dags[d] for d in ctl.state.dags], ctl.state.assignment(),
                                claimed_s=claimed, rel_tol=1e-7)
            checked += 1
            bad += [f"t={i}: {v}" for v in report.violations[:3]]
    idle = float(sum(inst.resources[p].idle_w for p in inst.edge_ids))
    return Run(recs, active, time.perf_counter() - t0, checked, bad, idle)


def _q(values: list[float], q: float) -> float:
    return float(np.quantile(values, q)) if values else math.nan


def summary(r: Run) -> dict[str, Any]:
    recs = r.records
    arrivals = [x for x in recs if x.event == "add"]
    phi = [x.planning_s for x in arrivals]
    psi = [x.stabilisation_s for x in recs if x.stabilisation_s > 0]
    return {
        "intervals": len(recs),
        "rejected": sum(1 for x in recs if not x.ok and x.event == "add"),
        "makespan_sum_s_mean": statistics.fmean(x.makespan_sum_s for x in recs),
        "makespan_sum_s_final": recs[-1].makespan_sum_s,
        "makespan_per_dag_ms_mean": 1e3 * statistics.fmean(
            x.makespan_sum_s / x.active_dags for x in recs if x.active_dags),
        "planning_s": {"median": _q(phi, 0.5), "p95": _q(phi, 0.95), "max": max(phi),
                       "all_intervals_p99": _q([x.planning_s for x in recs], 0.99),
                       "all_intervals_max": max(x.planning_s for x in recs)},
        "migrations": {"total": sum(x.migrations for x in recs),
                       "median": _q([x.migrations for x in recs], 0.5),
                       "max": max(x.migrations for x in recs),
                       "intervals_with_moves": sum(1 for x in recs if x.migrations)},
        "stabilisation_s": {"mean_nonzero": statistics.fmean(psi) if psi else 0.0,
                            "median": _q([x.stabilisation_s for x in recs], 0.5),
                            "max": max((x.stabilisation_s for x in recs), default=0.0)},
        "energy": {"query_power_w_mean": statistics.fmean(x.edge_power_w - r.idle_w
                                                          for x in recs),
                   "min_battery_margin_wh": min(x.min_battery_margin_j for x in recs) / 3600},
        "max_resource_utilisation": max(x.max_resource_utilisation for x in recs),
        "utilisation_mean": statistics.fmean(x.utilisation for x in recs),
        "checked_plans": r.checked,
        "checker_violations": r.violations[:5],
        "wall_s": round(r.wall_s, 2),
    }


# --- baselines -----------------------------------------------------------------------------------
def bounds(inst: Instance, dag: Dag) -> tuple[float, float]:
    """(Edge-Only, Cloud-Only) makespans (§5): every query on its own resource, no capacity or
    energy limits, best-case compute (the fastest device of the tier per query kind). Both pay
    exactly one edge→cloud hop per path, over the cheapest link from the path's source device
    (edge↔edge transfers are free in Edge-Only), so the two differ only in where the compute
    runs: the paper's weak lower bounds."""
    info = compile_dag(dag, inst)
    e, c = inst.edge_ids, inst.cloud_ids
    lam_e = inst.service_s[:, e].min(axis=1)
    lam_c = inst.service_s[:, c].min(axis=1)

    def hop(source: int, u: int) -> float:
        src = info.allowed[source]  # the source's pinned edge device(s)
        return float((inst.latency_s[np.ix_(src, c)]
                      + info.delta[u] * inst.inv_bandwidth[np.ix_(src, c)]).min())

    out = []
    for edge_only in (True, False):
        best = 0.0
        for s0 in np.flatnonzero(info.is_source):
            A = np.full(info.n, -np.inf)
            A[s0] = 0.0
            for u, w in zip(info.esrc, info.edst, strict=True):
                if A[u] == -np.inf:
                    continue
                if edge_only:
                    lam = lam_e[info.kind[u]]
                    h = hop(s0, u) if info.is_sink[w] else 0.0
                else:
                    lam = lam_e[info.kind[u]] if info.is_source[u] else lam_c[info.kind[u]]
                    h = hop(s0, u) if info.is_source[u] else 0.0
                A[w] = max(A[w], A[u] + lam + h)
            best = max(best, float(A[info.is_sink].max()))
        out.append(best)
    return out[0], out[1]


def baseline_means(inst: Instance, trace: Trace, active: list[frozenset[str]]) -> dict[str, float]:
    dags = {e.name: e.dag for e in trace.events if e.kind == "add"}
    b = {name: bounds(inst, d) for name, d in dags.items()}
    edge = [sum(b[d][0] for d in a) for a in active]
    cloud = [sum(b[d][1] for d in a) for a in active]
    return {"edge_only_s_mean": statistics.fmean(edge),
            "cloud_only_s_mean": statistics.fmean(cloud)}


# --- rebalancing gain ---------------------------------------------------------------------------
def gains(base: Run, other: Run) -> dict[str, Any]:
    """Per-interval relative reduction of L̂ vs no rebalancing, where both runs hold the same
    active DAGs (a rejection makes the sets differ)."""
    rel = [(a.makespan_sum_s - b.makespan_sum_s) / a.makespan_sum_s
           for a, b, sa, sb in zip(base.records, other.records, base.active, other.active,
                                   strict=True)
           if sa == sb and a.makespan_sum_s > 0]
    return {
        "compared_intervals": len(rel),
        "mean_pct": 100 * statistics.fmean(rel) if rel else math.nan,
        "median_pct": 100 * _q(rel, 0.5),
        "p90_pct": 100 * _q(rel, 0.9),
        "max_pct": 100 * max(rel, default=math.nan),
        "min_pct": 100 * min(rel, default=math.nan),
        "share_improved": sum(1 for x in rel if x > 1e-9) / len(rel) if rel else math.nan,
    }


# --- MILP gap -----------------------------------------------------------------------------------
def milp_instances(n: int) -> list[tuple[Instance, list[Dag]]]:
    """Small instances: ≤ 8 resources (5 edge + 3 cloud, or 4 + 2), 1–2 DAGs of ≤ 10 vertices
    in total; service ×4 and 50× energy per event (5e-4 J) with 0.1–0.6 W of battery
    headroom above the idle drain, so that capacity and battery bind in some instances."""
    out = []
    rng = np.random.default_rng(2024)
    for i in range(n):
        n_edge, n_cloud = (5, 3) if i % 2 == 0 else (4, 2)
        base = make_setup(n_edge, n_cloud, seed=100 + i)
        res = tuple(dataclasses.replace(r, battery_j=r.idle_drain_j + r.recharge_s
                                        * float(rng.uniform(0.1, 0.6)))
                    if r.tier == "edge" else r for r in base.resources)
        inst = Instance(res, base.kinds, base.service_s * 4, base.energy_j * 50,
                        base.latency_s, base.bandwidth_Bps, Options())
        total = int(rng.integers(6, 11))
        sizes = [total] if total <= 6 or rng.random() < 0.4 else [total // 2, total - total // 2]
        sizes = [max(4, s) for s in sizes]
        while sum(sizes) > 10:
            sizes[-1] -= 1
        dags = []
        for k, s in enumerate(sizes):
            d = random_dag(f"m{i}d{k}", s, rng, input_rate=float(rng.uniform(100, 300)))
            # pin each source to one edge device, as the generator does (A8)
            srcs = {u for u, _ in d.edges} - {w for _, w in d.edges}
            edges = [r.name for r in inst.resources if r.tier == "edge"]
            verts = tuple(dataclasses.replace(v, pin=(edges[int(rng.integers(len(edges)))],))
                          if v.name in srcs else v for v in d.vertices)
            dags.append(dataclasses.replace(d, vertices=verts))
        out.append((inst, dags))
    return out


def heuristic_totals(inst: Instance, dags: list[Dag]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name, penalty in (("topset", False), ("topset-p", True)):
        state = State(inst)
        ok = all(topset_place(state, d, penalty=penalty).ok for d in dags)
        out[name] = state.total() if ok else None
        for strategy in ("vertex", "edge", "vertex+edge"):
            if ok:
                s2 = state.copy()
                rebalance(s2, strategy)
                out[f"{name}+{strategy}"] = s2.total()
            else:
                out[f"{name}+{strategy}"] = None
    ga = GaParams(population=ENV["SEED004_GA_POP"], generations=ENV["SEED004_GA_GENS"],
                  time_limit_s=10)
    ctl = Controller(inst, "gai", ga=ga, seed=SEED)
    ok = all(ctl.arrive(d).ok for d in dags)
    out["gai"] = ctl.state.total() if ok else None
    new, _ = gag_replan(inst, [compile_dag(d, inst) for d in dags], ga)
    out["gag"] = new.total() if new is not None else None
    return out


def milp_gap() -> dict[str, Any]:
    rows = []
    limits = MilpLimits(time_limit_s=ENV["SEED004_MILP_TIME_S"])
    for i, (inst, dags) in enumerate(milp_instances(ENV["SEED004_MILP_INSTANCES"])):
        res = solve_milp(inst, [compile_dag(d, inst) for d in dags], limits)
        row: dict[str, Any] = {"instance": i, "vertices": sum(len(d.vertices) for d in dags),
                               "resources": inst.n_resources, "dags": len(dags),
                               "milp_status": res.status, "milp_s": round(res.time_s, 3)}
        heur = heuristic_totals(inst, dags)
        if res.status == "optimal":
            opt = res.objective_s
            row["optimum_s"] = opt
            row["gap_pct"] = {k: (100 * (v - opt) / opt if v is not None else None)
                              for k, v in heur.items()}
        else:
            row["heuristic_found"] = {k: v is not None for k, v in heur.items()}
        rows.append(row)
    methods = ["topset", "topset+vertex", "topset+edge", "topset+vertex+edge", "topset-p",
               "topset-p+vertex", "topset-p+edge", "topset-p+vertex+edge", "gai", "gag"]
    dist = {}
    solved = [r for r in rows if r["milp_status"] == "optimal"]
    for m in methods:
        g = [r["gap_pct"][m] for r in solved if r["gap_pct"][m] is not None]
        dist[m] = {
            "n": len(g),
            "failed": sum(1 for r in solved if r["gap_pct"][m] is None),
            "optimal_share": sum(1 for x in g if x < 1e-6) / len(g) if g else math.nan,
            "mean_pct": statistics.fmean(g) if g else math.nan,
            "median_pct": _q(g, 0.5), "p90_pct": _q(g, 0.9), "max_pct": max(g, default=math.nan),
            "below_optimum": sum(1 for x in g if x < -1e-6),
        }
    return {"instances": len(rows), "milp_optimal": len(solved),
            "milp_infeasible": sum(1 for r in rows if r["milp_status"] == "infeasible"),
            "milp_s_median": _q([r["milp_s"] for r in rows], 0.5),
            "milp_s_max": max(r["milp_s"] for r in rows),
            "gap_distribution": dist, "rows": rows}


# --- battery run-down scenario --------------------------------------------------------------
def battery_scenario(inst: Instance, trace: Trace) -> dict[str, Any]:
    """TopSet/P + vertex+edge on Small Poisson; every 10th interval the busiest edge device's
    battery drops to its idle drain plus 30 % of its current query drain."""
    ctl = Controller(inst, "topset-p", "vertex+edge", seed=SEED)
    dags: dict[str, Dag] = {}
    events, evicted, failures, valid = 0, 0, 0, True
    for i, e in enumerate(trace.events):
        ctl.step(e)
        if e.kind == "add":
            dags[e.name] = e.dag
        if i % 10 == 9:
            st = ctl.state
            edges = ctl.inst.edge_ids
            p = int(edges[np.argmax(st.W[edges])])
            r = ctl.inst.resources[p]
            rec = ctl.battery(r.name, r.idle_drain_j + 0.3 * r.recharge_s * float(st.W[p]))
            events += 1
            evicted += int(rec.extra.get("evicted", 0))
            failures += 0 if rec.ok else 1
            report = check_plan(ctl.inst, [dags[d] for d in ctl.state.dags],
                                ctl.state.assignment())
            valid &= report.ok
    return {"battery_events": events, "queries_evicted": evicted, "dags_dropped": failures,
            "all_plans_valid": valid, "final_makespan_sum_s": ctl.state.total()}


# --- MLflow --------------------------------------------------------------------------------------
class Tracker:
    """One MLflow run per (setup, workload, method, strategy)."""

    def __init__(self) -> None:
        import mlflow
        from mlflow.tracking import MlflowClient

        settings = load_settings()
        settings.home.mkdir(parents=True, exist_ok=True)
        mlflow.set_tracking_uri(settings.tracking_uri)
        self.client = MlflowClient(settings.tracking_uri)
        name = "streamplan-seed004-bench"
        exp = self.client.get_experiment_by_name(name)
        self.exp = exp.experiment_id if exp else self.client.create_experiment(
            name, artifact_location=settings.artifact_root
            if settings.mlflow_tracking_uri is None else None)

    def log(self, setup: str, workload: str, method: str, strategy: str, r: Run,
            s: dict[str, Any], ga: GaParams | None) -> None:
        from mlflow.entities import Metric, Param

        run = self.client.create_run(self.exp, run_name=f"{setup}-{workload}-{method}-{strategy}",
                                     tags={"streamplan.seed": "004", "setup": setup})
        rid = run.info.run_id
        params = {"setup": setup, "workload": workload, "method": method,
                  "rebalance": strategy, "seed": SEED, "latency_mode": "exclusive",
                  "capacity_mode": "strict"}
        if ga is not None:
            params.update({f"ga.{k}": v for k, v in dataclasses.asdict(ga).items()})
        now = int(time.time() * 1000)
        metrics = [Metric("makespan_sum_s", x.makespan_sum_s, now, x.t) for x in r.records]
        metrics += [Metric("planning_s", x.planning_s, now, x.t) for x in r.records]
        metrics += [Metric("migrations", x.migrations, now, x.t) for x in r.records]
        metrics += [Metric("stabilisation_s", x.stabilisation_s, now, x.t) for x in r.records]
        metrics += [Metric("utilisation", x.utilisation, now, x.t) for x in r.records]
        metrics += [Metric("min_battery_margin_j", x.min_battery_margin_j, now, x.t)
                    for x in r.records if math.isfinite(x.min_battery_margin_j)]
        metrics += [Metric(f"summary.{k}", float(v), now, 0) for k, v in _flat(s).items()
                    if isinstance(v, int | float) and math.isfinite(v)]
        for i in range(0, len(metrics), 900):
            self.client.log_batch(rid, metrics=metrics[i:i + 900],
                                  params=[Param(k, str(v)) for k, v in params.items()]
                                  if i == 0 else [])
        self.client.set_terminated(rid)


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


# --- the benchmark --------------------------------------------------------------------------------
def save(out: dict[str, Any]) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(_clean(out), indent=2, allow_nan=False) + "\n")


def _clean(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean(v) for v in x]
    if isinstance(x, float | np.floating):
        x = float(x)
        return round(x, 6) if math.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    return x


@dataclasses.dataclass
class Bench:
    """What the section tests share: setups, pool, workloads, runs and the results dict."""

    tracker: Tracker
    setups: dict[str, Instance]
    pool: list[Dag]
    workloads: dict[str, dict[str, Trace]]
    runs: dict[tuple[str, ...], Run]
    out: dict[str, Any]
    t_start: float


@pytest.fixture(scope="module")
def bench() -> Bench:
    setups = {name: make_setup(*SETUPS[name], seed=SEED) for name in ("small", "large")}
    pool = dag_pool(SEED, check=setups["small"])
    out: dict[str, Any] = {
        "env": ENV,
        "setups": {k: {"edge": int(v.is_edge.sum()), "cloud": int((~v.is_edge).sum())}
                   for k, v in setups.items()},
        "pool_sizes": [len(d.vertices) for d in pool],
        "workloads": {}, "runs": {}, "baselines": {}, "rebalancing": {}, "ga": {},
    }
    workloads = {setup: traces(pool, inst, setup) for setup, inst in setups.items()}
    for setup, wl in workloads.items():
        n_res = setups[setup].n_resources
        out["workloads"][setup] = {
            name: {"intervals": len(tr.events),
                   "arrivals": sum(e.kind == "add" for e in tr.events),
                   "max_active_queries": max(tr.active_after()),
                   "mean_U": statistics.fmean(tr.active_after()) / n_res}
            for name, tr in wl.items()}
    return Bench(Tracker(), setups, pool, workloads, {}, out, time.perf_counter())


# Workloads that get every rebalancing strategy; the others run without (for Fig. 3).
REBALANCED = {"small": ("poisson", "rw2±0", "rw2±0.5", "rw2±1"), "large": ("poisson", "rw2±0.5")}


@pytest.mark.timeout(3600)
def test_topset_family(bench: Bench) -> None:
    """Figs. 3–7 for TopSet and TopSet/P with every rebalancing strategy; baselines."""
    out, runs = bench.out, bench.runs
    for setup, inst in bench.setups.items():
        out["runs"][setup], out["baselines"][setup], out["rebalancing"][setup] = {}, {}, {}
        for name, tr in bench.workloads[setup].items():
            res = out["runs"][setup][name] = {}
            check_every = 5 if setup == "small" else 50
            strategies = STRATEGIES if name in REBALANCED[setup] else ("none",)
            for method in ("topset", "topset-p"):
                for strategy in strategies:
                    r = run(inst, tr, method, strategy, check_every=check_every)
                    runs[(setup, name, method, strategy)] = r
                    res[f"{method}/{strategy}"] = s = summary(r)
                    bench.tracker.log(setup, name, method, strategy, r, s, None)
            out.setdefault("series", {}).setdefault(setup, {})[name] = {
                key: [x.makespan_sum_s for x in runs[(setup, name, *key.split("/"))].records]
                for key in ("topset/none", "topset-p/none")}
            out.setdefault("series_dags", {}).setdefault(setup, {})[name] = {
                key: [x.active_dags for x in runs[(setup, name, *key.split("/"))].records]
                for key in ("topset/none", "topset-p/none")}
            out["baselines"][setup][name] = baseline_means(
                inst, tr, runs[(setup, name, "topset", "none")].active)
            if len(strategies) > 1:
                out["rebalancing"][setup][name] = {
                    f"{m}/{s}": gains(runs[(setup, name, m, "none")], runs[(setup, name, m, s)])
                    for m in ("topset", "topset-p") for s in STRATEGIES[1:]}
            save(out)
        # placing all initial DAGs at once (Large target: TopSet < 1 s)
        tr = bench.workloads[setup]["poisson"]
        for penalty in (False, True):
            state = State(inst)
            t0 = time.perf_counter()
            for e in tr.events[: INITIAL[setup]]:
                topset_place(state, e.dag, penalty=penalty)
            out.setdefault("initial_placement_s", {}).setdefault(setup, {})[
                "topset-p" if penalty else "topset"] = time.perf_counter() - t0
        save(out)
    for setup in out["runs"]:
        for name, res in out["runs"][setup].items():
            for key, s in res.items():
                assert not s["checker_violations"], (setup, name, key, s["checker_violations"])


@pytest.mark.timeout(3600)
def test_genetic(bench: Bench) -> None:
    """GAI (with rebalancing on Small Poisson) and GAG, bounded by the SEED004_* variables."""
    out, runs = bench.out, bench.runs
    for setup, inst in bench.setups.items():
        out["ga"][setup] = {}
        for name in ("poisson", "rw2±0.5"):
            tr = bench.workloads[setup][name]
            g = out["ga"][setup][name] = {}
            if setup == "small":
                strategies = STRATEGIES if name == "poisson" else ("none",)
                plans = [("gai", s, None) for s in strategies] + \
                        [("gag", "none", ENV["SEED004_GAG_INTERVALS"])]
            else:
                n = ENV["SEED004_LARGE_GA_INTERVALS"]
                plans = [("gai", "none", n), ("gag", "none", n)]
            for method, strategy, n in plans:
                ga = ga_params(ENV["SEED004_GAI_TIME_S"] if method == "gai"
                               else ENV["SEED004_GAG_TIME_S"])
                r = run(inst, tr, method, strategy, ga=ga, intervals=n, check_every=5)
                runs[(setup, name, method, strategy)] = r
                s = summary(r)
                s["ga_generations_median"] = _q([x.ga_generations for x in r.records
                                                 if x.ga_generations is not None], 0.5)
                s["ga_failures"] = sum(1 for x in r.records if not x.ok)
                s["series_s"] = [x.makespan_sum_s for x in r.records]
                s["series_dags"] = [x.active_dags for x in r.records]
                k = len(r.records)
                ts = runs.get((setup, name, "topset", "none")) or run(inst, tr, "topset", "none",
                                                                       check_every=0)
                tp = runs.get((setup, name, "topset-p", "none")) or run(
                    inst, tr, "topset-p", "none", check_every=0)
                out.setdefault("series", {}).setdefault(setup, {}).setdefault(name, {
                    "topset/none": [x.makespan_sum_s for x in ts.records],
                    "topset-p/none": [x.makespan_sum_s for x in tp.records]})
                out.setdefault("series_dags", {}).setdefault(setup, {}).setdefault(name, {
                    "topset/none": [x.active_dags for x in ts.records],
                    "topset-p/none": [x.active_dags for x in tp.records]})
                ts_phi = _q([x.planning_s for x in ts.records[:k] if x.event == "add"], 0.5)
                ga_phi = _q([x.planning_s for x in r.records if x.event == "add"], 0.5)
                s["same_intervals"] = {"intervals": k, "planning_s_median": ga_phi,
                                       "topset_planning_s_median": ts_phi,
                                       "slowdown_vs_topset": ga_phi / ts_phi}
                g[f"{method}/{strategy}"] = s
                bench.tracker.log(setup, name, method, strategy, r, s, ga)
                assert not s["checker_violations"], (setup, name, method, s["checker_violations"])
                save(out)
            if setup == "small" and name == "poisson":
                out["rebalancing"].setdefault(setup, {}).setdefault(name, {}).update({
                    f"gai/{s}": gains(runs[(setup, name, "gai", "none")],
                                      runs[(setup, name, "gai", s)]) for s in STRATEGIES[1:]})
                save(out)


@pytest.mark.timeout(3600)
def test_sensitivity_and_battery(bench: Bench) -> None:
    """Small: interfered latency, utilisation E6, link figures; battery run-down."""
    out, small, pool = bench.out, bench.setups["small"], bench.pool
    wl = bench.workloads["small"]
    sens: dict[str, Any] = {}
    for label, opts in (("interfered", Options(latency_mode="interfered")),
                        ("utilisation", Options(capacity_mode="utilisation"))):
        inst = small.with_options(opts)
        sens[label] = {}
        for name in ("poisson", "rw2±0.5"):
            base = {}
            for method in ("topset", "topset-p"):
                for strategy in ("none", "edge", "vertex+edge"):
                    base[(method, strategy)] = run(inst, wl[name], method, strategy,
                                                   check_every=0)
            sens[label][name] = {
                f"{m}/{s}": {"makespan_sum_s_mean": summary(r)["makespan_sum_s_mean"],
                             "rejected": summary(r)["rejected"],
                             **({"gain": gains(base[(m, "none")], r)} if s != "none" else {})}
                for (m, s), r in base.items()}
    # link figures (not printed in the paper): the digest's placeholders, then edge↔edge
    # latency around the calibrated default (edge→cloud 20 ms)
    sens["links"] = {}
    grid = {"digest 60/2 ms": DIGEST_LINKS}
    for ee_ms in (2.0, 5.0, 10.0, 20.0, 40.0):
        grid[f"ec 20 ms, ee {ee_ms:g} ms"] = {
            **DEFAULT_LINKS, "edge-edge": LinkSpec(latency_ms=ee_ms, bandwidth_mbps=90.0)}
    for label, links in grid.items():
        inst = make_setup(*SETUPS["small"], seed=SEED, links=links)
        wl_links = traces(pool, inst, "small")
        for name in ("poisson", "rw2±0.5"):
            base = {s: run(inst, wl_links[name], "topset", s, check_every=0) for s in STRATEGIES}
            sens["links"][f"{label}/{name}"] = {
                "makespan_sum_s_mean": summary(base["none"])["makespan_sum_s_mean"],
                **{f"topset/{s}": gains(base["none"], base[s]) for s in STRATEGIES[1:]}}
    out["sensitivity_small"] = sens
    out["battery_rundown_small"] = battery_scenario(small, wl["poisson"])
    save(out)
    assert out["battery_rundown_small"]["all_plans_valid"]


@pytest.mark.timeout(3600)
def test_milp_gap(bench: Bench) -> None:
    """Heuristics vs the exact MILP on small instances (≤ 10 vertices, ≤ 8 resources)."""
    bench.out["milp_gap"] = milp_gap()
    save(bench.out)
    for m, d in bench.out["milp_gap"]["gap_distribution"].items():
        assert d["below_optimum"] == 0, m


def test_paper_comparison(bench: Bench, write_result) -> None:
    """Every comparison the paper's text states, with the direction and a note when off."""
    out = bench.out
    missing = [k for k in ("runs", "ga", "sensitivity_small", "milp_gap") if not out.get(k)]
    if missing:
        pytest.skip(f"sections did not run: {missing}")
    out["comparison"] = compare(out)
    out["wall_s"] = time.perf_counter() - bench.t_start
    write_result("seed004", _clean(out))
    assert out["comparison"]["planning_time"]["topset_large_p99_s"] < 1.0


# --- paper comparison ------------------------------------------------------------------------
def compare(out: dict[str, Any]) -> dict[str, Any]:
    runs, base, reb, ga = out["runs"], out["baselines"], out["rebalancing"], out["ga"]
    gap = out["milp_gap"]["gap_distribution"]
    rows: list[dict[str, Any]] = []

    def row(claim: str, paper: Any, ours: Any, matches: bool | None, note: str = "") -> None:
        rows.append({"claim": claim, "paper": paper, "ours": ours, "direction_matches": matches,
                     **({"note": note} if note else {})})

    def L(setup: str, wl: str, key: str) -> float:
        return runs[setup][wl][key]["makespan_sum_s_mean"]

    for setup in runs:
        for wl in runs[setup]:
            b = base[setup][wl]
            algos = min(L(setup, wl, f"{m}/none") for m in ("topset", "topset-p"))
            row(f"{setup} {wl}: Cloud-Only < Edge-Only < every strategy",
                "Cloud-Only < Edge-Only < all (Fig. 3)",
                {"cloud_only": b["cloud_only_s_mean"], "edge_only": b["edge_only_s_mean"],
                 "best_topset": algos},
                b["cloud_only_s_mean"] < b["edge_only_s_mean"] < algos)
    for wl, paper in (("rw2±0.5", 10.0), ("rw2±0", 10.0), ("rw2±1", 10.0), ("poisson", 6.0)):
        ratio = L("large", wl, "topset/none") / L("small", wl, "topset/none")
        rel = (ratio - paper) / paper
        row(f"Large / Small L̂ ratio, {wl}", f"≈{paper:g}×", ratio,
            ratio > 1, "" if abs(rel) <= 0.15 else (
                "L̂ scales with the number of active DAGs: the RW traces hold U ≈ 2 on both "
                "setups (10× the DAGs), Poisson holds 70 vs 16 initial DAGs (≈4.4×); per-DAG "
                "makespans are similar on both setups (one edge→cloud hop plus a few edge "
                "hops), so the ratio tracks the DAG-count ratio"))
    for setup in ga:
        for wl, g in ga[setup].items():
            # per-DAG makespan, so that a method rejecting DAGs is not credited for it
            sums = {"gai": g["gai/none"]["series_s"], "gag": g["gag/none"]["series_s"],
                    "topset": out["series"][setup][wl]["topset/none"],
                    "topset-p": out["series"][setup][wl]["topset-p/none"]}
            dags = {"gai": g["gai/none"]["series_dags"], "gag": g["gag/none"]["series_dags"],
                    "topset": out["series_dags"][setup][wl]["topset/none"],
                    "topset-p": out["series_dags"][setup][wl]["topset-p/none"]}
            k = min(len(v) for v in sums.values())
            mean = {m: statistics.fmean(x / n for x, n in zip(v[:k], dags[m][:k], strict=True)
                                        if n) for m, v in sums.items()}
            row(f"{setup} {wl}: GAI beats GAG (first {k} intervals, per-DAG makespan)",
                "GAI < GAG (Fig. 3)",
                {"gai": mean["gai"], "gag": mean["gag"], "intervals": k},
                mean["gai"] < mean["gag"],
                "" if mean["gai"] < mean["gag"] else
                "GAG re-places every DAG on each interval with a bounded GA (time cap per "
                "interval); over the first intervals few DAGs are active and the global search "
                "is small, so it is not yet penalised by the search-space growth the paper "
                "blames for GAG's poorer results")
            best_ga = min(mean["gai"], mean["gag"])
            ts = min(mean["topset"], mean["topset-p"])
            rel = (ts - best_ga) / best_ga
            row(f"{setup} {wl}: TopSet(/P) close to the better GA (first {k} intervals, "
                "per-DAG makespan)",
                "close (Fig. 3)", {"topset_best": ts, "ga_best": best_ga, "rel_diff": rel},
                abs(rel) <= 0.15,
                "" if abs(rel) <= 0.15 else
                "TopSet is greedy per vertex: next to its parent's edge device another edge "
                "hop looks cheaper than the edge→cloud one, although the sink's pin makes that "
                "hop unavoidable later, so TopSet collects edge hops the whole-DAG GA avoids by "
                "crossing to the VMs early (1 ms VM↔VM, 3× faster compute). Our GA is "
                f"near-optimal on the lightly loaded first intervals (milp_gap: GAI "
                f"{gap['gai']['mean_pct']:.1f} % mean, TopSet {gap['topset']['mean_pct']:.0f} %), "
                "the paper's GA returned nothing on Large after ≈100 intervals")
    for setup in runs:
        for wl in runs[setup]:
            a, b = L(setup, wl, "topset/none"), L(setup, wl, "topset-p/none")
            row(f"{setup} {wl}: TopSet/P ≤ TopSet", "TopSet/P marginally, consistently lower",
                {"topset": a, "topset_p": b, "rel_diff": (b - a) / a}, b <= a,
                "" if b <= a else "exclusive latency (E2 as printed): co-location does not slow "
                "a query, so TopSet/P's interference penalty only spreads queries over more "
                "edge hops; the difference is the paper's 'marginal' one either way (see "
                "rel_diff, and sensitivity_small.interfered for the interfered-latency mode)")
    for setup in reb:
        for wl, g in reb[setup].items():
            for algo in ("topset", "topset-p"):
                e, v, ve = (g[f"{algo}/{s}"] for s in ("edge", "vertex", "vertex+edge"))
                paper_max = 20.0 if setup == "small" else 25.0
                row(f"{setup} {wl} {algo}: edge rebalancing gain (max over intervals)",
                    f"up to {paper_max:g} %", e["max_pct"], e["max_pct"] > 0,
                    "" if abs(e["max_pct"] - paper_max) <= 0.15 * paper_max else
                    "the gain of co-locating the ends of a critical edge is set by the "
                    "edge↔edge latency, which the paper does not print (calibration."
                    "links_sensitivity_small)")
                row(f"{setup} {wl} {algo}: edge rebalancing > vertex rebalancing (mean gain)",
                    "edge ≫ vertex (Fig. 4)", {"edge_mean_pct": e["mean_pct"],
                                              "vertex_mean_pct": v["mean_pct"]},
                    e["mean_pct"] > v["mean_pct"],
                    "" if e["mean_pct"] > v["mean_pct"] else
                    "edge moves save edge↔edge hops, vertex moves compute time; which is "
                    "larger depends on the edge↔edge latency the paper does not print "
                    "(calibration.links_sensitivity_small: with the digest's 2 ms edge moves "
                    "gain less than vertex moves)")
                if wl in ("poisson", "rw2±0.5"):
                    row(f"{setup} {wl} {algo}: vertex+edge > edge (mean gain)",
                        "V+E better than E (Poisson, RW 2±0.5)",
                        {"vertex+edge_mean_pct": ve["mean_pct"], "edge_mean_pct": e["mean_pct"]},
                        ve["mean_pct"] > e["mean_pct"])
    for setup in reb:
        for wl in reb[setup]:
            for algo in ("topset", "topset-p"):
                mv = runs[setup][wl][f"{algo}/vertex"]["migrations"]
                me = runs[setup][wl][f"{algo}/edge"]["migrations"]
                row(f"{setup} {wl} {algo}: vertex rebalancing migrates less than edge",
                    "vertex < edge (Fig. 6); median 0", {"vertex_total": mv["total"],
                                                          "edge_total": me["total"],
                                                          "vertex_median": mv["median"],
                                                          "edge_median": me["median"]},
                    mv["total"] < me["total"],
                    "" if mv["total"] < me["total"] else
                    "every improving move is a migration: where edge moves rarely shorten a "
                    "DAG (see the edge gain rows) fewer of them are made")
    pt = {}
    for setup in runs:
        pt[f"topset_{setup}_max_s"] = max(
            v["planning_s"]["all_intervals_max"] for wl in runs[setup]
            for v in runs[setup][wl].values())
        pt[f"topset_{setup}_median_s"] = statistics.median(
            runs[setup][wl][f"{m}/none"]["planning_s"]["median"]
            for m in ("topset", "topset-p") for wl in runs[setup])
        pt[f"topset_{setup}_p99_s"] = max(
            v["planning_s"]["all_intervals_p99"] for wl in runs[setup]
            for v in runs[setup][wl].values())
    pt["initial_placement_s"] = out.get("initial_placement_s")
    row("TopSet(/P) planning time on Large < 1 s except outliers (p99 of every run, with "
        "rebalancing; max reported too)", "< 1 s barring outliers",
        {"p99": pt["topset_large_p99_s"], "max": pt["topset_large_max_s"]},
        pt["topset_large_p99_s"] < 1.0,
        "" if pt["topset_large_max_s"] < 1.0 else "the max is an outlier on shared cores "
        "(see machine.load_avg_1m)")
    for setup in ga:
        for wl, g in ga[setup].items():
            for m, paper in (("gai", 1e3), ("gag", 1e4)):
                f = g[f"{m}/none"]["same_intervals"]["slowdown_vs_topset"]
                pt[f"{m}_{setup}_{wl}_slowdown"] = f
                row(f"{setup} {wl}: {m.upper()} planning-time slowdown vs TopSet", f"≈{paper:g}×",
                    f, f > 10, "" if paper / 10 <= f <= paper * 10 else
                    "GA time is capped per run (SEED004_GAI_TIME_S / SEED004_GAG_TIME_S) to keep "
                    "the benchmark bounded; the paper's GAG ran for hours")
    row("GAG fails first as scale grows", "GAI, GAG return nothing after ≈100 intervals on "
        "Large, GAG earlier",
        {f"{s}_{w}_{m}": ga[s][w][f"{m}/none"]["ga_failures"] for s in ga for w in ga[s]
         for m in ("gai", "gag")}, None,
        "not decided by the bounded runs: a failure is no valid chromosome within the time "
        "cap; GAI fails on Small once the 4 VMs are busy, but GAG runs only the first "
        "SEED004_GAG_INTERVALS intervals there and both run only the first "
        "SEED004_LARGE_GA_INTERVALS on Large, where 1,000 mostly idle resources make random "
        "chromosomes valid")
    if "gai/edge" in reb.get("small", {}).get("poisson", {}):
        g = reb["small"]["poisson"]
        shares = {k: g[k]["share_improved"] for k in ("gai/vertex+edge", "topset/vertex+edge",
                                                      "topset-p/vertex+edge")}
        row("small poisson: GAI improves most often under rebalancing (vertex+edge)",
            "GAI on Small improves most often (Fig. 4)", shares,
            shares["gai/vertex+edge"] >= max(shares["topset/vertex+edge"],
                                             shares["topset-p/vertex+edge"]),
            "" if shares["gai/vertex+edge"] >= max(shares["topset/vertex+edge"],
                                                   shares["topset-p/vertex+edge"]) else
            "GAI already places each DAG close to its best (whole-DAG GA), so the critical "
            "paths offer fewer improving moves than after TopSet's greedy placement")
    matched = [r for r in rows if r["direction_matches"] is True]
    missed = [r for r in rows if r["direction_matches"] is False]
    return {"planning_time": pt, "calibration": calibration(out), "rows": rows,
            "direction_matches": len(matched), "direction_differs": len(missed),
            "not_decided": len(rows) - len(matched) - len(missed)}


def calibration(out: dict[str, Any]) -> dict[str, Any]:
    """How the link figures (not printed in the paper) were set, and what they decide.

    Fig. 3's level (Σ makespan ≈ 5 s on Large RW, 10× Small) fixes the edge→cloud latency,
    which every path pays once; Fig. 4's "up to 20 % (Small)" edge-rebalancing gain fixes the
    edge↔edge latency, which sets how much co-locating the ends of a critical edge saves.
    """
    runs = out["runs"]
    level = {f"{setup} {wl}": runs[setup][wl]["topset/none"]["makespan_sum_s_mean"]
             for setup in runs for wl in runs[setup] if wl.startswith("rw")}
    links = {}
    for key, g in out["sensitivity_small"]["links"].items():
        e, v = g["topset/edge"], g["topset/vertex"]
        links[key] = {"makespan_sum_s_mean": g["makespan_sum_s_mean"],
                      "edge_mean_pct": e["mean_pct"], "edge_max_pct": e["max_pct"],
                      "vertex_mean_pct": v["mean_pct"],
                      "edge_beats_vertex": e["mean_pct"] > v["mean_pct"]}
    return {"links": {k: v.model_dump() for k, v in DEFAULT_LINKS.items()},
            "digest_links": {k: v.model_dump() for k, v in DIGEST_LINKS.items()},
            "fig3_level_s": {"paper": "≈5 s on Large RW, 10× Small (≈0.5 s)", "ours": level},
            "fig4_small_edge_gain": {"paper": "up to 20 %", "ours_max_pct": {
                f"{wl} {algo}": g[f"{algo}/edge"]["max_pct"]
                for wl, g in out["rebalancing"].get("small", {}).items()
                for algo in ("topset", "topset-p")}},
            "links_sensitivity_small": links}
