"""TopSet and TopSet/P (seed 004, §4.1): list scheduling of an arriving DAG over its
topological level sets.

For each vertex, in level-set order and within a set by decreasing critical latency (A4: mean
λ over resource types, then vertex id), every allowed resource is scored at once (numpy over
the resources):

    score(v, p) = max_{u ∈ parents(v)} (A_u + λ_u + l_{μ(u),p} + δ_u/β_{μ(u),p}) + λ_v^p

(A3; co-location costs nothing). A resource is skipped when adding v would break E6 or E7 for
v or for a query already there (the aggregates make that one vectorised test), and, when
transfers cost energy, when the parents' devices could no longer afford sending to p.
TopSet/P adds the penalty Σ_{j on p} λ_j^p (π(m+1) − π(m)) (A5). The smallest score wins
(ties: lowest resource index). A vertex with no valid resource rolls the DAG back and rejects
it with the reason; existing queries never move.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .evaluate import TOL, State
from .model import EPS_CAP, Dag, DagInfo

__all__ = ["PlaceResult", "candidates", "topset_order", "topset_place"]


@dataclass(frozen=True)
class PlaceResult:
    """Outcome of placing one DAG."""

    ok: bool
    dag: str
    reason: str = ""
    time_s: float = 0.0


def topset_order(state: State, info: DagInfo) -> list[int]:
    """Visit order: level sets in turn, each by decreasing critical latency, then vertex id."""
    crit = state.inst.critical_latency
    order: list[int] = []
    for level in info.levels:
        order.extend(sorted(level, key=lambda v: (-crit[info.kind[v]], v)))
    return order


def candidates(
    state: State, info: DagInfo, v: int, arrival: np.ndarray, *, penalty: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, int]]:
    """Score every allowed resource for vertex ``v`` whose parents are placed.

    Returns (resources, head A_v(p), score, valid mask, counts of failures by rule).
    ``arrival`` holds A_u of the placed parents.
    """
    inst = state.inst
    mu = state.mapping[info.name]
    allowed = info.allowed[v]
    k = info.kind[v]
    head = np.zeros(len(allowed))
    for u in info.parents[v]:
        pu = mu[u]
        t = (arrival[u] + state.lat(info, u, pu) + inst.latency_s[pu, allowed]
             + info.delta[u] * inst.inv_bandwidth[pu, allowed])
        np.maximum(head, t, out=head)
    lam = inst.service_s[k, allowed]
    slope = inst.slope[allowed]
    m = state.m[allowed]
    free = bool(info.is_source[v]) and inst.options.sources_free
    counts = {"capacity": 0, "battery": 0}
    if free:
        valid = np.ones(len(allowed), dtype=bool)
        f_own = 1.0 + slope * np.maximum(m - 1, 0)
    else:
        w = info.omega_in[v]
        f_own = 1.0 + slope * m  # π(m + 1) = slope·m
        if inst.options.capacity_mode == "strict":
            ok6 = np.maximum(state.maxw[allowed], w) * f_own * (state.S[allowed] + lam) \
                <= 1.0 - EPS_CAP
        else:
            ok6 = (state.U[allowed] + w * lam) * f_own <= 1.0 - EPS_CAP
        recv = np.zeros(len(allowed))
        for u in info.parents[v]:
            recv += info.omega_out[u] * info.delta[u] * (allowed != mu[u])
        load = (inst.idle_w[allowed] + state.W[allowed] + w * inst.energy_j[k, allowed]
                + inst.net_j_per_byte[allowed] * (state.T[allowed] + recv))
        budget = inst.power_budget_w[allowed]
        ok7 = ~inst.is_edge[allowed] | (load <= budget * (1 + TOL) + TOL)
        # the parents' devices must afford sending to a remote p (only when bytes cost energy)
        sent: dict[int, float] = {}
        for u in info.parents[v]:
            q = int(mu[u])
            if inst.is_edge[q] and inst.net_j_per_byte[q] > 0:
                sent[q] = sent.get(q, 0.0) + info.omega_out[u] * info.delta[u]
        for q, b in sent.items():
            if state.battery_load_w(q) + inst.net_j_per_byte[q] * b > \
                    inst.power_budget_w[q] * (1 + TOL) + TOL:
                ok7 &= allowed == q
        counts = {"capacity": int((~ok6).sum()), "battery": int((ok6 & ~ok7).sum())}
        valid = ok6 & ok7
    own = lam * f_own if inst.options.latency_mode == "interfered" else lam
    score = head + own
    if penalty and not free:
        # TopSet/P (A5): growth Σ_j λ_j^p (π(m+1) − π(m)) of the queries already on p
        score = score + (state.S[allowed] + state.Ssrc[allowed]) * slope * (m >= 1)
    return allowed, head, score, valid, counts


def topset_place(state: State, dag: Dag | DagInfo, *, penalty: bool = False) -> PlaceResult:
    """Place an arriving DAG with TopSet (``penalty``: TopSet/P). Rolls back on failure."""
    start = time.perf_counter()
    info = state.register(dag)
    arrival = np.zeros(info.n)
    for v in topset_order(state, info):
        allowed, head, score, valid, counts = candidates(state, info, v, arrival, penalty=penalty)
        if not valid.any():
            reason = _why(state, info, v, allowed, counts)
            state.unregister(info.name)
            return PlaceResult(False, info.name, reason, time.perf_counter() - start)
        i = int(np.argmin(np.where(valid, score, np.inf)))
        arrival[v] = head[i]
        state.add(info.name, v, int(allowed[i]))
    return PlaceResult(True, info.name, "", time.perf_counter() - start)


def _why(state: State, info: DagInfo, v: int, allowed: np.ndarray, counts: dict) -> str:
    inst = state.inst
    name = f"vertex {info.names[v]} of dag {info.name}"
    w = info.omega_in[v]
    lam = inst.service_s[info.kind[v], allowed]
    if (w * lam > 1.0 - EPS_CAP).all():
        return (f"{name} fits nowhere: its input rate {w:g} ev/s exceeds the exclusive capacity "
                f"1/λ of every allowed resource (best 1/λ = {1 / lam.min():g} ev/s, E5)")
    return (f"{name} fits nowhere: of {len(allowed)} allowed resources {counts['capacity']} "
            f"lack capacity (E6) and {counts['battery']} lack battery (E7)")
