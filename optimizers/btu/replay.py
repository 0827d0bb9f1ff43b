"""Replay a policy over an arrival pattern: monitor every 15 s, decide every 60 s, bill.

The loop (digest §4, §8.12): at t = 0 one instance per type is placed by Alg. 2 on fresh
VMs (the first BTU paid, serving from t = 0); every monitoring chunk the simulator
(:mod:`~optimizers.btu.sim`) advances and each operator's o_d and o_queue are recorded;
every provisioning cycle the policy (``btu`` or ``threshold``) turns the last observations
into actions, which start or stop servers in the simulator (a new instance serves 5 s
(image cached) or 10 s later, on a new VM 45 s + 10 s later; a migrated instance keeps
serving on its old VM until its replacement is up). At the end every started BTU is paid.

Optionally every ``exact_every``-th cycle the step MILP (:mod:`~optimizers.btu.milp`) is
solved on the deployment the policy saw, and the policy's own result is priced under the
same objective: that gives the heuristic's cost gap per step.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .cost import LEVELS, Leasing, SlaCounts, leasing, totals
from .inputs import BtuInputError, BtuParams, OperatorType, VmType
from .milp import (
    demand,
    instance_from_cluster,
    solution_from_cluster,
    solve_step,
    step_cost,
)
from .policy import btu_step, upscale
from .sim import SimOperator, SimSource, StreamSim
from .state import Action, Cluster, Observation
from .threshold import threshold_step
from .workload import Pattern

__all__ = ["POLICIES", "ExactSettings", "ReplayResult", "replay"]

POLICIES = {"btu": btu_step, "threshold": threshold_step}


@dataclass(frozen=True)
class ExactSettings:
    """How the per-step SCIP comparison builds its requirement n_o (see ``milp.demand``)."""

    every: int = 1
    rho_max: float = 0.8
    drain_s: float = 300.0
    time_limit_s: float = 10.0


@dataclass
class ReplayResult:
    """Everything a replay measured."""

    policy: str
    pattern: str
    btu_s: float
    duration_s: float
    lifetimes: list[tuple[float, float]]
    still_running: list[bool]
    sla: SlaCounts
    actions: dict[str, int]
    timeline: list[dict[str, float]]
    step_gaps: list[dict[str, float]] = field(default_factory=list)
    trace: list[dict[str, Any]] = field(default_factory=list)
    wall_s: float = 0.0
    leftover_items: int = 0
    windows: list[dict[str, Any]] = field(default_factory=list)

    def leasing(self, btu_s: float | None = None, price: float | None = None) -> Leasing:
        """Leasing figures under a pricing (default: the run's own BTU and price)."""
        from .workload import BTU_PRICES

        b = self.btu_s if btu_s is None else btu_s
        p = BTU_PRICES.get(b, 0.0) if price is None else price
        return leasing(self.lifetimes, b, p, still_running=self.still_running)

    def summary(self, btu_s: float, price: float, penalty: float) -> dict[str, Any]:
        """Cost, compliance and activity figures under one pricing."""
        lease = self.leasing(btu_s, price)
        tot = totals(lease.cost, self.sla, penalty)
        vms = [row["vms"] for row in self.timeline]
        inst = [row["instances"] for row in self.timeline]
        return {
            "resource_cost": lease.cost,
            "total_cost": tot,
            "penalty": {lv: tot[lv] - lease.cost for lv in LEVELS},
            "compliance": {lv: self.sla.compliance(lv) for lv in LEVELS},
            "compliance_by_operator": self.sla.compliance_by_operator(),
            "items": self.sla.total_items(),
            "delayed": {lv: self.sla.total_delayed(lv) for lv in LEVELS},
            "leasing": lease.as_dict(),
            "leased_vms": lease.leases,
            "vms_mean": sum(vms) / len(vms) if vms else 0.0,
            "vms_max": max(vms, default=0),
            "instances_mean": sum(inst) / len(inst) if inst else 0.0,
            "instances_max": max(inst, default=0),
            "actions": dict(self.actions),
            "leftover_items": self.leftover_items,
        }


def _initial(cluster: Cluster, params: BtuParams, sim: StreamSim) -> None:
    """One instance per type by Alg. 2 on fresh VMs, serving from t = 0."""
    quiet = {o: Observation(0.0, 0.0) for o in cluster.types}
    warm = dataclasses.replace(params, vm_start_s=0.0, instance_start_cached_s=0.0,
                        instance_start_uncached_s=0.0)
    for o in cluster.types:
        for a in upscale(cluster, o, 0.0, quiet, warm):
            if a.kind == "up":
                sim.add_server(a.op, 0.0)
    cluster.scaling_actions.clear()


def _apply(sim: StreamSim, actions: list[Action], counts: dict[str, int]) -> None:
    for a in actions:
        counts[a.kind] = counts.get(a.kind, 0) + 1
        if a.kind == "up":
            sim.add_server(a.op, a.ready_at)
        elif a.kind == "down":
            sim.remove_server(a.op)
        elif a.kind == "migrate":
            sim.add_server(a.op, a.ready_at)
            sim.remove_server(a.op, at=a.ready_at)


def replay(
    policy: str,
    pattern: Pattern,
    types: Mapping[str, OperatorType],
    vm: VmType,
    sim_spec: tuple[list[SimOperator], list[SimSource]],
    params: BtuParams | None = None,
    *,
    seed: int = 0,
    duration_s: float | None = None,
    exact: ExactSettings | None = None,
    keep_trace: bool = False,
    queue_metric: str = "end",
    record_telemetry: bool = False,
) -> ReplayResult:
    """Run ``policy`` (``btu`` or ``threshold``) over ``pattern`` and bill the VMs.

    ``queue_metric``: o_queue is the queue at the decision instant (``end``) or its
    time-average over the last monitoring window (``mean``). ``record_telemetry`` keeps
    per-window operator figures and the deployment for :func:`~optimizers.btu.telemetry.
    telemetry_records`.
    """
    if queue_metric not in ("end", "mean"):
        raise BtuInputError(f"queue_metric must be 'end' or 'mean', got {queue_metric!r}")
    params = BtuParams() if params is None else params
    if policy not in POLICIES:
        raise BtuInputError(f"policy must be one of {sorted(POLICIES)}, got {policy!r}")
    params.check_interval(vm.btu_s)
    step = POLICIES[policy]
    wall0 = time.perf_counter()
    ops, sources = sim_spec
    unknown = sorted({o.name for o in ops} ^ set(types))
    if unknown:
        raise BtuInputError(f"simulator and topology disagree on operators {unknown}")
    sim = StreamSim(ops, sources, seed=seed)
    cluster = Cluster(dict(types), vm)
    _initial(cluster, params, sim)
    duration = pattern.duration_s if duration_s is None else duration_s
    chunk = params.monitor_s
    per_cycle = round(params.cycle_s / chunk)
    if not math.isclose(per_cycle * chunk, params.cycle_s):
        raise BtuInputError(
            f"cycle_s ({params.cycle_s}) must be a multiple of monitor_s ({chunk})"
        )
    history: dict[str, list[float]] = {o: [] for o in types}
    arrivals: dict[str, list[int]] = {o: [] for o in types}
    queue = dict.fromkeys(types, 0.0)
    counts: dict[str, int] = {}
    timeline: list[dict[str, float]] = []
    gaps: list[dict[str, float]] = []
    windows: list[dict[str, Any]] = []
    trace: list[dict[str, Any]] | None = [] if keep_trace else None
    nominal = {o.name: (o.service_mean_s + o.hop_s) * 1000 for o in ops}
    service = {o.name: o.service_mean_s for o in ops}
    n_chunks = int(round(duration / chunk))
    for k in range(1, n_chunks + 1):
        t = k * chunk
        load = pattern.at(t - chunk)
        stats = sim.run(t, load)
        if record_telemetry:
            windows.append({
                "t_s": t,
                "window_s": chunk,
                "operators": {o: (s.arrivals, s.emitted, s.service_ms_sum, s.queue)
                              for o, s in stats.items()},
                "placement": cluster.placement(),
                "leased_at": {h.name: h.leased_at for h in cluster.hosts.values()},
            })
        for o, s in stats.items():
            history[o].append(s.mean_sojourn_ms(nominal[o]))
            arrivals[o].append(s.arrivals)
            queue[o] = float(s.queue_mean if queue_metric == "mean" else s.queue)
        if k % per_cycle or k == n_chunks:
            continue
        obs = {
            o: Observation(history[o][-1], queue[o], tuple(history[o][-params.regression_n:]))
            for o in types
        }
        inst = None
        if exact is not None and (k // per_cycle) % exact.every == 0:
            rate = {o: sum(arrivals[o][-per_cycle:]) / params.cycle_s for o in types}
            need = {o: demand(rate[o], queue[o], service[o], drain_s=exact.drain_s,
                              rho_max=exact.rho_max) for o in types}
            delta = {o: (rate[o] * params.cycle_s + queue[o]) / need[o] for o in types}
            inst = instance_from_cluster(cluster, t, demand_by_op=need, delay_per_missing=delta,
                                         penalty=params.penalty, horizon_s=params.cycle_s)
        actions = step(cluster, t, obs, params, trace=trace)
        if inst is not None:
            gaps.append(_gap(inst, cluster, t, exact))
        _apply(sim, actions, counts)
        cluster.check()
        timeline.append({
            "t_s": t,
            "machines": float(load),
            "vms": float(len(cluster.hosts)),
            "instances": float(sum(h.count() for h in cluster.hosts.values())),
            "queue": float(sum(queue.values())),
        })
    leftover = sum(sim.backlog().values())
    sla = sim.finish()
    spans, alive = [], []
    for host, start, end in cluster.billing(duration):
        spans.append((start, end))
        alive.append(host.name in cluster.hosts)
    return ReplayResult(
        policy=policy,
        pattern=pattern.name,
        btu_s=vm.btu_s,
        duration_s=duration,
        lifetimes=spans,
        still_running=alive,
        sla=sla,
        actions=counts,
        timeline=timeline,
        step_gaps=gaps,
        trace=trace or [],
        wall_s=time.perf_counter() - wall0,
        leftover_items=leftover,
        windows=windows,
    )


def _gap(inst, cluster: Cluster, t: float, exact: ExactSettings) -> dict[str, float]:
    leased = sum(1 for h in cluster.hosts if h not in {g.name for g in inst.hosts})
    if leased > inst.n_candidates:
        inst = dataclasses.replace(inst, n_candidates=leased)
    heur = step_cost(inst, solution_from_cluster(inst, cluster))
    res = solve_step(inst, time_limit_s=exact.time_limit_s)
    if res.objective is None:
        return {"t_s": t, "heuristic": heur["total"], "status": 0.0}
    opt = res.objective
    return {
        "t_s": t,
        "heuristic": heur["total"],
        "heuristic_leasing": heur["leasing"],
        "heuristic_penalty": heur["penalty"],
        "optimum": opt,
        "gap_abs": heur["total"] - opt,
        "gap_rel": (heur["total"] - opt) / opt if opt > 1e-9 else 0.0,
        "solver_gap": res.gap or 0.0,
        "optimal": float(res.status == "optimal"),
        "solve_s": res.time_s,
        "hosts": float(len(inst.hosts)),
    }
