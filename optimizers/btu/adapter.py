"""``method: btu`` / ``btu-threshold``: one replanning step from the fitted model.

Mapping (digest §9):

* **Deployment.** ``fitted.deployment`` gives instances per node and each node's type and
  ``leased_at`` (ISO-8601); ``now`` is the fitted window's end. A node's paid time left is
  ``BTU − ((now − leased_at) mod BTU)``.
* **Observations.** The fitted model has rates and service times but no queue lengths or
  per-window history, so o_d and o_queue are *predicted* for the current instance count
  c_o as an M/M/c queue: ``o_d = hop_o + b_o + Wq``, ``o_queue = Lq`` (with ρ ≥ 1, the
  backlog one replanning interval adds, and the time to drain it). λ_o follows the model's
  rate statistic, b_o is ``service_mean_s``. With a single point, Alg. 1's regression has no
  trend and reduces to ``o_d > o_slo``.
* **Cycles.** One replan is one provisioning cycle (digest §9), so the pipeline should
  replan at ``replan_interval_s`` (60 s in the paper). ``max_cycles > 1`` runs further
  cycles on the re-predicted state until one makes no scaling action; on a steady-state
  prediction the BTU policy's Fig. 4 step 2 can then trade instances back and forth between
  types (the idle type it robs becomes the late one), which a real 60 s loop spreads over
  minutes. The release procedure (Fig. 5) sees the nodes whose paid BTU ends within the
  release window (max(5 % of the BTU, the replanning interval)) after ``now``.
* **Plan.** Placement operator → [(node, instances)]; nodes keep | hire | release
  ("release" = do not renew at the BTU end, which is inside the window). The BTU clock of
  every node goes into ``predicted.extra`` as numbers (epoch seconds):
  ``btu.leased_at_s[node]``, ``btu.start_s[node]``, ``btu.end_s[node]``,
  ``btu.paid_left_s[node]`` and, for released nodes, ``btu.release_at_s[node]``.
  Costs (leasing and predicted SLA penalty per hour) and the heuristic's gap to the step
  MILP go into ``solver.extra`` (logged to MLflow with the plan).

A step with no node type that fits some operator yields an ``infeasible`` decision naming
it (publishing keeps the previous plan); malformed input raises ``ConfigError`` /
:class:`BtuInputError` naming the field and value.
"""

from __future__ import annotations

import math
import time
from datetime import datetime

import pyscipopt

from streamplan.config import AppConfig, ConfigError
from streamplan.fitted import FittedModel
from streamplan.plan import Decision, Prediction, Replicas, SolverStats

from ..graphs import operator_dag, source_sink_paths
from .cost import LEVELS
from .inputs import BtuInputError, BtuParams, OperatorType, check_fits
from .milp import demand, instance_from_cluster, solution_from_cluster, solve_step, step_cost
from .mmc import mean_queue, mean_wait, sojourn_tail
from .params import BtuMethodParams, parse_params, vm_types
from .policy import btu_step
from .state import Cluster, Host, Observation
from .threshold import threshold_step

__all__ = ["plan_btu", "plan_btu_threshold", "predict_observations"]


def plan_btu(model: FittedModel, config: AppConfig) -> Decision:
    """Method ``btu``: seed 002's BTU-aware provisioning, one replanning step."""
    return _plan(model, config, "btu")


def plan_btu_threshold(model: FittedModel, config: AppConfig) -> Decision:
    """Method ``btu-threshold``: seed 002's threshold baseline, one replanning step."""
    return _plan(model, config, "threshold")


def _epoch(ts: str, field: str) -> float:
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except (TypeError, ValueError) as exc:
        raise BtuInputError(f"{field}: not an ISO-8601 time: {ts!r}") from exc


def _rate(model: FittedModel, op: str) -> float:
    om = model.operators[op]
    return {"max": om.arrival_rate_max, "p95": om.arrival_rate_p95,
            "mean": om.arrival_rate_mean}[model.rate_statistic]


