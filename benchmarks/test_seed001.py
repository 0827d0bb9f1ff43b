"""Seed 001 (global LP load shedding, Röger et al.): Fig. 6 solve times, Figs. 3–5 quality.

Solve time vs size (Fig. 6): one bottleneck running Q AND/SEQ patterns over every one of T
event types (share of queries per type = 100%), each feeding a join with a partner stream
and a sink (digest A12). Model build and SCIP solve are timed apart, for the aggregated
formulation (our default) and the paper's full one (one r per pattern and type).

Quality: digest example G, then Fig. 1's topology on a balanced data set and on two
Borg-2019-shaped generated data sets (Fig. 3: loss of local vs global; Figs. 4–5: ω2's
processing time vs its target), then random graphs with two bottlenecks and OR patterns.
Latency is checked by an exact Lindley-recursion simulation of each plan's M/M/1 load.

Run: ``.venv/bin/python -m pytest -m bench benchmarks/test_seed001.py -p no:cacheprovider``
(about 5 minutes on two shared cores, 5 GB RAM for the full 10 000 × 100 model; set
``SEED001_FULL_MAX_SHARES=200000`` to skip it). Results: ``benchmarks/results/seed001.json``.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyscipopt
import pytest

from optimizers.shedding.fluid import p_star, processing_load
from optimizers.shedding.instance import Instance
from optimizers.shedding.lp import build_model, solve
from optimizers.shedding.planner import ShedPlan, plan
from optimizers.shedding.simulate import simulate_sojourn
from optimizers.shedding_workload import (
    borg_trace,
    example_g,
    fig1_instance,
    random_instance,
    segment_mixes,
)
from streamplan.settings import REPO_ROOT

pytestmark = pytest.mark.bench

RESULTS = REPO_ROOT / "benchmarks" / "results" / "seed001.json"
GRID = [(100, 10), (1000, 50), (1000, 100), (10_000, 100)]
SHARE_SWEEP = [(1000, 100, 0.1), (1000, 100, 0.5), (10_000, 100, 0.1)]
# seed 001, Fig. 6 as quoted in the text (solver and hardware not reported)
PAPER_FIG6 = {
    (100, 10): "< 1 s",
    (1000, 50): "< 1 s",
    (1000, 100): "slightly above 1 s",
    (10_000, 100): "16.25 s",
}
TARGET_SOLVE_S = {(1000, 100): 1.0, (10_000, 100): 10.0}
FULL_MAX_SHARES = int(os.environ.get("SEED001_FULL_MAX_SHARES", "1000000"))
TOLERANCE = 0.10  # paper's dead band on the required processing time
SIM_EVENTS = 400_000
MODES = ("global", "local", "none")


@pytest.fixture(scope="module")
def results() -> Iterator[dict[str, Any]]:
    """Collected by the tests below and merged into ``seed001.json`` at the end (a run of
    some tests with ``-k`` updates only their sections)."""
    out: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    out.update({
        "seed": "001",
        "command": "make bench (.venv/bin/python -m pytest -m bench benchmarks/test_seed001.py"
                   " -p no:cacheprovider)",
        "machine": {
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "cpu_count": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
            "load_avg_1m_at_start": os.getloadavg()[0],
        },
        "solver": f"SCIP {pyscipopt.Model().version()} / PySCIPOpt {pyscipopt.__version__}",
    })
    out.setdefault("notes", {})
    yield out
    out["machine"]["load_avg_1m_at_end"] = os.getloadavg()[0]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")


def _time_solve(inst: Instance, form: str) -> dict[str, Any]:
    """Build and solve the first bottleneck's global LP once; times in seconds."""
    started = time.perf_counter()
    model, v = build_model(inst, inst.op_index["w0"], formulation=form)
    build_s = time.perf_counter() - started
    res = solve(model)
    return {
        "formulation": form,
        "build_s": round(build_s, 4),
        "solve_s": round(res.time_s, 4),
        "status": res.status,
        "objective": res.objective,
        "n_vars": res.n_vars,
        "n_conss": res.n_conss,
    }


