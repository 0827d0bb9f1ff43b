"""Per-operator, per-stream and reconfiguration metrics of EDRP (seed 003, Sections 4.2, A.1).

Examples
--------
The digest's worked example (§10): A emits 8 tuples/s to B (μ = 10), nodes 1 and 2.

>>> round(mm1_latency(10.0, 8.0), 4), round(mm1_latency(10.0, 4.0), 4)
(0.5, 0.1667)
>>> d = {"1": {"1": 0.0, "2": 0.1}, "2": {"1": 0.1, "2": 0.0}}
>>> stream_delay(("1",), ("1", "2"), d)
0.1
>>> round(stream_cost(8.0, ("1",), ("2", "2"), lambda u, v: 0.05 * (u != v)), 6)
0.4
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping

from .inputs import DataStore, Multiset, Node, Operator

__all__ = [
    "downtime",
    "mm1_latency",
    "operator_cost",
    "operator_latency",
    "stream_cost",
    "stream_delay",
]


def mm1_latency(mu: float, rate: float) -> float:
    """R_i(λ) = 1/(μ_i − λ), M/M/1 response time (seed 003, Section 7.2); inf if unstable."""
    return 1.0 / (mu - rate) if rate < mu else math.inf


def operator_latency(op: Operator, ms: Multiset, speed: Mapping[str, float]) -> float:
    """R_i,U = max_{u∈U} R_i(λ_i/|U|)/S_u (seed 003, Eq. (1)): load split evenly."""
    base = mm1_latency(op.service_rate, op.input_rate / len(ms))
    return base / min(speed[u] for u in ms)


def operator_cost(op: Operator, ms: Multiset) -> float:
    """C_i,U = Σ_u U(u)·C_i·Res_i (seed 003, Eq. (2))."""
    return len(ms) * op.price * op.resources


def stream_delay(
    up: Multiset, down: Multiset, delays: Mapping[str, Mapping[str, float]]
) -> float:
    """d_(U,V) = max_{u∈U, v∈V} d_(u,v) (seed 003, Eq. (3))."""
    return max(delays[u][v] for u in set(up) for v in set(down))


def stream_cost(
    rate: float, up: Multiset, down: Multiset, link_cost: Callable[[str, str], float]
) -> float:
    """C_(i,j),(U,V) = Σ_{u,v} U(u)V(v)·λ_(i,j)/(|U||V|)·C_(u,v) (seed 003, Eq. (4)).

    Each replica pair carries λ/(|U||V|); pairs are weighted by multiplicity (digest §3).
    """
    cu, cv = Counter(up), Counter(down)
    share = rate / (len(up) * len(down))
    return sum(nu * nv * share * link_cost(u, v) for u, nu in cu.items() for v, nv in cv.items())


def downtime(
    op: Operator,
    before: Multiset,
    after: Multiset,
    nodes: Mapping[str, Node],
    store: DataStore,
    t_syn_s: float,
) -> float:
    """t_D(i, U, V): pause-and-resume downtime of moving i from U to V (seed 003, Eqs. (25)–(32)).

    Scale-out means |V| > |U| (digest §8.4). The maximum over u ∈ U, v ∈ V with u ≠ v is 0
    when every replica stays on one node (Eq. (26)), so a same-node scale-out costs t_syn.
    """
    cu, cv = Counter(before), Counter(after)
    if cu == cv:
        return 0.0  # Eq. (25), U = V
    n_u, n_v = len(before), len(after)
    kind = "MI" if n_u == n_v else ("SO" if n_v > n_u else "SI")
    rtt = 2 * store.delay_s
    code_s = rtt + 8 * op.code_bytes / store.rate_bps  # Eq. (28)

    def transfer(size: float) -> float:  # Eqs. (29)–(30)
        return rtt + 8 * size / store.rate_bps

    worst = 0.0
    for u in cu:
        removed = max(cu[u] - cv[u], 0)  # δ⁻_u
        up = op.state_bytes * removed / n_u  # Eq. (31)
        if kind == "SO":
            up += op.state_bytes * cu[u] * (n_v - n_u) / (n_u * n_v)
        for v in cv:
            if u == v:
                continue
            added = max(cv[v] - cu[v], 0)  # δ⁺_v
            down = op.state_bytes * added / n_v  # Eq. (32)
            if kind == "SI":
                down += op.state_bytes * min(cu[v], cv[v]) * (n_u - n_v) / (n_u * n_v)
            tau = (  # Eq. (27)
                max(code_s if cu[v] == 0 else 0.0, transfer(up))
                + transfer(down)
                + (nodes[v].spawn_s if cv[v] > cu[v] else 0.0)
            )
            worst = max(worst, tau)
    return t_syn_s + worst  # Eqs. (25)–(26)
