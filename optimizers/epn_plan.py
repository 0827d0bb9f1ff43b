"""Seed 000's EPN-level problem: read from the fitted model and config, written back as a
:class:`~streamplan.plan.Decision`. Shared by the heuristic and the MILP (digest §9)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from optimizers.queueing import EpnLoad, node_load, response_times
from streamplan.config import AppConfig, NodeType
from streamplan.fitted import FittedModel
from streamplan.plan import Decision, Prediction, Replicas, SolverStats

__all__ = ["EpnProblem", "build_decision", "epn_problem", "evaluate_assignment"]


@dataclass(frozen=True)
class EpnProblem:
    """One EPN per query, where each runs now, and the machines on offer."""

    app: str
    loads: list[EpnLoad]
    current: dict[str, str]
    node_types: dict[str, NodeType]
    hire_type: NodeType
    notes: list[str]

    @property
    def nodes(self) -> list[str]:
        """Nodes of the current deployment (some may host nothing)."""
        return sorted(self.node_types)

    @property
    def speeds(self) -> dict[str, float]:
        """Existing node -> speed relative to the calibration host (A11)."""
        return {n: t.speed for n, t in self.node_types.items()}

    def hire_name(self, k: int) -> str:
        """Name of the k-th hire, ``<app>-<type>-<k>`` (the methods skip names in use)."""
        return f"{self.app}-{self.hire_type.name}-{k}"


def evaluate_assignment(
    loads: Sequence[EpnLoad], assignment: Mapping[str, str], speeds: Mapping[str, float]
) -> tuple[dict[str, float], dict[str, float]]:
    """Predicted ``W_i`` (s) per EPN and ``ρ_j`` per used node for a placement.

    Seed 000, Eqs. (5.1)–(5.2) (reconstructed, P-K) per node; nodes missing from
    ``speeds`` run at the calibration speed 1.
    """
    hosted: dict[str, list[EpnLoad]] = {}
    for load in loads:
        node = assignment[load.name]
        hosted.setdefault(node, []).append(load.on_speed(speeds.get(node, 1.0)))
    w: dict[str, float] = {}
    rho: dict[str, float] = {}
    for node in sorted(hosted):
        w.update(response_times(hosted[node]))
        rho[node] = node_load(hosted[node])
    return w, rho


def epn_problem(model: FittedModel, config: AppConfig) -> EpnProblem:
    """Build the EPN loads (rate statistic, b, M_2, target) and the current node of each.

    Raises
    ------
    ValueError
        When a query has no fitted model or no placed operator, or a node's type is unknown.
    """
    types = {t.name: t for t in config.node_types}
    config_types = {n.name: n.type for n in config.nodes}
    dep = model.deployment
    node_types: dict[str, NodeType] = {}
    for node, state in dep.nodes.items():
        if state.type not in types:
            raise ValueError(f"deployment.nodes[{node}].type: unknown node type {state.type!r}")
        node_types[node] = types[state.type]
    for op, entries in dep.placement.items():
        for node, _ in entries:
            if node not in node_types:
                if node not in config_types:
                    raise ValueError(f"deployment.placement[{op}]: node {node!r} has no type")
                node_types[node] = types[config_types[node]]

    loads: list[EpnLoad] = []
    current: dict[str, str] = {}
    notes: list[str] = []
    for q in config.queries:
        if q.name not in model.queries:
            raise ValueError(f"model.queries: no fitted model for query {q.name!r}")
        qm = model.queries[q.name]
        rt = None if qm.measured_rt_ms is None else qm.measured_rt_ms / 1000.0
        loads.append(
            EpnLoad(
                name=q.name,
                rate=model.query_rate(q.name),
                service_mean_s=qm.service_mean_s,
                service_m2_s2=qm.service_m2_s2,
                target_s=q.target_rt_ms / 1000.0,
                measured_rt_s=rt,
            )
        )
        counts: Counter[str] = Counter()
        for op in config.query_operators(q.name):
            counts.update({node for node, _ in dep.placement.get(op, [])})
        if not counts:
            raise ValueError(f"deployment.placement: no operator of query {q.name!r} is placed")
        node = min(counts, key=lambda n: (-counts[n], n))
        current[q.name] = node
        if len(counts) > 1:
            notes.append(
                f"query {q.name}: operators split over {sorted(counts)}; treated as on {node!r} "
                "(seed 000 never splits an EPN)"
            )
    return EpnProblem(
        app=config.app,
        loads=loads,
        current=current,
        node_types=node_types,
        hire_type=_hire_type(config.node_types),
        notes=notes,
    )


def _hire_type(catalogue: Sequence[NodeType]) -> NodeType:
    """A11: the cheapest type at least as fast as the calibration host (else the fastest)."""
    fast = [t for t in catalogue if t.speed >= 1.0]
    if fast:
        return min(fast, key=lambda t: (t.price_per_hour, t.name))
    return max(catalogue, key=lambda t: (t.speed, t.name))


def build_decision(
    problem: EpnProblem,
    config: AppConfig,
    assignment: Mapping[str, str],
    solver: SolverStats,
    violations: Sequence[str] = (),
) -> Decision:
    """Turn an EPN -> node assignment into a Decision: every operator of a query on its EPN's
    node, keep/hire/release per node, W_i (ms), ρ_j and cost per hour.

    An unbounded W_i (its node has ρ ≥ 1) is left out of the prediction, which must stay
    valid JSON, and reported as a violation instead."""
    used = set(assignment.values())
    hired = sorted(used - set(problem.node_types))
    types = dict(problem.node_types) | {n: problem.hire_type for n in hired}
    nodes = {n: ("keep" if n in used else "release") for n in problem.nodes}
    nodes |= {n: "hire" for n in hired}
    w, rho = evaluate_assignment(problem.loads, assignment, {n: t.speed for n, t in types.items()})
    unbounded = [
        f"query {q}: predicted response time is unbounded (node load ρ ≥ 1)"
        for q, v in w.items()
        if not math.isfinite(v)
    ]
    placement = {
        op: [Replicas(node=assignment[q.name], replicas=1)]
        for q in config.queries
        for op in config.query_operators(q.name)
    }
    return Decision(
        placement=placement,
        nodes=nodes,
        node_types={n: types[n].name for n in nodes},
        predicted=Prediction(
            response_time_ms={q: v * 1000.0 for q, v in w.items() if math.isfinite(v)},
            node_utilisation=rho,
            cost_per_hour=sum(types[n].price_per_hour for n in sorted(used)),
        ),
        solver=solver,
        violations=[*problem.notes, *violations, *unbounded],
    )
