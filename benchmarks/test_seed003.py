"""Seed 003 (EDRP, Cardellini et al.): Table III and EDRP vs rEDRP solve times.

Table III: the one-hour numerical study of Section 7.2 on the 15-node network of
``configs/debs2015_edrp.yaml``. The source rate climbs linearly from 70 to 220 tuples/s over
30 minutes and back; EDRP is re-solved every simulated minute (t = 1..60) from the previous
deployment, starting from the t = 0 EDRP deployment with w_r = w_c = 0.5 and no downtime term.
We report the mean response time and cost over the 60 plans and the total downtime, for the
four weight configurations, next to the paper's figures. The same timelines are also run with
rEDRP. Solve times: every solve of both timelines, plus a size sweep over synthetic networks.

Run: ``.venv/bin/python -m pytest -m bench benchmarks/test_seed003.py -p no:cacheprovider``
(add ``-o log_cli=true --log-cli-level=INFO`` to follow progress); it takes hours on two
shared cores, mostly the 240 EDRP solves. Results: ``benchmarks/results/seed003.json``.
Each finished timeline and sweep row is saved at once with a hash of the code and inputs
that produced it; a rerun after an interruption reuses only entries with the same hash.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import pytest

from optimizers.edrp import WEIGHT_PRESETS, EdrpInputs, Limits, Weights, config_inputs, plan
from optimizers.edrp.multisets import as_multiset
from optimizers.edrp.space import build_space
from optimizers.graphs import farthest_node, resource_network, shortest_delays, waxman_network
from streamplan.config import AppConfig, load_config
from streamplan.plan import Decision
from streamplan.settings import REPO_ROOT

CONFIG = REPO_ROOT / "configs" / "debs2015_edrp.yaml"
RESULTS_FILE = REPO_ROOT / "benchmarks" / "results" / "seed003.json"
SOURCE = "data_source"
SINK = "global_rank"
log = logging.getLogger(__name__)

# seed 003, Table III (EDRP, 15 nodes): mean response time (ms), mean cost ($/h) and
# total downtime (s).
PAPER_TABLE_III = {
    "baseline": {"response_time_ms": 120.8, "cost_per_hour": 9.6, "downtime_s": 12.0},
    "balanced": {"response_time_ms": 121.7, "cost_per_hour": 9.9, "downtime_s": 2.4},
    "response_time": {"response_time_ms": 121.5, "cost_per_hour": 10.3, "downtime_s": 2.4},
    "cost": {"response_time_ms": 136.0, "cost_per_hour": 9.2, "downtime_s": 4.9},
}
# seed 003, Table IV, k = 2: variables (x10^3) and resolution time (s), EDRP / rEDRP (CPLEX).
PAPER_TABLE_IV_K2 = {
    8: {"vars_k": (9.4, 1.6), "time_s": (3.7, 0.8)},
    12: {"vars_k": (37.3, 2.8), "time_s": (30.5, 0.6)},
    16: {"vars_k": (103.2, 5.5), "time_s": (122.6, 1.1)},
    20: {"vars_k": (231.6, 8.8), "time_s": (415.2, 1.6)},
    24: {"vars_k": (453.3, 12.7), "time_s": (593.7, 3.1)},
}
TIME_LIMIT_S = float(os.environ.get("SEED003_TIME_LIMIT_S", "300"))
SWEEP_SIZES = [int(n) for n in os.environ.get("SEED003_SWEEP", "8,12,16,20,24").split(",")]
SWEEP_EDRP_MAX_N = int(os.environ.get("SEED003_SWEEP_EDRP_MAX_N", "16"))


def source_rate(minute: float) -> float:
    """70 → 220 tuples/s linearly over 30 min, then back to 70 at 60 min (Section 7.2)."""
    return 70.0 + 5.0 * min(minute, 60.0 - minute)


def chosen(decision: Decision) -> dict[str, tuple[str, ...]]:
    """A decision's placement as multisets."""
    return {
        op: as_multiset((r.node, r.replicas) for r in entries)
        for op, entries in decision.placement.items()
    }


def initial_deployment(cfg: AppConfig, limits: Limits) -> Decision:
    """The t = 0 deployment: EDRP with w_r = w_c = 0.5, no current deployment (no downtime)."""
    inputs = config_inputs(cfg, {SOURCE: source_rate(0)}, weights=Weights(0.5, 0.5, 0.0))
    return plan(inputs, limits=limits)


