"""Scenario description shared by the prediction models and both simulators.

A scenario is a small streaming application under one placement: operators with a true
service-time law, a selectivity in [0, 1] (Bernoulli outputs, as the project simulator draws
them) and one node per replica; edges; queries with a Poisson input rate. Every node is a
single-core FCFS station at speed 1, and operators co-located on a node run to completion as
one job (the project simulator's rule, ``streamplan/simulation/__init__.py``).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime, timezone

from streamplan.config import (
    AppConfig,
    NodeSpec,
    NodeType,
    OperatorSpec,
    QuerySpec,
    ServiceSpec,
    SimulationSpec,
    WorkloadPhase,
)

__all__ = ["Op", "Query", "Scenario", "ScenarioError", "UNIT_TYPE"]

UNIT_TYPE = NodeType(name="unit", cores=1, speed=1.0)
START = datetime(2026, 1, 1, tzinfo=timezone.utc)


class ScenarioError(ValueError):
    """A scenario that cannot be predicted or simulated; the message names field and value."""


@dataclass(frozen=True)
class Op:
    """One operator: true service law (mean, SCV), selectivity, one node per replica."""

    name: str
    query: str
    nodes: tuple[str, ...]
    mean_ms: float
    scv: float = 1.0
    selectivity: float = 1.0

    def __post_init__(self) -> None:
        if not (self.mean_ms > 0 and math.isfinite(self.mean_ms)):
            raise ScenarioError(
                f"op[{self.name}].mean_ms must be finite and > 0, got {self.mean_ms}"
            )
        if not (self.scv >= 0 and math.isfinite(self.scv)):
            raise ScenarioError(f"op[{self.name}].scv must be finite and >= 0, got {self.scv}")
        if not 0 <= self.selectivity <= 1:
            raise ScenarioError(
                f"op[{self.name}].selectivity must be in [0, 1], got {self.selectivity}"
            )
        if not self.nodes:
            raise ScenarioError(f"op[{self.name}].nodes must name at least one node, got ()")

    @property
    def mean_s(self) -> float:
        return self.mean_ms / 1000.0

    @property
    def m2_s2(self) -> float:
        """Second moment ``(1 + c²)·b²`` of one record's service time."""
        return (1.0 + self.scv) * self.mean_s**2

    @property
    def dist(self) -> str:
        """Service law: exponential for SCV 1, deterministic for 0, else lognormal."""
        if self.scv == 1.0:
            return "exponential"
        return "deterministic" if self.scv == 0 else "lognormal"


@dataclass(frozen=True)
class Query:
    """A query: Poisson input at ``rate`` events/s into its source operators."""

    name: str
    rate: float
    sources: tuple[str, ...]
    sinks: tuple[str, ...]

    def __post_init__(self) -> None:
        if not (self.rate >= 0 and math.isfinite(self.rate)):
            raise ScenarioError(f"query[{self.name}].rate must be finite and >= 0, got {self.rate}")


