"""``flink-parallelism``: per-vertex parallelism from fitted service time and arrival rate.

Each operator is an M/G/c station: ``c`` subtasks, Poisson arrivals at the fitted rate λ,
service time mean S and SCV c_s². The method picks the smallest c with utilisation
ρ = λS/c at most ``target_utilisation`` (the Flink autoscaler's target-utilisation rule),
then adds subtasks greedily while a query's predicted response time (sum over its
operators) exceeds its bound. An operator measured as saturated (utilisation at or above
``saturation``) only shows its throughput, a lower bound of its arrival rate: the
explanation says so, and the next interval re-measures after the change.
"""

from __future__ import annotations

import math
import time

from optimizers.queueing import mgc_response_time_s
from streamplan.config import AppConfig
from streamplan.fitted import FittedModel, OperatorModel
from streamplan.plan import Decision, Prediction, Replicas, SolverStats

DEFAULTS = {"target_utilisation": 0.7, "saturation": 0.9, "max_parallelism": 8}


def operator_rate(model: FittedModel, op: OperatorModel) -> float:
    """The operator's arrival rate under the model's rate statistic (max, p95 or mean)."""
    return {"max": op.arrival_rate_max, "p95": op.arrival_rate_p95, "mean": op.arrival_rate_mean}[
        model.rate_statistic
    ]


def plan_flink_parallelism(model: FittedModel, config: AppConfig) -> Decision:
    """Parallelism per operator on the nodes it runs on now (see module docstring); with
    ``method.params.guardrails`` (and ``guard_state``) the guardrails filter it, at the
    model's window end (``streamplan.guardrails``)."""
    decision = propose_parallelism(model, config)
    params = config.method.params
    if "guardrails" not in params:
        return decision
    from streamplan.guardrails import guard_from_params, guard_decision

    rules, state, now = guard_from_params(model, params)
    return guard_decision(decision, model, config, state, now, rules)[0]


def current_parallelism(model: FittedModel) -> dict[str, int]:
    """Operator -> subtasks in the deployment in force (0 if not deployed)."""
    return {op: sum(r for _, r in model.deployment.placement.get(op, [])) for op in model.operators}


def predict(
    model: FittedModel, config: AppConfig, par: dict[str, int]
) -> tuple[dict[str, float], dict[str, float]]:
    """Per query the predicted response time (ms, sum over its operators of the M/G/c
    sojourn) and per operator the utilisation λS/c, at parallelism ``par``."""
    ops = model.operators
    util = {o: operator_rate(model, ops[o]) * ops[o].service_mean_s / par[o] for o in par}
    rt = {
        q.name: 1000 * sum(
            mgc_response_time_s(operator_rate(model, ops[o]), ops[o].service_mean_s,
                            ops[o].service_scv, par[o])
            for o in config.query_operators(q.name) if o in par
        )
        for q in config.queries
    }
    return rt, util


def propose_parallelism(model: FittedModel, config: AppConfig) -> Decision:
    """The method's own proposal, before any guardrail."""
    t0 = time.perf_counter()
    params = {**DEFAULTS, **{k: v for k, v in config.method.params.items() if k in DEFAULTS}}
    target, cap = float(params["target_utilisation"]), int(params["max_parallelism"])
    if not 0 < target < 1:
        raise ValueError(f"method.params.target_utilisation must be in (0, 1), got {target}")
    ops = model.operators
    load = {name: operator_rate(model, op) * op.service_mean_s for name, op in ops.items()}
    current = {name: c or 1 for name, c in current_parallelism(model).items()}
    par = {name: min(cap, max(1, math.ceil(load[name] / target - 1e-9))) for name in ops}
    why: dict[str, list[str]] = {name: [] for name in ops}
    for name, op in ops.items():
        if par[name] > current[name]:
            why[name].append(f"utilisation {load[name] / current[name]:.2f} per subtask at "
                             f"parallelism {current[name]} is above the target {target:g}")
        elif par[name] < current[name]:
            why[name].append(f"utilisation would be {load[name] / par[name]:.2f} at parallelism "
                             f"{par[name]}, within the target {target:g}")
        if op.utilisation >= params["saturation"]:
            why[name].append(f"saturated (measured busy {op.utilisation:.2f}): arrival rate "
                             f"{operator_rate(model, op):.1f}/s is a lower bound")
    violations = []
    for q in config.queries:
        while (rt := predict(model, config, par)[0][q.name]) > q.target_rt_ms:
            candidates = [o for o in config.query_operators(q.name) if o in ops and par[o] < cap]
            if not candidates:
                violations.append(f"query {q.name}: predicted {rt:.2f} ms > bound "
                                  f"{q.target_rt_ms} ms at max parallelism {cap}")
                break
            def with_one_more(o: str) -> tuple[float, str]:
                return predict(model, config, {**par, o: par[o] + 1})[0][q.name], o

            best = min(candidates, key=with_one_more)
            par[best] += 1
            why[best].append(f"one more subtask: query {q.name} predicted response time over "
                             f"its bound {q.target_rt_ms} ms")
    first = config.nodes[0].name
    node_of = {name: (model.deployment.placement.get(name) or [(first, 1)])[0][0] for name in ops}
    nodes = sorted(set(node_of.values()))
    known = {x.name for x in config.nodes}
    cores = {n: config.node_type(n).cores if n in known else 1 for n in nodes}
    rt, util = predict(model, config, par)
    return Decision(
        placement={
            name: [Replicas(node=node_of[name], replicas=par[name])] for name in sorted(ops)
        },
        nodes={n: "keep" for n in nodes},
        node_types={n: config.node_type(n).name for n in nodes if n in known},
        predicted=Prediction(
            response_time_ms=rt,
            node_utilisation={
                n: sum(load[o] for o in ops if node_of[o] == n) / cores[n] for n in nodes
            },
            extra={f"utilisation.{o}": u for o, u in sorted(util.items())},
        ),
        solver=SolverStats(
            name="flink-parallelism", status="heuristic", objective=float(sum(par.values())),
            time_s=time.perf_counter() - t0, n_vars=len(ops),
        ),
        violations=violations,
        explanations={o: w for o, w in why.items() if w},
    )