def timeline(
    cfg: AppConfig, weights: Weights, start: Decision, *, restricted: bool, limits: Limits
) -> dict[str, Any]:
    """Re-plan every minute t = 1..60 from the previous deployment; per-step record + summary."""
    current = chosen(start)
    steps = []
    for t in range(1, 61):
        inputs = config_inputs(cfg, {SOURCE: source_rate(t)}, current=current, weights=weights)
        d = plan(inputs, restricted=restricted, limits=limits)
        step: dict[str, Any] = {"t": t, "rate": source_rate(t), "status": d.solver.status}
        step.update(
            solve_s=round(d.solver.time_s, 3),
            build_s=round(d.solver.extra.get("build_s", 0.0), 3),
            gap=d.solver.gap,
            n_vars=d.solver.n_vars,
        )
        if d.feasible:
            current = chosen(d)
            step.update(
                response_time_ms=d.predicted.extra["response_time_ms"],
                cost_per_hour=d.predicted.cost_per_hour,
                cost_replicas_per_hour=d.predicted.extra["cost_replicas_per_hour"],
                downtime_s=d.predicted.downtime_s,
                replicas=int(d.predicted.extra["replicas"]),
                actions=d.solver.message.partition("; ")[2],
                placement={op: "+".join(ms) for op, ms in current.items()},
            )
        else:
            step["message"] = d.solver.message
        steps.append(step)
        log.info("%s %s t=%d %s %.1fs", "rEDRP" if restricted else "EDRP", weights, t,
                 d.solver.status, d.solver.time_s)
    ok = [s for s in steps if "response_time_ms" in s]
    solve_times = [s["solve_s"] + s["build_s"] for s in steps]
    return {
        "summary": {
            "response_time_ms": statistics.fmean(s["response_time_ms"] for s in ok),
            "cost_per_hour": statistics.fmean(s["cost_per_hour"] for s in ok),
            "cost_replicas_per_hour": statistics.fmean(s["cost_replicas_per_hour"] for s in ok),
            "downtime_s": sum(s["downtime_s"] for s in ok),
            "reconfigurations": sum(1 for s in ok if s["downtime_s"] > 0),
            "not_solved": len(steps) - len(ok),
            "not_optimal": sum(1 for s in steps if s["status"] != "optimal"),
            "max_replicas": max(s["replicas"] for s in ok),
            "final_replicas": ok[-1]["replicas"],
            "solve_s_mean": statistics.fmean(solve_times),
            "solve_s_max": max(solve_times),
            "first_scale_out_min": _first_scale_outs(ok),
        },
        "steps": steps,
    }


def _first_scale_outs(steps: list[dict[str, Any]]) -> dict[str, int]:
    first: dict[str, int] = {}
    for s in steps:
        for part in s["actions"].split(", "):
            op, _, kind = part.partition(" ")
            if kind == "scale-out" and op not in first:
                first[op] = s["t"]
    return first


# Why a figure can sit outside 10 % of the paper's (attached as "note" when it does).
WHY = {
    "response_time_ms": "R = operator latencies (same M/M/1 model and service rates) + network "
    "delay along the critical path; the network and the pins are our choice (deviations[0]), "
    "and the network part is at least the source-sink pin delay.",
    "cost_per_hour": "Replica cost only (deviations[2]); it differs by when operators are "
    "scaled out and in, which follows the unpublished edge rates (deviations[1]).",
    "downtime_s": "Total downtime = number of reconfigurations x ~0.8 s (a migration or "
    "scale-out to a node without the code: 0.25 + 0.035 + 0.01 + 0.5 s); see reconfigurations "
    "in the summary. With w_d = 0 many placements tie, so how often the baseline migrates "
    "depends on the solver's tie-breaking, not on the model.",
}


def compare(ours: dict[str, float], paper: dict[str, float]) -> dict[str, Any]:
    """Side by side with relative differences, the 10 % verdict and a note when outside."""
    rows: dict[str, Any] = {}
    for key, ref in paper.items():
        rel = (ours[key] - ref) / ref
        rows[key] = {
            "ours": round(ours[key], 3),
            "paper": ref,
            "rel_diff": round(rel, 3),
            "within_10pct": abs(rel) <= 0.10,
        }
        if abs(rel) > 0.10:
            rows[key]["note"] = WHY[key]
    return rows


def ranking(table: dict[str, dict[str, float]], key: str) -> list[str]:
    """Configurations from the lowest to the highest value of ``key``."""
    return sorted(table, key=lambda name: table[name][key])