@dataclass(frozen=True)
class Scenario:
    """Operators, edges and queries under one placement (see module docstring)."""

    name: str
    ops: tuple[Op, ...]
    edges: tuple[tuple[str, str], ...]
    queries: tuple[Query, ...]

    def __post_init__(self) -> None:
        names = {o.name for o in self.ops}
        queries = {q.name for q in self.queries}
        for o in self.ops:
            if o.query not in queries:
                raise ScenarioError(f"op[{o.name}].query: unknown query {o.query!r}")
        for i, (a, b) in enumerate(self.edges):
            for end in (a, b):
                if end not in names:
                    raise ScenarioError(f"edges[{i}]: unknown operator {end!r}")
            if self.op(a).query != self.op(b).query:
                raise ScenarioError(f"edges[{i}]: {a!r} and {b!r} belong to different queries")
        for q in self.queries:
            for field in ("sources", "sinks"):
                for o in getattr(q, field):
                    if o not in names or self.op(o).query != q.name:
                        raise ScenarioError(f"query[{q.name}].{field}: unknown operator {o!r}")

    # --- lookups --------------------------------------------------------------------------
    def op(self, name: str) -> Op:
        return next(o for o in self.ops if o.name == name)

    def query(self, name: str) -> Query:
        return next(q for q in self.queries if q.name == name)

    def successors(self, name: str) -> list[str]:
        return [b for a, b in self.edges if a == name]

    @property
    def nodes(self) -> list[str]:
        """Nodes in order of first use."""
        return list(dict.fromkeys(n for o in self.ops for n in o.nodes))

    def visits(self) -> dict[str, float]:
        """Expected records per input event of each operator: ``v_o = [o source] +
        Σ_pred v_p·s_p`` (flow balance, digest 000 §9)."""
        v: dict[str, float] = {}

        def visit(o: str) -> float:
            if o not in v:
                src = any(o in q.sources for q in self.queries if q.name == self.op(o).query)
                v[o] = float(src) + sum(
                    visit(a) * self.op(a).selectivity for a, b in self.edges if b == o
                )
            return v[o]

        for o in self.ops:
            visit(o.name)
        return v

    def utilisation(self) -> dict[str, float]:
        """ρ per node: Σ over operator replicas of rate·v_o·b_o / replicas."""
        v = self.visits()
        rho = dict.fromkeys(self.nodes, 0.0)
        for o in self.ops:
            share = self.query(o.query).rate * v[o.name] * o.mean_s / len(o.nodes)
            for n in o.nodes:
                rho[n] += share
        return rho

    def at_utilisation(self, rho: float) -> Scenario:
        """The same scenario with all rates scaled so that the busiest node has load ``rho``.

        Raises
        ------
        ScenarioError
            When ``rho`` is not in (0, 1) or the scenario carries no load.
        """
        if not 0 < rho < 1:
            raise ScenarioError(f"rho must be in (0, 1) for a stable scenario, got {rho}")
        peak = max(self.utilisation().values())
        if peak <= 0:
            raise ScenarioError(f"scenario[{self.name}]: all rates are 0, cannot scale to rho")
        queries = tuple(replace(q, rate=q.rate * rho / peak) for q in self.queries)
        return replace(self, queries=queries)

    def check_stable(self) -> None:
        """Raise when a node has ρ ≥ 1 (a simulation would not reach steady state)."""
        for node, rho in self.utilisation().items():
            if rho >= 1:
                raise ScenarioError(f"scenario[{self.name}]: node {node!r} has rho={rho:.4g} >= 1")

    # --- project simulator view -----------------------------------------------------------
    def placement(self) -> dict[str, list[tuple[str, int]]]:
        """operator -> [(node, replicas)] in the project's placement format."""
        return {o.name: list(Counter(o.nodes).items()) for o in self.ops}

    def app_config(self, duration_s: float, seed: int) -> AppConfig:
        """The scenario as an :class:`AppConfig` with a simulation section."""
        placement = self.placement()
        return AppConfig(
            app=f"fidelity-{self.name}",
            operators=[OperatorSpec(name=o.name, query=o.query) for o in self.ops],
            edges=list(self.edges),
            queries=[
                QuerySpec(
                    name=q.name, sources=list(q.sources), sinks=list(q.sinks), target_rt_ms=1e3
                )
                for q in self.queries
            ],
            node_types=[UNIT_TYPE],
            nodes=[NodeSpec(name=n, type=UNIT_TYPE.name) for n in self.nodes],
            deployment=placement,
            simulation=SimulationSpec(
                seed=seed,
                duration_s=duration_s,
                service={
                    o.name: ServiceSpec(dist=o.dist, mean_ms=o.mean_ms, scv=o.scv)
                    for o in self.ops
                },
                selectivity={o.name: o.selectivity for o in self.ops},
                workload=[WorkloadPhase(start_s=0.0, rates={q.name: q.rate for q in self.queries})],
            ),
        )
