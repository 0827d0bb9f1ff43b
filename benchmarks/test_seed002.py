"""Seed 002 (Hochreiner et al., BTU-aware provisioning): the paper's Tables 3–6 comparison.

For each arrival pattern (stepwise, two-level, random walks 1 and 2; 120 minutes each) the
threshold baseline runs once per repetition and is priced under BTU10/30/60 (its decisions
do not depend on the BTU, as in the paper), and the BTU-aware policy runs once per BTU
length. Per approach: resource cost, leased VMs, SLA compliance (real time, near real time,
relaxed; overall and per processing step) and total cost, mean and s over three seeds, next
to the paper's numbers, with the relative deviation and the paper's qualitative claims
checked one by one. A second test replays with the SCIP step MILP every sixth cycle and
reports the heuristic's cost gap to the optimum as a distribution; a third is the
``free_room: false`` ablation (Fig. 4 step 2 off).

Simulation: :mod:`optimizers.btu.sim` (exact per-item FCFS per operator type with a
changing server pool, 15 s monitoring chunks), not ``streamplan.simulation``, which starts
every interval empty; see that module's docstring. κ = 5 (digest §8.1), o_queue = the
time-average queue over the last 15 s monitoring window.

Run: ``.venv/bin/python -m pytest -m bench benchmarks/test_seed002.py -p no:cacheprovider``
(12-17 minutes on two shared cores). Results: ``benchmarks/results/seed002.json``; every
replay is also an MLflow run in the experiment ``streamplan-seed002-bench`` (tracking store
of ``streamplan.settings.load_settings()``).
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

from optimizers.btu.inputs import BtuParams
from optimizers.btu.replay import ExactSettings, ReplayResult, replay
from optimizers.btu.workload import (
    BTU_PRICES,
    KAPPA,
    PATTERNS,
    manufacturing_sim,
    manufacturing_types,
    paper_vm,
)
from streamplan.settings import REPO_ROOT, load_settings

pytestmark = pytest.mark.bench

RESULTS = REPO_ROOT / "benchmarks" / "results" / "seed002.json"
SEEDS = (0, 1, 2)
BTUS = (600, 1800, 3600)
LEVELS = ("rt", "nrt", "relaxed")
PENALTY = 0.0001
QUEUE_METRIC = "mean"
TOLERANCE = 0.15

# Paper Tables 3–6 (digest §7): compliance % (BTU10, BTU30, BTU60 | threshold), resource
# cost and totals (BTU-based 10/30/60 | threshold priced 10/30/60).
PAPER: dict[str, dict[str, Any]] = {
    "stepwise": {
        "compliance": {"btu": {"rt": (49, 52, 53), "nrt": (85, 90, 93), "relaxed": (89, 93, 95)},
                       "threshold": {"rt": 40, "nrt": 67, "relaxed": 71}},
        "resource": {"btu": (72.33, 92.00, 98.00), "threshold": (58.00, 79.00, 120.00)},
        "total": {"rt": ((158.91, 173.39, 174.69), (151.83, 172.83, 213.83)),
                  "nrt": ((96.85, 108.24, 108.88), (109.59, 130.59, 171.59)),
                  "relaxed": ((90.96, 103.03, 105.41), (102.97, 123.97, 164.97))},
    },
    "two_level": {
        "compliance": {"btu": {"rt": (48, 50, 55), "nrt": (84, 88, 93), "relaxed": (88, 91, 95)},
                       "threshold": {"rt": 40, "nrt": 68, "relaxed": 72}},
        "resource": {"btu": (82.33, 96.00, 104.00), "threshold": (66.00, 86.00, 122.00)},
        "total": {"rt": ((169.17, 177.62, 175.90), (157.88, 177.88, 213.88)),
                  "nrt": ((108.35, 155.43, 114.50), (114.62, 134.62, 170.62)),
                  "relaxed": ((102.37, 110.62, 111.73), (108.83, 128.83, 164.83))},
    },
    "random_walk_1": {
        "compliance": {"btu": {"rt": (49, 52, 54), "nrt": (85, 90, 93), "relaxed": (89, 93, 95)},
                       "threshold": {"rt": 39, "nrt": 66, "relaxed": 71}},
        "resource": {"btu": (69.33, 95.00, 110.00), "threshold": (61.33, 86.00, 128.00)},
        "total": {"rt": ((158.19, 176.94, 185.95), (158.68, 183.35, 225.35)),
                  "nrt": ((94.44, 111.43, 121.61), (115.55, 140.22, 182.22)),
                  "relaxed": ((88.11, 106.67, 117.91), (107.54, 132.21, 174.21))},
    },
    "random_walk_2": {
        "compliance": {"btu": {"rt": (49, 51, 53), "nrt": (87, 90, 92), "relaxed": (90, 94, 95)},
                       "threshold": {"rt": 41, "nrt": 70, "relaxed": 75}},
        "resource": {"btu": (74.00, 90.00, 106.00), "threshold": (59.67, 82.00, 118.00)},
        "total": {"rt": ((172.67, 184.03, 195.73), (164.18, 187.41, 223.41)),
                  "nrt": ((100.17, 108.91, 120.59), (113.41, 135.98, 171.98)),
                  "relaxed": ((92.67, 101.96, 115.67), (104.43, 127.19, 163.19))},
    },
}
SUSPECT = {("two_level", "nrt", "btu", 1800): "paper prints 155.43, probably 115.43 (digest §8.13)"}

NOTES = {
    "simulation": (
        "optimizers.btu.sim, not streamplan.simulation: the project simulator starts every "
        "interval empty with a fixed placement, while seed 002's policies act every 60 s on "
        "queues that carry over (a backlog is the scale-up signal) and on instances that "
        "start 5-10 s after the decision. The package simulator keeps one FCFS queue per "
        "operator type served by a changing set of servers, dispatches items exactly (heap "
        "of server free times) in 15 s chunks, and runs a 120-minute pattern (about 1.7 M "
        "item-hops, 120 decisions) in 3-5 s."
    ),
    "calibration": (
        "kappa = 5 (digest §8.1) and o_queue = time-average of waiting items over the last "
        "15 s window. Both were checked on the threshold baseline only (its stepwise "
        "resource cost is 59/80/112 vs the paper's 58/79/120); nothing was tuned on the "
        "BTU-aware policy, whose results are what is being tested."
    ),
    "claims_hold": (
        "1 (BTU-aware compliance beats the threshold at every level, BTU and pattern: "
        "+13 to +37 pp), 2 (non-decreasing in the BTU, but trivially: in 3 of 4 patterns the "
        "BTU10/30/60 runs are identical, see below), 3a (BTU60 resource cost below the "
        "threshold's), 4a (NRT and relaxed totals lower everywhere), 5a (threshold cost "
        "climbs with the BTU: early releases waste paid time), 5b (the BTU-aware cost "
        "climbs less). Headline stepwise NRT at BTU60: 79.48 vs 190.46 (-58 %) against the "
        "paper's 108.88 vs 171.59 (-36.5 %): same direction, larger margin."
    ),
    "claims_fail": (
        "3b (BTU10/BTU30 resource cost above the threshold's), 4b (RT total at BTU10 above "
        "the threshold's) and 6 (scaling activity falls with the BTU; holds only in random "
        "walk 2). One mechanism explains all three: Fig. 4 step 2. Once the leased VMs are "
        "full, an up-trigger first drops an instance of a type with U > 0, and any type "
        "whose queue is empty has U = 1 + inst + QL(100) - delay - scal > 0, so in this "
        "simulation the policy trades instances between types instead of leasing. The VMs "
        "stay full, Fig. 5's migration simulation never fits, every VM is renewed at each "
        "BTU end, and the run keeps the 4-5 VMs it leased during the initial ramp (which "
        "happens while every type has a backlog and so U < 0). Resource cost is therefore "
        "4-5 VMs x run length at every BTU, below the threshold's even at BTU10, and the "
        "three BTU runs barely differ. The paper's BTU-aware runs pay 72-110 (about 6-9 "
        "VMs), i.e. its VMs had slack that let releases succeed at BTU10 and leases follow "
        "(its Fig. 8 narrative), which our model of the queues does not produce. The "
        "ablation with step 2 off (ablation_free_room_off) restores the BTU dependence of "
        "scaling activity (claim 6 in 3 of 4 patterns) but still not 3b."
    ),
    "beyond_15pct": (
        "BTU-aware resource cost -31 to -56 % (all 12 cells) and hence its totals -8 to "
        "-47 %: the VM count above. Threshold RT compliance -22 to -37 % (relative; 8-15 pp), "
        "NRT/relaxed down to -28 % in stepwise and two-level: every run starts with one "
        "instance per type (digest §8.12), a 15-20 minute backlog of up to ~40 k items hits "
        "both approaches, and the baseline's 'queue < 1 -> remove one' every minute keeps "
        "operators near saturation; with exponential service no more than 63 % of items can "
        "meet o_slo even unloaded (kappa = 5), so RT compliance is capped for both. Threshold "
        "totals +18 to +37 % in stepwise/two-level follow from its lower compliance (more "
        "penalties); its resource cost -22 to -30 % in the random walks: the paper's two "
        "walks are not published and ours (Eq. 6, seeds rejection-sampled to stay in [1, 8], "
        "seeds in the results) are different walks. BTU-aware compliance is within 15 % "
        "everywhere except RT in three BTU60 cells (-18 to -20 %), again because its BTU60 "
        "run equals its BTU10 run."
    ),
    "step_gap": (
        "The heuristic is never below the proven optimum. A zero gap on ~40 % of steps "
        "(steady load, nothing to change); otherwise the optimum meets the whole "
        "predicted requirement n_o at once and drops surplus instances for free, while the "
        "policy adds at most one instance per type per cycle and renews full VMs in their "
        "window; the largest gaps are during ramps (shortfall penalty) and at BTU ends "
        "where the optimum repacks onto fewer VMs."
    ),
}


@pytest.fixture(scope="module")
def results() -> Iterator[dict[str, Any]]:
    """Collected by the tests below and merged into ``seed002.json`` at the end."""
    out: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    out.update({
        "seed": "002",
        "benchmark": "seed002",
        "command": "make bench (.venv/bin/python -m pytest -m bench benchmarks/test_seed002.py"
                   " -p no:cacheprovider)",
        "machine": {
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "cpu_count": os.cpu_count(),
            "load_avg_1m_at_start": round(os.getloadavg()[0], 2),
        },
        "solver": f"SCIP {pyscipopt.Model().version()} / PySCIPOpt {pyscipopt.__version__}",
        "setting": {
            "simulation": "optimizers.btu.sim: exact per-item FCFS per operator type (shared "
                          "queue, c = instances), exponential service b = o_slo/kappa plus a "
                          "fixed hop o_slo - b, Poisson sources, 15 s monitoring chunks, "
                          "decisions every 60 s, instance start 5 s cached / 10 s uncached, "
                          "VM start 45 s, one instance per type ready at t = 0",
            "kappa": KAPPA,
            "o_queue": "time-average of waiting items over the last 15 s window",
            "minutes_per_pattern": 120,
            "seeds": list(SEEDS),
            "penalty_per_item": PENALTY,
            "btu_prices": {str(k): v for k, v in BTU_PRICES.items()},
            "params": {k: v for k, v in vars(BtuParams()).items()},
        },
        "notes": NOTES,
    })
    yield out
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2, allow_nan=False) + "\n")


# --- helpers ---------------------------------------------------------------------------------
def _mlflow():
    import mlflow
    from mlflow.tracking import MlflowClient

    settings = load_settings()
    settings.home.mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(settings.tracking_uri)
    client = MlflowClient(settings.tracking_uri)
    name = "streamplan-seed002-bench"
    exp = client.get_experiment_by_name(name)
    exp_id = exp.experiment_id if exp else client.create_experiment(
        name, artifact_location=settings.artifact_root if settings.mlflow_tracking_uri is None
        else None)
    return client, exp_id


def _log_run(client, exp_id: str, run: ReplayResult, approach: str, seed: int,
             pricing: dict[int, dict[str, Any]]) -> None:
    """One MLflow run per simulated run: params, cost and compliance per pricing."""
    r = client.create_run(exp_id, run_name=f"{run.pattern}-{approach}-seed{seed}",
                          tags={"streamplan.seed": "002", "pattern": run.pattern,
                                "approach": approach})
    rid = r.info.run_id
    params = {"policy": run.policy, "pattern": run.pattern, "btu_s": run.btu_s, "seed": seed,
              "kappa": KAPPA, "queue_metric": QUEUE_METRIC, "penalty": PENALTY,
              **{f"param.{k}": v for k, v in vars(BtuParams()).items()}}
    for k, v in params.items():
        client.log_param(rid, k, str(v)[:500])
    metrics = {"wall_s": run.wall_s, "leftover_items": run.leftover_items}
    for btu, s in pricing.items():
        p = f"btu{btu // 60}."
        metrics[p + "resource_cost"] = s["resource_cost"]
        metrics[p + "leased_vms"] = s["leased_vms"]
        metrics[p + "paid_btus"] = s["leasing"]["paid_btus"]
        metrics[p + "prolongations"] = s["leasing"]["prolongations"]
        metrics[p + "early_releases"] = s["leasing"]["early_releases"]
        for lv in LEVELS:
            metrics[p + f"total_{lv}"] = s["total_cost"][lv]
            metrics[f"compliance_{lv}"] = s["compliance"][lv]
    for k, v in run.actions.items():
        metrics[f"actions.{k}"] = v
    for k, v in metrics.items():
        client.log_metric(rid, k, float(v))
    for row in run.timeline[::5]:
        client.log_metric(rid, "vms", row["vms"], step=int(row["t_s"]))
        client.log_metric(rid, "instances", row["instances"], step=int(row["t_s"]))
    client.set_terminated(rid)


def _ms(values: list[float]) -> dict[str, float]:
    return {"mean": statistics.fmean(values),
            "s": statistics.stdev(values) if len(values) > 1 else 0.0}


def _dev(ours: float, paper: float) -> float:
    return (ours - paper) / paper


def _run_pattern(name: str, params: BtuParams, client=None, exp_id=None) -> dict[str, Any]:
    types, spec = manufacturing_types(KAPPA), manufacturing_sim(KAPPA)
    pattern = PATTERNS[name]()
    runs: dict[str, list[dict[str, Any]]] = {"threshold": [], **{f"btu{b // 60}": [] for b in BTUS}}
    for seed in SEEDS:
        thr = replay("threshold", pattern, types, paper_vm(600), spec, params, seed=seed,
                     queue_metric=QUEUE_METRIC)
        pricing = {b: thr.summary(b, BTU_PRICES[b], PENALTY) for b in BTUS}
        runs["threshold"].append({"pricing": pricing, "wall_s": thr.wall_s})
        if client is not None:
            _log_run(client, exp_id, thr, "threshold", seed, pricing)
        for b in BTUS:
            run = replay("btu", pattern, types, paper_vm(b), spec, params, seed=seed,
                         queue_metric=QUEUE_METRIC)
            s = run.summary(b, BTU_PRICES[b], PENALTY)
            runs[f"btu{b // 60}"].append({"pricing": {b: s}, "wall_s": run.wall_s})
            if client is not None:
                _log_run(client, exp_id, run, f"btu{b // 60}", seed, {b: s})
    return {"pattern": pattern, "runs": runs}


def _aggregate(name: str, data: dict[str, Any]) -> dict[str, Any]:
    """Mean and s over seeds, next to the paper, with deviations."""
    runs = data["runs"]
    paper = PAPER[name]
    out: dict[str, Any] = {"levels": list(data["pattern"].levels),
                           "step_s": data["pattern"].step_s,
                           "random_walk_seed": data["pattern"].seed}
    approaches: dict[str, Any] = {}
    for k, b in enumerate(BTUS):
        key = f"btu{b // 60}"
        rs = [r["pricing"][b] for r in runs[key]]
        approaches[key] = _approach(rs, paper["compliance"]["btu"], k,
                                    paper["resource"]["btu"][k],
                                    {lv: paper["total"][lv][0][k] for lv in LEVELS}, name, b,
                                    "btu")
    thr: dict[str, Any] = {}
    for k, b in enumerate(BTUS):
        rs = [r["pricing"][b] for r in runs["threshold"]]
        thr[f"priced_btu{b // 60}"] = _approach(
            rs, {lv: (paper["compliance"]["threshold"][lv],) * 3 for lv in LEVELS}, k,
            paper["resource"]["threshold"][k],
            {lv: paper["total"][lv][1][k] for lv in LEVELS}, name, b, "threshold")
    approaches["threshold"] = thr
    out["approaches"] = approaches
    out["wall_s_per_run"] = statistics.fmean(
        r["wall_s"] for rs in runs.values() for r in rs)
    return out


def _approach(rs, paper_comp, k, paper_res, paper_tot, pattern, btu, kind) -> dict[str, Any]:
    comp = {lv: _ms([100 * r["compliance"][lv] for r in rs]) for lv in LEVELS}
    res = _ms([r["resource_cost"] for r in rs])
    tot = {lv: _ms([r["total_cost"][lv] for r in rs]) for lv in LEVELS}
    by_op: dict[str, dict[str, float]] = {}
    for op in rs[0]["compliance_by_operator"]:
        by_op[op] = {lv: round(100 * statistics.fmean(
            r["compliance_by_operator"][op][lv] for r in rs), 1) for lv in LEVELS}
    deviations = {"resource_cost": _dev(res["mean"], paper_res)}
    for lv in LEVELS:
        deviations[f"total_{lv}"] = _dev(tot[lv]["mean"], paper_tot[lv])
        deviations[f"compliance_{lv}"] = _dev(comp[lv]["mean"], paper_comp[lv][k])
    flagged = sorted(m for m, d in deviations.items() if abs(d) > TOLERANCE)
    suspect = {m for m in flagged for lv in LEVELS
               if m == f"total_{lv}" and (pattern, lv, kind, btu) in SUSPECT}
    return {
        "compliance_pct": comp,
        "paper_compliance_pct": {lv: paper_comp[lv][k] for lv in LEVELS},
        "compliance_by_operator_pct": by_op,
        "resource_cost": res,
        "paper_resource_cost": paper_res,
        "total_cost": tot,
        "paper_total_cost": paper_tot,
        "leased_vms": _ms([r["leased_vms"] for r in rs]),
        "paid_btus": _ms([r["leasing"]["paid_btus"] for r in rs]),
        "early_releases": _ms([r["leasing"]["early_releases"] for r in rs]),
        "vms_mean": _ms([r["vms_mean"] for r in rs]),
        "instances_mean": _ms([r["instances_mean"] for r in rs]),
        "scaling_actions": _ms([sum(v for a, v in r["actions"].items()
                                    if a in ("up", "down", "migrate")) for r in rs]),
        "items": _ms([r["items"] for r in rs]),
        "relative_deviation": {m: round(d, 3) for m, d in deviations.items()},
        "beyond_15pct": flagged,
        "paper_cell_suspect": sorted(suspect),
    }


def _claims(patterns: dict[str, Any]) -> dict[str, Any]:
    """The paper's qualitative claims (digest §7), each with its verdict per pattern."""
    out: dict[str, Any] = {}

    def btu(p, k):
        return patterns[p]["approaches"][f"btu{BTUS[k] // 60}"]

    def thr(p, k):
        return patterns[p]["approaches"]["threshold"][f"priced_btu{BTUS[k] // 60}"]

    c1, c2, c3a, c3b, c4a, c4b, c5a, c5b, c6 = ({} for _ in range(9))
    for p in patterns:
        c1[p] = all(btu(p, k)["compliance_pct"][lv]["mean"] > thr(p, 0)["compliance_pct"][lv]
                    ["mean"] for k in range(3) for lv in LEVELS)
        c2[p] = all(btu(p, k)["compliance_pct"][lv]["mean"]
                    <= btu(p, k + 1)["compliance_pct"][lv]["mean"] + 0.5
                    for k in range(2) for lv in LEVELS)
        c3a[p] = btu(p, 2)["resource_cost"]["mean"] < thr(p, 2)["resource_cost"]["mean"]
        c3b[p] = all(btu(p, k)["resource_cost"]["mean"] > thr(p, k)["resource_cost"]["mean"]
                     for k in (0, 1))
        c4a[p] = all(btu(p, k)["total_cost"][lv]["mean"] < thr(p, k)["total_cost"][lv]["mean"]
                     for k in range(3) for lv in ("nrt", "relaxed"))
        c4b[p] = btu(p, 0)["total_cost"]["rt"]["mean"] > thr(p, 0)["total_cost"]["rt"]["mean"]
        r_thr = [thr(p, k)["resource_cost"]["mean"] for k in range(3)]
        r_btu = [btu(p, k)["resource_cost"]["mean"] for k in range(3)]
        c5a[p] = r_thr[0] < r_thr[1] < r_thr[2]
        c5b[p] = (r_btu[2] - r_btu[0]) < (r_thr[2] - r_thr[0])
        acts = [btu(p, k)["scaling_actions"]["mean"] for k in range(3)]
        c6[p] = acts[0] >= acts[1] >= acts[2] and acts[0] > acts[2]
    out["1_btu_compliance_beats_threshold_everywhere"] = c1
    out["2_btu_compliance_non_decreasing_in_btu"] = c2
    out["3a_btu60_resource_cost_below_threshold"] = c3a
    out["3b_btu10_and_btu30_resource_cost_above_threshold"] = c3b
    out["4a_nrt_and_relaxed_totals_lower_for_btu"] = c4a
    out["4b_rt_total_btu10_above_threshold (paper: 3 of 4 patterns)"] = c4b
    out["5a_threshold_cost_climbs_with_btu"] = c5a
    out["5b_btu_cost_climbs_less_than_threshold"] = c5b
    out["6_scaling_activity_falls_with_btu_length"] = c6
    headline = patterns["stepwise"]["approaches"]
    ours = headline["btu60"]["total_cost"]["nrt"]["mean"]
    theirs = headline["threshold"]["priced_btu60"]["total_cost"]["nrt"]["mean"]
    out["headline_stepwise_nrt_btu60"] = {
        "ours": [round(ours, 2), round(theirs, 2)], "paper": [108.88, 171.59],
        "reduction_ours": round(1 - ours / theirs, 3), "reduction_paper": 0.365,
    }
    best_cost = max(1 - btu(p, k)["total_cost"][lv]["mean"] / thr(p, k)["total_cost"][lv]["mean"]
                    for p in patterns for k in range(3) for lv in LEVELS)
    best_comp = max(btu(p, k)["compliance_pct"][lv]["mean"] - thr(p, 0)["compliance_pct"][lv]
                    ["mean"] for p in patterns for k in range(3) for lv in LEVELS)
    out["up_to"] = {"cost_reduction_ours": round(best_cost, 3), "paper": 0.36,
                    "compliance_gain_pp_ours": round(best_comp, 1), "paper_pp": "25 (27 in T5)"}
    return out