def sized_config(cfg: AppConfig, n: int, seed: int) -> AppConfig:
    """The DEBS application on a Waxman network of n nodes (mean delay 32 ms): source pinned
    on n0, sink on the node farthest from it (digest §8, item 8)."""
    nodes, links = waxman_network(n, seed, 0.032)
    far = farthest_node(shortest_delays(resource_network(nodes, links)), nodes[0])
    params = dict(cfg.method.params)
    ops = {k: dict(v) for k, v in params["operators"].items()}
    ops[SOURCE]["pin"], ops[SINK]["pin"] = [nodes[0]], [far]
    params["operators"] = ops
    params["network"] = {
        **params["network"],
        "links": [{"src": u, "dst": v, "delay_ms": d * 1e3} for u, v, d in links],
    }
    node_type = cfg.node_types[0].name
    return cfg.model_copy(
        update={
            "nodes": [type(cfg.nodes[0])(name=u, type=node_type) for u in nodes],
            "method": cfg.method.model_copy(update={"params": params}),
        }
    )


def with_params(cfg: AppConfig, **changes: Any) -> AppConfig:
    """A copy of ``cfg`` with some method parameters replaced."""
    params = {**cfg.method.params, **changes}
    return cfg.model_copy(update={"method": cfg.method.model_copy(update={"params": params})})


def sweep_instance(cfg: AppConfig) -> EdrpInputs:
    """The t = 8 min instance (110 tuples/s, where partialRank must scale out) from U_0 = the
    t = 0 deployment (one replica per operator: EDRP with k = 1, w_r = w_c = 0.5), balanced
    weights. From U_0 the 220 tuples/s peak is out of rEDRP's one-move reach on some networks."""
    initial = plan(
        config_inputs(
            with_params(cfg, max_replicas=1), {SOURCE: source_rate(0)}, weights=Weights(0.5, 0.5, 0)
        ),
        limits=Limits(time_limit_s=TIME_LIMIT_S),
    )
    return config_inputs(
        cfg,
        {SOURCE: source_rate(8)},
        current=chosen(initial),
        weights=Weights(*WEIGHT_PRESETS["balanced"]),
    )


def table4_dag_vars(cfg: AppConfig) -> int:
    """EDRP variables before pruning on the DAG whose counts match Table IV (digest §6: the
    metronome also touches computeRouteID and partialRank), counted at 70 tuples/s."""
    dag10 = cfg.model_copy(
        update={
            "edges": [
                *cfg.edges,
                ("compute_route_id", "metronome"),
                ("metronome", "partial_rank"),
            ]
        }
    )
    space = build_space(config_inputs(dag10, {SOURCE: 70.0}), prune=False)
    return sum(map(len, space.choices.values())) + sum(map(len, space.links.values())) + 2


def code_version() -> str:
    """Hash of everything that determines the figures: optimizer sources, the config, the
    benchmark's run functions and the time limit."""
    h = hashlib.sha256()
    sources = sorted((REPO_ROOT / "optimizers" / "edrp").glob("*.py"))
    for path in [*sources, REPO_ROOT / "optimizers" / "graphs.py", CONFIG]:
        h.update(path.read_bytes())
    for fn in (source_rate, initial_deployment, timeline, sized_config, sweep_instance):
        h.update(inspect.getsource(fn).encode())
    h.update(f"{TIME_LIMIT_S}".encode())
    return h.hexdigest()[:16]


class Checkpoint:
    """Partial results saved after every unit of work, reused by a rerun of the same code."""

    def __init__(self, write_result: Callable[[str, dict[str, Any]], Any]) -> None:
        self.version = code_version()
        self.write = write_result
        saved: dict[str, Any] = {}
        if RESULTS_FILE.exists():
            saved = json.loads(RESULTS_FILE.read_text())
        fresh = saved.get("code_version") != self.version
        self.done: dict[str, Any] = {} if fresh else saved.get("partial", {})

    def get(self, key: str, compute: Callable[[], Any]) -> Any:
        """The saved value for ``key``, or compute, save and return it."""
        if key not in self.done:
            self.done[key] = compute()
            self.write("seed003", {"code_version": self.version, "partial": self.done})
        else:
            log.info("reusing %s from %s", key, RESULTS_FILE.name)
        return self.done[key]


# Inputs we had to choose where the paper is silent (details in configs/debs2015_edrp.yaml).
DEVIATIONS = [
    "Network: the paper's 15-node ANSNET portion is unpublished; ours is the Topology Zoo ANS "
    "network reduced to 15 metro areas, delays proportional to link length, mean 32 ms. The "
    "source is pinned in New York and globalRank on the farthest node (Los Angeles, 63.7 ms), "
    "so every plan pays at least 63.7 ms of network delay; the paper's pins are not given.",
    "Edge rates are not published: selectivity 1 along the chain, countByWindow x21 "
    "(calibrated so partialRank saturates near 105-110 tuples/s as the paper reports), "
    "partialRank 1/21, metronome ~1 tuple/s.",
    "Link cost C_(u,v) = 0 instead of Table II's 0.02 $/tps: read as $/h per tuple/s it makes "
    "every deployment with two partialRank replicas exceed C_max = 30 $/h under the calibrated "
    "rates, and Table III's 9.2-10.3 $/h leave no room for it (any New York -> Los Angeles "
    "stream costs >= 1.4 $/h at 70 tuples/s). Our cost is the replica cost, as Table III's "
    "figures imply (8 operators at 1 $/h plus extra replicas).",
    "Solver: SCIP 10 (y continuous, exact by constraints (19)-(21)) on 2 shared cores, not "
    "CPLEX 12.6.3 on 4 vCPU; absolute times are not comparable, scaling is.",
]


