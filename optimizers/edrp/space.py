"""The decision space of one instance: candidate multisets per operator and their coefficients.

EDRP offers every multiset of P(V_res^i; k_i); rEDRP only U_0's one-move neighbourhood. With
``prune`` a multiset that can never be part of a feasible deployment is dropped up front
(digest §4, step 2; the optimum is unchanged): one replica set needing more than a node's
capacity, or an operator latency above R_max. Unstable multisets (λ_i/|U| ≥ μ_i) are always
dropped since their latency is infinite.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..graphs import operator_dag, resource_network, shortest_delays, source_sink_paths
from .inputs import EdrpInputs, Multiset, Node
from .metrics import downtime, operator_cost, operator_latency, stream_cost, stream_delay
from .multisets import all_multisets, one_move

__all__ = ["Choice", "Link", "Space", "build_space"]


@dataclass(frozen=True)
class Choice:
    """One candidate x_i,U with R_i,U (s), C_i,U ($/h) and t_D(i, U_0,i, U) (s)."""

    latency_s: float
    cost: float
    downtime_s: float


@dataclass(frozen=True)
class Link:
    """One candidate y_(i,j),(U,V) with d_(U,V) (s) and C_(i,j),(U,V) ($/h)."""

    delay_s: float
    cost: float


@dataclass
class Space:
    """Candidates and coefficients of an instance, ready for the ILP builder."""

    paths: list[tuple[str, ...]]
    choices: dict[str, dict[Multiset, Choice]]
    links: dict[tuple[str, str], dict[tuple[Multiset, Multiset], Link]]
    pruned: dict[str, Counter[str]] = field(default_factory=dict)

    def empty_operators(self) -> dict[str, str]:
        """Operators left without a candidate, with the reasons their multisets were dropped."""
        return {
            op: ", ".join(f"{n} {why}" for why, n in sorted(self.pruned[op].items())) or "none"
            for op, cands in self.choices.items()
            if not cands
        }


def build_space(inputs: EdrpInputs, *, restricted: bool = False, prune: bool = True) -> Space:
    """Enumerate and price candidates (digest §4, steps 1–3).

    Raises :class:`~optimizers.graphs.GraphError` if the operator graph is not a DAG or the
    resource network is disconnected.
    """
    dag = operator_dag([o.name for o in inputs.operators], [(s.src, s.dst) for s in inputs.streams])
    delays = shortest_delays(resource_network([n.name for n in inputs.nodes], inputs.links))
    nodes = {n.name: n for n in inputs.nodes}
    speed = {n.name: n.speed for n in inputs.nodes}
    current = inputs.current or {}
    choices: dict[str, dict[Multiset, Choice]] = {}
    pruned: dict[str, Counter[str]] = {}
    for op in inputs.operators:
        allowed = list(op.nodes or nodes)
        u0 = current.get(op.name)
        if restricted and u0 is not None:
            candidates = one_move(u0, allowed, op.max_replicas)
        else:
            candidates = all_multisets(allowed, op.max_replicas)
        kept: dict[Multiset, Choice] = {}
        drops: Counter[str] = Counter()
        for ms in candidates:
            latency = operator_latency(op, ms, speed)
            reason = _drop_reason(inputs, op.resources, ms, latency, nodes, prune)
            if reason:
                drops[reason] += 1
                continue
            t_d = downtime(op, u0, ms, nodes, inputs.datastore, inputs.t_syn_s) if u0 else 0.0
            kept[ms] = Choice(latency, operator_cost(op, ms), t_d)
        choices[op.name] = kept
        pruned[op.name] = drops

    def link_cost(u: str, v: str) -> float:
        return 0.0 if u == v else inputs.link_cost

    links: dict[tuple[str, str], dict[tuple[Multiset, Multiset], Link]] = {}
    for s in inputs.streams:
        links[(s.src, s.dst)] = {
            (up, down): Link(
                stream_delay(up, down, delays), stream_cost(s.rate, up, down, link_cost)
            )
            for up in choices[s.src]
            for down in choices[s.dst]
        }
    return Space(source_sink_paths(dag), choices, links, pruned)


def _drop_reason(
    inputs: EdrpInputs,
    res_i: float,
    ms: Multiset,
    latency: float,
    nodes: dict[str, Node],
    prune: bool,
) -> str:
    if latency == float("inf"):
        return "unstable (λ/|U| ≥ μ)"
    if not prune:
        return ""
    if any(n * res_i > nodes[u].capacity for u, n in Counter(ms).items()):
        return "over node capacity"
    if latency > inputs.bounds.r_max_s:
        return "latency above R_max"
    return ""