def predict_observations(
    model: FittedModel,
    types: dict[str, OperatorType],
    counts: dict[str, int],
    interval_s: float,
) -> dict[str, Observation]:
    """o_d and o_queue per type from the fitted λ, b and the instance counts (M/M/c)."""
    out = {}
    for o, t in types.items():
        lam, b = _rate(model, o), model.operators[o].service_mean_s
        c = max(counts.get(o, 0), 1)
        if b <= 0:
            out[o] = Observation(t.hop_ms, 0.0)
            continue
        mu = 1.0 / b
        if lam < c * mu:
            wq, lq = mean_wait(c, lam, mu), mean_queue(c, lam, mu)
        else:  # overloaded: the backlog one interval adds, and the time to drain half of it
            lq = (lam - c * mu) * interval_s
            wq = lq / (c * mu) / 2
        d = t.hop_ms + 1000.0 * (b + wq)
        out[o] = Observation(d, lq, (d,))
    return out


def _check_model(model: FittedModel, config: AppConfig) -> None:
    ops = {o.name for o in config.operators}
    unknown = sorted(set(model.operators) - ops)
    if unknown:
        raise BtuInputError(
            f"fitted.operators: telemetry for operators {unknown} that are not in the "
            f"topology {sorted(ops)}"
        )
    missing = sorted(ops - set(model.operators))
    if missing:
        raise BtuInputError(f"fitted.operators: no fitted model for operators {missing}")
    for o in model.deployment.placement:
        if o not in ops:
            raise BtuInputError(
                f"fitted.deployment.placement: operator {o!r} is not in the topology"
            )
    for o, om in model.operators.items():
        for name in ("arrival_rate_mean", "arrival_rate_p95", "arrival_rate_max",
                     "service_mean_s"):
            v = getattr(om, name)
            if not math.isfinite(v):
                raise BtuInputError(f"fitted.operators[{o}].{name} must be finite, got {v!r}")


def _cluster(
    model: FittedModel, config: AppConfig, params: BtuMethodParams,
    types: dict[str, OperatorType], now: float, notes: list[str],
) -> Cluster:
    vms = vm_types(config, params)
    lease_type = params.vm_type or config.node_types[0].name
    placement = model.deployment.placement or config.deployment
    node_state = dict(model.deployment.nodes)
    config_types = {n.name: n.type for n in config.nodes}
    cluster = Cluster(types, vms[lease_type], prefix="btu-vm")
    used = [n for entries in placement.values() for n, _ in entries]
    for node in dict.fromkeys([*node_state, *used]):
        state = node_state.get(node)
        type_name = state.type if state is not None else config_types.get(node)
        if type_name not in vms:
            raise BtuInputError(
                f"fitted.deployment.nodes[{node}].type: unknown node type {type_name!r} "
                f"(known: {sorted(vms)})"
            )
        vm = vms[type_name]
        if state is not None and state.billing_unit_s and state.billing_unit_s != vm.btu_s:
            vm = type(vm)(vm.name, vm.cpu, vm.mem, vm.price * state.billing_unit_s / vm.btu_s,
                          float(state.billing_unit_s))
        if state is not None and state.leased_at:
            leased = _epoch(state.leased_at, f"fitted.deployment.nodes[{node}].leased_at")
        elif params.missing_lease == "error":
            raise BtuInputError(
                f"fitted.deployment.nodes[{node}].leased_at is missing (needed for the BTU "
                "clock; set method.params.missing_lease: window_start to assume one)"
            )
        else:
            leased = _epoch(model.window_start, "fitted.window_start")
            notes.append(f"node {node}: leased_at unknown, assumed {model.window_start}")
        if leased > now:
            raise BtuInputError(
                f"fitted.deployment.nodes[{node}].leased_at {state.leased_at!r} is after the "
                f"window end {model.window_end!r}"
            )
        cluster.hosts[node] = Host(node, vm, leased, leased)
    for op, entries in placement.items():
        for node, n in entries:
            cluster.hosts[node].add(op, int(n))
    for op in types:
        if cluster.count(op) < 1:
            raise BtuInputError(f"fitted.deployment.placement: operator {op!r} has no instance")
    for h in cluster.hosts.values():
        cpu, mem = h.free(types)
        if cpu < -1e-6 or mem < -1e-6:
            raise BtuInputError(
                f"fitted.deployment: node {h.name!r} holds more than its capacity "
                f"({h.vm.cpu - cpu:g}/{h.vm.cpu:g} CPU shares, {h.vm.mem - mem:g}/{h.vm.mem:g} MB)"
            )
    return cluster