# --- the benchmarks --------------------------------------------------------------------------
def test_seed002_comparison(results: dict[str, Any]) -> None:
    """Tables 3–6: every pattern × approach, three seeds, logged to MLflow."""
    t0 = time.perf_counter()
    client, exp_id = _mlflow()
    patterns = {}
    for name in PATTERNS:
        patterns[name] = _aggregate(name, _run_pattern(name, BtuParams(), client, exp_id))
    results["comparison"] = patterns
    results["claims"] = _claims(patterns)
    results["comparison_wall_s"] = round(time.perf_counter() - t0, 1)
    claims = results["claims"]
    # the claims the replay must reproduce (the others are reported, see the notes)
    assert all(claims["1_btu_compliance_beats_threshold_everywhere"].values())
    assert all(claims["4a_nrt_and_relaxed_totals_lower_for_btu"].values())
    assert all(claims["3a_btu60_resource_cost_below_threshold"].values())
    assert all(claims["5a_threshold_cost_climbs_with_btu"].values())


def test_seed002_free_room_ablation(results: dict[str, Any]) -> None:
    """Fig. 4 step 2 off: the policy leases instead of dropping an instance of a type with
    positive utility (sensitivity of the VM count to that rule)."""
    patterns = {}
    for name in PATTERNS:
        patterns[name] = _aggregate(name, _run_pattern(name, BtuParams(free_room=False)))
    results["ablation_free_room_off"] = {
        "comparison": {p: {k: {"compliance_pct": v["compliance_pct"],
                               "resource_cost": v["resource_cost"],
                               "total_cost": v["total_cost"],
                               "vms_mean": v["vms_mean"],
                               "leased_vms": v["leased_vms"],
                               "scaling_actions": v["scaling_actions"]}
                           for k, v in d["approaches"].items() if k != "threshold"}
                       for p, d in patterns.items()},
        "claims": _claims(patterns),
    }