def test_solve_time_vs_size(results: dict[str, Any]) -> None:
    rows = []
    for (t, q), share in [(k, 1.0) for k in GRID] + [((t, q), s) for t, q, s in SHARE_SWEEP]:
        started = time.perf_counter()
        inst = random_instance(t, q, share=share, rate_sigma=0.1, seed=1)
        inst_s = time.perf_counter() - started
        runs = {}
        agg = [_time_solve(inst, "aggregated") for _ in range(3)]
        runs["aggregated"] = {**agg[0], "build_s": statistics.median(a["build_s"] for a in agg),
                              "solve_s": statistics.median(a["solve_s"] for a in agg)}
        if t * q * share <= FULL_MAX_SHARES:
            runs["full"] = _time_solve(inst, "full")
            assert runs["full"]["objective"] == pytest.approx(runs["aggregated"]["objective"],
                                                              rel=1e-6)
        target = TARGET_SOLVE_S.get((t, q)) if share == 1.0 else None
        rows.append({
            "types": t,
            "queries": q,
            "share_of_queries_per_type": share,
            "free_shares": t * q * share,
            "instance_build_s": round(inst_s, 3),
            "ours": runs,
            "paper_solve": PAPER_FIG6.get((t, q)) if share == 1.0 else None,
            "target_solve_s": target,
            "target_met_aggregated": (runs["aggregated"]["build_s"]
                                      + runs["aggregated"]["solve_s"] <= target)
            if target else None,
            "target_met_full_solve_only": (runs["full"]["solve_s"] <= target)
            if target and "full" in runs else None,
        })
    results["solve_time_vs_size"] = rows
    results["notes"]["fig6"] = (
        "Fig. 6: 'aggregated' eliminates r exactly (r = y/(σλ), the cheapest shares meeting "
        "Eqs. 12–13; SCIP's presolve does the same aggregation on the full model); targets "
        "are judged on its build + solve. 'full' is the paper's LP with one variable and one "
        "row per (pattern, type), built through PySCIPOpt's matrix API (one Python object per "
        "variable, term and row), and its solve time is reported against the "
        "paper's figure. instance_build_s is the workload generator plus validation."
    )
    missed = [size(r) for r in rows if r["target_met_aggregated"] is False]
    full_missed = [size(r) for r in rows if r["target_met_full_solve_only"] is False]
    results["notes"]["targets"] = (
        f"aggregated (build + solve) misses the target at {missed or 'no size'}; the full "
        f"formulation's solve alone misses it at {full_missed or 'no size'}"
    )
    assert all(r["target_met_aggregated"] is not False for r in rows)


def size(row: dict[str, Any]) -> str:
    """``types×queries`` label of a size row."""
    return f"{row['types']}×{row['queries']}"


def _latency(inst: Instance, res: ShedPlan, op: int, seed: int) -> dict[str, float]:
    """M/M/1 and per-event simulated mean sojourn at ``op`` over its bound B*."""
    bound = inst.bound(op)
    return {
        service: simulate_sojourn(inst, res.keep, op, service=service, n_events=SIM_EVENTS,
                                  seed=seed) / bound
        for service in ("mm1", "per_event")
    }


def test_quality_example_g(results: dict[str, Any]) -> None:
    inst = example_g()
    w2 = inst.op_index["w2"]
    res = {m: plan(inst, m) for m in MODES}
    out = {m: r.state.weighted_output(inst) for m, r in res.items()}
    lat = {m: _latency(inst, r, w2, seed=1) for m, r in res.items()}
    results["example_g"] = {
        "ours": {
            "weighted_output": out,
            "loss_local_vs_global": 1 - out["local"] / out["global"],
            "drops_global": res["global"].drops(inst)["w2"],
            "drops_local": res["local"].drops(inst)["w2"],
            "sojourn_over_bound": lat,
        },
        "digest": {"global": 158.33, "local": 83.33, "loss": 0.4737},
    }
    assert out["global"] == pytest.approx(158.3333, rel=1e-5)
    assert lat["global"]["mm1"] <= 1 + TOLERANCE and lat["none"]["mm1"] > 1 + TOLERANCE