def _plan(model: FittedModel, config: AppConfig, policy: str) -> Decision:
    t0 = time.perf_counter()
    params = parse_params(config)
    types = params.operator_types()
    pp = params.policy_params()
    _check_model(model, config)
    now = _epoch(model.window_end, "fitted.window_end")
    notes: list[str] = []
    vms = vm_types(config, params)
    lease_vm = vms[params.vm_type or config.node_types[0].name]
    misfits = check_fits(types, lease_vm)
    if misfits:
        return _infeasible(model, "; ".join(misfits), time.perf_counter() - t0)
    cluster = _cluster(model, config, params, types, now, notes)
    interval = params.replan_interval_s
    obs = predict_observations(model, types, cluster.counts(), interval)
    exact_inst = None
    if params.exact:
        need = {o: demand(_rate(model, o), obs[o].queue, model.operators[o].service_mean_s,
                          drain_s=params.drain_s, rho_max=params.rho_max) for o in types}
        delta = {o: (_rate(model, o) * interval + obs[o].queue) / need[o] for o in types}
        exact_inst = instance_from_cluster(cluster, now, demand_by_op=need,
                                           delay_per_missing=delta, penalty=pp.penalty,
                                           horizon_s=interval)
    before = {h: h_.leased_at for h, h_ in cluster.hosts.items()}
    before_hosts = {h: h_ for h, h_ in cluster.hosts.items()}
    step = btu_step if policy == "btu" else threshold_step
    actions = []
    cycles = 0
    for cycles in range(1, params.max_cycles + 1):  # noqa: B007
        done = step(cluster, now, obs, pp)
        actions += done
        obs = predict_observations(model, types, cluster.counts(), interval)
        if not any(a.kind in ("up", "down") for a in done):
            break
    cluster.check()
    return _decision(model, config, params, pp, policy, cluster, before, before_hosts, obs,
                     actions, cycles, now, exact_inst, notes, time.perf_counter() - t0)


def _infeasible(model: FittedModel, reason: str, elapsed: float) -> Decision:
    return Decision(
        placement={op: [Replicas(node=n, replicas=k) for n, k in e]
                   for op, e in model.deployment.placement.items()},
        nodes=dict.fromkeys(model.deployment.nodes, "keep"),
        predicted=Prediction(),
        solver=SolverStats(name="btu", status="infeasible", time_s=elapsed,
                           message=f"no host fits: {reason}"),
        violations=[reason],
    )


