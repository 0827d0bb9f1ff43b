"""Independent evaluation of a deployment: recompute R, C, T_D and F and list broken rules.

Nothing here reads the solver: response time is recomputed by walking every source→sink
path of the operator DAG over the shortest-delay closure of the physical network, so a plan
can be checked against the model's own claims (digest §10, "invariants").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from ..graphs import operator_dag, resource_network, shortest_delays, source_sink_paths
from .inputs import EdrpInputs, Multiset
from .metrics import (
    downtime,
    mm1_latency,
    operator_cost,
    operator_latency,
    stream_cost,
    stream_delay,
)

__all__ = ["Evaluation", "evaluate", "violations"]


@dataclass(frozen=True)
class Evaluation:
    """Metrics of one deployment (seconds, $/h)."""

    path_s: dict[tuple[str, ...], float]
    response_s: float
    query_s: dict[str, float]
    cost_replicas: float
    cost_network: float
    downtime_s: float
    operator_downtime_s: dict[str, float]
    objective: float

    @property
    def cost(self) -> float:
        """C(x, y): replicas plus network (seed 003, Eq. (8))."""
        return self.cost_replicas + self.cost_network


def evaluate(inputs: EdrpInputs, deployment: Mapping[str, Multiset]) -> Evaluation:
    """R (Eqs. (5)–(7)), C (Eqs. (8)–(9)), T_D (Eqs. (10)–(11)) and F (Eq. (12))."""
    ops = {o.name: o for o in inputs.operators}
    nodes = {n.name: n for n in inputs.nodes}
    speed = {u: n.speed for u, n in nodes.items()}
    dag = operator_dag(ops, [(s.src, s.dst) for s in inputs.streams])
    delays = shortest_delays(resource_network(nodes, inputs.links))
    path_s = {
        path: sum(operator_latency(ops[i], deployment[i], speed) for i in path)
        + sum(
            stream_delay(deployment[a], deployment[b], delays)
            for a, b in zip(path, path[1:], strict=False)
        )
        for path in source_sink_paths(dag)
    }
    query_s: dict[str, float] = {}
    for path, value in path_s.items():
        for q in {ops[i].query for i in path}:
            query_s[q] = max(query_s.get(q, 0.0), value)
    cost_replicas = sum(operator_cost(ops[i], ms) for i, ms in deployment.items())
    cost_network = sum(
        stream_cost(
            s.rate,
            deployment[s.src],
            deployment[s.dst],
            lambda u, v: 0.0 if u == v else inputs.link_cost,
        )
        for s in inputs.streams
    )
    current = inputs.current or {}
    op_down = {
        i: downtime(ops[i], current[i], ms, nodes, inputs.datastore, inputs.t_syn_s)
        if i in current
        else 0.0
        for i, ms in deployment.items()
    }
    response = max(path_s.values(), default=0.0)
    t_d = max(op_down.values(), default=0.0)
    w, b = inputs.weights, inputs.bounds
    objective = (
        w.r * response / b.r_max_s
        + w.c * (cost_replicas + cost_network) / b.c_max
        + w.d * t_d / b.td_max_s
    )
    return Evaluation(
        path_s, response, query_s, cost_replicas, cost_network, t_d, op_down, objective
    )


def violations(inputs: EdrpInputs, deployment: Mapping[str, Multiset]) -> list[str]:
    """Every rule of the model the deployment breaks; empty when it is feasible."""
    found: list[str] = []
    ops = {o.name: o for o in inputs.operators}
    caps = {n.name: n.capacity for n in inputs.nodes}
    missing = set(ops) - set(deployment)
    if missing:
        found.append(f"operators without a deployment: {sorted(missing)}")
    used: Counter[str] = Counter()
    for i, ms in deployment.items():
        op = ops[i]
        if not 1 <= len(ms) <= op.max_replicas:
            found.append(f"{i}: {len(ms)} replicas outside 1..{op.max_replicas}")
        outside = set(ms) - set(op.nodes or caps)
        if outside:
            found.append(f"{i}: placed on nodes {sorted(outside)} outside its allowed set")
        if mm1_latency(op.service_rate, op.input_rate / max(len(ms), 1)) == float("inf"):
            found.append(f"{i}: unstable, λ/|U| = {op.input_rate / len(ms):.1f} ≥ μ")
        for u, n in Counter(ms).items():
            used[u] += n * op.resources
    for u, load in used.items():  # Eq. (18)
        if load > caps[u] + 1e-9:
            found.append(f"node {u}: {load:g} resources used > capacity {caps[u]:g}")
    if found:
        return found
    ev = evaluate(inputs, deployment)
    b = inputs.bounds
    if ev.response_s > b.r_max_s + 1e-9:  # Eq. (15)
        found.append(f"response time {ev.response_s * 1e3:.1f} ms > R_max")
    if ev.cost > b.c_max + 1e-9:  # Eq. (16)
        found.append(f"cost {ev.cost:.2f} $/h > C_max")
    if ev.downtime_s > b.td_max_s + 1e-9:  # Eq. (17)
        found.append(f"downtime {ev.downtime_s:.2f} s > T_D,max")
    return found