def test_seed002_step_gap_to_scip(results: dict[str, Any]) -> None:
    """The heuristic's cost gap to the step MILP optimum, every sixth cycle of seed 0."""
    types, spec = manufacturing_types(KAPPA), manufacturing_sim(KAPPA)
    exact = ExactSettings(every=6, rho_max=0.8, drain_s=300.0, time_limit_s=5.0)
    per: dict[str, Any] = {}
    gaps_all: list[float] = []
    rel_all: list[float] = []
    proven: list[float] = []
    for name in PATTERNS:
        pattern = PATTERNS[name]()
        for b in BTUS:
            run = replay("btu", pattern, types, paper_vm(b), spec, BtuParams(), seed=0,
                         queue_metric=QUEUE_METRIC, exact=exact)
            g = [s["gap_abs"] for s in run.step_gaps if "gap_abs" in s]
            rel = [s["gap_rel"] for s in run.step_gaps if s.get("optimum", 0) >= 0.05]
            gaps_all += g
            proven += [s["gap_abs"] for s in run.step_gaps if s.get("optimal")]
            rel_all += rel
            per[f"{name}/btu{b // 60}"] = {
                "steps": len(run.step_gaps),
                "optimal": int(sum(s.get("optimal", 0) for s in run.step_gaps)),
                "gap_abs_quantiles": _quantiles(g),
                "heuristic_mean": statistics.fmean(s["heuristic"] for s in run.step_gaps),
                "optimum_mean": statistics.fmean(s.get("optimum", 0) for s in run.step_gaps),
                "solve_s_mean": statistics.fmean(s.get("solve_s", 0) for s in run.step_gaps),
                "solve_s_max": max(s.get("solve_s", 0) for s in run.step_gaps),
            }
    results["step_gap"] = {
        "definition": "per replanning step (horizon 60 s): heuristic = the BTU policy's "
                      "resulting deployment priced by the step MILP objective (renewals + "
                      "leases + P·delta_o·shortfall + epsilon moves); optimum = SCIP on the "
                      "same instance with n_o = ceil((lambda_o + q_o/300 s)·b_o/0.8) and "
                      "delta_o = (lambda_o·60 s + q_o)/n_o; gap_rel only where the optimum "
                      ">= 0.05 cost units",
        "settings": vars(exact),
        "all": {"steps": len(gaps_all), "gap_abs_quantiles": _quantiles(gaps_all),
                "gap_rel_quantiles": _quantiles(rel_all), "share_zero_gap": round(
                    sum(1 for g in gaps_all if abs(g) < 1e-6) / max(len(gaps_all), 1), 3)},
        "per_run": per,
    }
    assert min(proven) >= -1e-6  # where SCIP proved optimality the heuristic is never better


def _quantiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    q = np.percentile(values, [0, 10, 25, 50, 75, 90, 100])
    return {k: round(float(v), 4) for k, v in zip(
        ("min", "p10", "p25", "median", "p75", "p90", "max"), q, strict=True)} | {
        "mean": round(float(np.mean(values)), 4)}