@pytest.mark.bench
@pytest.mark.timeout(6 * 3600)
def test_seed003_table3_and_solve_times(write_result) -> None:
    started = time.perf_counter()
    cfg = load_config(CONFIG)
    limits = Limits(time_limit_s=TIME_LIMIT_S)
    start = initial_deployment(cfg, limits)
    assert start.feasible, start.solver.message
    saved = Checkpoint(write_result)
    runs: dict[str, dict[str, Any]] = {"edrp": {}, "redrp": {}}
    for method in ("redrp", "edrp"):
        for name, w in WEIGHT_PRESETS.items():
            runs[method][name] = saved.get(
                f"{method}/{name}",
                lambda w=w, method=method: timeline(
                    cfg, Weights(*w), start, restricted=method == "redrp", limits=limits
                ),
            )
    ours = {name: run["summary"] for name, run in runs["edrp"].items()}
    table3 = {name: compare(ours[name], PAPER_TABLE_III[name]) for name in PAPER_TABLE_III}
    orderings = {
        key: {"ours": ranking(ours, key), "paper": ranking(PAPER_TABLE_III, key)}
        for key in ("response_time_ms", "cost_per_hour", "downtime_s")
    }
    sweep = [saved.get(f"sweep/{n}", lambda n=n: sweep_row(cfg, n)) for n in SWEEP_SIZES]
    write_result(
        "seed003",
        {
            "seed": "003",
            "code_version": saved.version,
            "time_limit_s": TIME_LIMIT_S,
            "deviations": DEVIATIONS,
            "initial_deployment": {
                "placement": {op: "+".join(ms) for op, ms in chosen(start).items()},
                "response_time_ms": start.predicted.extra["response_time_ms"],
            },
            "table3": table3,
            "table3_orderings": orderings,
            "table3_redrp": {n: r["summary"] for n, r in runs["redrp"].items()},
            "edrp_vs_redrp_timeline_solve_s": {
                n: {m: runs[m][n]["summary"]["solve_s_mean"] for m in runs}
                for n in WEIGHT_PRESETS
            },
            "solve_time_sweep_k2": sweep,
            "timelines": runs,
            "wall_s": round(time.perf_counter() - started, 1),
        },
    )

    # The paper's orderings that must hold (Section 7.2, Table III).
    assert max(ours, key=lambda n: ours[n]["response_time_ms"]) == "cost"
    assert min(ours, key=lambda n: ours[n]["cost_per_hour"]) == "cost"
    assert max(ours, key=lambda n: ours[n]["cost_per_hour"]) == "response_time"
    assert max(ours, key=lambda n: ours[n]["downtime_s"]) == "baseline"
    for row in sweep:  # same instance and U_0: rEDRP's optimum is never better than EDRP's
        if row["edrp"].get("status") == row["redrp"]["status"] == "optimal":
            assert row["redrp"]["objective"] >= row["edrp"]["objective"] - 1e-9


def sweep_row(cfg: AppConfig, n: int) -> dict[str, Any]:
    """Model size and solve time of EDRP and rEDRP (k = 2) on an n-node network."""
    sized = sized_config(cfg, n, seed=n)
    inputs = sweep_instance(sized)
    row: dict[str, Any] = {
        "n": n,
        "paper": PAPER_TABLE_IV_K2.get(n),
        "edrp_vars_table4_dag": table4_dag_vars(sized),
    }
    for method, restricted in (("edrp", False), ("redrp", True)):
        if method == "edrp" and n > SWEEP_EDRP_MAX_N:
            row[method] = {"status": "not attempted", "reason": f"n > {SWEEP_EDRP_MAX_N}"}
            continue
        d = plan(inputs, restricted=restricted, limits=Limits(time_limit_s=TIME_LIMIT_S))
        log.info("sweep n=%d %s %s %.1fs", n, method, d.solver.status, d.solver.time_s)
        row[method] = {
            "status": d.solver.status,
            "objective": d.solver.objective,
            "gap": d.solver.gap,
            "n_vars": d.solver.n_vars,
            "n_conss": d.solver.n_conss,
            "build_s": round(d.solver.extra.get("build_s", 0.0), 2),
            "solve_s": round(d.solver.time_s, 2),
        }
    return row