def _fig1_dataset(name: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per segment (mix at source 1, mix at source 2)."""
    if name == "balanced":
        return [(np.full(4, 0.25), np.full(4, 0.25))] * 4
    return list(zip(segment_mixes(borg_trace(f"{name}/1")),
                    segment_mixes(borg_trace(f"{name}/2")), strict=True))


def test_quality_fig1_datasets(results: dict[str, Any]) -> None:
    table = {}
    for name in ("balanced", "Borg-A", "Borg-B"):
        totals = dict.fromkeys(MODES, 0.0)
        p_ratio: dict[str, list[float]] = {m: [] for m in MODES}
        lat: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
        segments = _fig1_dataset(name)
        for k, (m1, m2) in enumerate(segments):
            inst = fig1_instance(m1, m2)
            w2 = inst.op_index["w2"]
            for m in MODES:
                res = plan(inst, m)
                totals[m] += res.state.weighted_output(inst)
                lam = res.state.lam[w2]
                p = processing_load(inst, w2, lam, res.keep[w2]) / lam.sum()
                p_ratio[m].append(p / p_star(inst.bound(w2), lam.sum()))
                lat[m].append(_latency(inst, res, w2, seed=k))
        table[name] = {
            "segments": len(segments),
            "weighted_output_total": totals,
            "loss_local_vs_global": 1 - totals["local"] / totals["global"],  # Fig. 3
            "p_over_target": {m: {"mean": statistics.mean(v), "max": max(v)}
                              for m, v in p_ratio.items()},  # Figs. 4–5
            "sojourn_over_bound_mm1_max": {m: max(x["mm1"] for x in v) for m, v in lat.items()},
            "sojourn_over_bound_per_event_mean": {
                m: statistics.mean(x["per_event"] for x in v) for m, v in lat.items()},
            "segments_within_tolerance_mm1": {
                m: sum(x["mm1"] <= 1 + TOLERANCE for x in v) for m, v in lat.items()},
        }
    results["fig1_quality"] = {
        "ours": table,
        "paper": {
            "fig3_loss": "balanced: 0; both Borg sets: > 0 (values only in the figure)",
            "fig4_5": "global and local follow the target processing time within the 10% "
                      "band; no shedding stays above it",
        },
    }
    results["notes"]["borg"] = (
        "Borg-A/Borg-B are generated instance_usage-shaped traces (the real ClusterData 2019 "
        "cannot be downloaded here): 48 machines per shard with lognormal activity that "
        "switches regime, type = machine id mod 4, one type mix per 30-minute segment; ω1 "
        "runs at ρ = 0.7, ω2 at ρ = 1.35 unshed."
    )
    per_event = [row["sojourn_over_bound_per_event_mean"]["global"] for row in table.values()]
    results["notes"]["per_event"] = (
        "per_event: an event's service is Σ_γ Bernoulli(r)·Exp(ptime), not exponential; its "
        "SCV exceeds 1 under probabilistic shedding, so the measured mean sojourn of the "
        f"global plan is {min(per_event):.2f}–{max(per_event):.2f}× B* on the Fig. 1 data "
        "sets: the M/M/1 bound holds for the M/M/1 load the LP assumes (mm1), not for this "
        "service mix."
    )
    assert abs(table["balanced"]["loss_local_vs_global"]) < 1e-9
    for name, row in table.items():
        assert row["loss_local_vs_global"] >= -1e-9
        for m in ("global", "local"):
            assert row["segments_within_tolerance_mm1"][m] == row["segments"], (name, m)
            assert row["p_over_target"][m]["max"] <= 1 + 1e-6
        assert row["p_over_target"]["none"]["mean"] > 1 + TOLERANCE
    assert min(table["Borg-A"]["loss_local_vs_global"],
               table["Borg-B"]["loss_local_vs_global"]) > 0


def test_quality_random_graphs(results: dict[str, Any]) -> None:
    rows = []
    for seed in range(5):
        inst = random_instance(200, 20, share=0.2, n_bottlenecks=2, n_operators=4,
                               or_share=0.2, rate_sigma=0.0, seed=seed)
        res = {m: plan(inst, m) for m in MODES}
        bottlenecks = [r.bottleneck for r in res["global"].rounds]
        worst = {
            m: max(_latency(inst, res[m], inst.op_index[b], seed=seed)["mm1"]
                   for b in bottlenecks)
            for m in MODES
        }
        rows.append({
            "seed": seed,
            "bottlenecks": bottlenecks,
            "binaries": sum(r.result.n_binaries for r in res["global"].rounds),
            "weighted_output": {m: r.state.weighted_output(inst) for m, r in res.items()},
            "bound_kept_model": {m: not r.state.violations(inst) for m, r in res.items()},
            "sojourn_over_bound_mm1_worst": worst,
        })
        out = rows[-1]["weighted_output"]
        assert out["global"] >= out["local"] * (1 - 1e-9)
        assert worst["global"] <= 1 + TOLERANCE and worst["local"] <= 1 + TOLERANCE
        assert worst["none"] > 1 + TOLERANCE
    results["random_graphs"] = {
        "instance": "200 types of equal rate, 20 queries, share 0.2, 4 layer-1 operators of "
                    "which 2 overloaded (ρ 1.2–1.5), 20% OR patterns (MILP), joins with partner "
                    "streams at 0.2–1.5× the unshed rate, sink weights U(0.5, 2)",
        "ours": rows,
        "gain_global_over_local_mean": statistics.mean(
            r["weighted_output"]["global"] / r["weighted_output"]["local"] - 1 for r in rows),
        "note": "no shedding keeps no bound (ρ ≥ 1), so its output within the bound is nil; "
                "its weighted_output is the throughput-limited rate of late events",
    }