def _decision(
    model, config, params: BtuMethodParams, pp: BtuParams, policy, cluster: Cluster, before,
    before_hosts, obs, actions, cycles, now, exact_inst, notes, elapsed,
) -> Decision:
    nodes: dict[str, str] = {}
    node_types: dict[str, str] = {}
    extra: dict[str, float] = {}
    cost_per_hour = 0.0
    for name, h in cluster.hosts.items():
        nodes[name] = "keep" if name in before else "hire"
        if name not in before:
            node_types[name] = h.vm.name
        cost_per_hour += h.vm.price * 3600.0 / h.vm.btu_s
        extra[f"btu.leased_at_s[{name}]"] = h.leased_at
        extra[f"btu.start_s[{name}]"] = h.btu_start(now)
        extra[f"btu.end_s[{name}]"] = h.paid_end(now)
        extra[f"btu.paid_left_s[{name}]"] = h.time_left(now)
    for name, (h, _at) in cluster.released.items():
        if name in before:
            nodes[name] = "release"
            extra[f"btu.leased_at_s[{name}]"] = h.leased_at
            extra[f"btu.start_s[{name}]"] = h.btu_start(now)
            extra[f"btu.end_s[{name}]"] = h.paid_end(now)
            extra[f"btu.paid_left_s[{name}]"] = h.time_left(now)
            extra[f"btu.release_at_s[{name}]"] = h.paid_end(now)
    counts = cluster.counts()
    delayed_per_s = dict.fromkeys(LEVELS, 0.0)
    items_per_s = 0.0
    for o, t in cluster.types.items():
        lam, b = _rate(model, o), model.operators[o].service_mean_s
        items_per_s += lam
        extra[f"instances[{o}]"] = float(counts[o])
        extra[f"predicted_d_ms[{o}]"] = obs[o].d_ms
        extra[f"predicted_queue[{o}]"] = obs[o].queue
        for lv, k in LEVELS.items():
            share = 0.0 if b <= 0 else sojourn_tail(counts[o], lam, 1.0 / b,
                                                    (k * t.slo_ms - t.hop_ms) / 1000.0)
            delayed_per_s[lv] += lam * share
    for lv in LEVELS:
        extra[f"compliance[{lv}]"] = 1 - delayed_per_s[lv] / items_per_s if items_per_s else 1.0
    penalty_per_hour = pp.penalty * delayed_per_s["nrt"] * 3600.0
    util = {}
    for name, h in cluster.hosts.items():
        cpu, mem = h.used(cluster.types)
        util[name] = max(cpu / h.vm.cpu, mem / h.vm.mem)
    rt = _response_times(config, obs)
    kinds: dict[str, int] = {}
    for a in actions:
        kinds[a.kind] = kinds.get(a.kind, 0) + 1
    solver_extra = {
        "cost.leasing_per_hour": cost_per_hour,
        "cost.penalty_per_hour_nrt": penalty_per_hour,
        "cost.total_per_hour_nrt": cost_per_hour + penalty_per_hour,
        "cycles": float(cycles),
        **{f"actions.{k}": float(v) for k, v in sorted(kinds.items())},
    }
    objective = cost_per_hour + penalty_per_hour
    message = f"{policy}: {cycles} cycle(s), actions {kinds or 'none'}"
    if exact_inst is not None:
        leased = sum(1 for h in cluster.hosts if h not in before_hosts)
        if leased > exact_inst.n_candidates:
            from dataclasses import replace

            exact_inst = replace(exact_inst, n_candidates=leased)
        heur = step_cost(exact_inst, solution_from_cluster(exact_inst, cluster))
        res = solve_step(exact_inst, time_limit_s=params.time_limit_s)
        solver_extra["step.heuristic_cost"] = heur["total"]
        if res.objective is not None:
            solver_extra["step.exact_cost"] = res.objective
            solver_extra["step.gap_abs"] = heur["total"] - res.objective
            solver_extra["step.exact_optimal"] = float(res.status == "optimal")
            solver_extra["step.exact_time_s"] = res.time_s
        message += f"; step MILP {res.status} ({res.message})"
    violations = list(notes)
    for o in cluster.types:
        if not math.isfinite(obs[o].d_ms) or obs[o].d_ms > cluster.types[o].slo_ms * 2:
            violations.append(f"operator {o}: predicted o_d {obs[o].d_ms:.0f} ms > "
                              f"2 × o_slo ({cluster.types[o].slo_ms:g} ms)")
    return Decision(
        placement={op: [Replicas(node=n, replicas=k) for n, k in entries]
                   for op, entries in cluster.placement().items()},
        nodes=nodes,
        node_types=node_types,
        predicted=Prediction(
            response_time_ms=rt,
            node_utilisation=util,
            cost_per_hour=objective,
            extra=extra,
        ),
        solver=SolverStats(
            name=f"btu-{policy}" if policy != "btu" else "btu-heuristic",
            version=f"SCIP {pyscipopt.Model().version()} / PySCIPOpt {pyscipopt.__version__}"
            if exact_inst is not None else "",
            status="heuristic",
            objective=objective,
            time_s=elapsed,
            message=message,
            extra=solver_extra,
        ),
        violations=violations,
    )


def _response_times(config: AppConfig, obs: dict[str, Observation]) -> dict[str, float]:
    """Per query, the largest Σ predicted o_d over source→sink paths of its operators."""
    try:
        dag = operator_dag([o.name for o in config.operators], config.edges)
        paths = source_sink_paths(dag)
    except Exception as exc:  # pragma: no cover - the config validator checks the names
        raise ConfigError(f"field 'edges': {exc}") from exc
    out = {}
    for q in config.queries:
        mine = set(config.query_operators(q.name))
        best = 0.0
        for p in paths:
            if p[0] in q.sources or p[-1] in q.sinks:
                best = max(best, sum(obs[o].d_ms for o in p if o in mine))
        if math.isfinite(best):
            out[q.name] = best
    return out
