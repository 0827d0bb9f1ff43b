"""Makespan, capacity and energy of a placement: the mutable :class:`State` every algorithm
works on.

A :class:`State` holds the active DAGs, their mapping μ (resource index per vertex, −1 when
not placed) and per-resource aggregates, kept up to date on every :meth:`State.add` /
:meth:`State.remove`:

* ``m`` — non-source queries on the resource (the m of π(m), digest A2);
* ``S`` — Σ λ_j^p over them; ``U`` — Σ ω_j λ_j^p; ``maxw`` — max ω_j;
* ``W`` — Σ ω_j ε_j^p (W, edges); ``T`` — bytes/s sent or received across resources.

E6 (strict, digest A2): ``maxw·(1+π(m))·S ≤ 1 − 1e-9``; utilisation mode:
``U·(1+π(m)) ≤ 1 − 1e-9``. E7: ``κ + W + e_net·T ≤ C/τ`` on every edge device.

Makespan (E2/E3) is a longest path: each edge ⟨u, w⟩ weighs λ_u + l + δ_u/β, the upstream
compute time plus the link; the sink's compute counts only with ``include_sink_compute``.
In ``interfered`` latency mode λ_u is λ_u^p(1+π(m_p)) (digest A1).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from .model import EPS_CAP, Dag, DagInfo, Instance, compile_dag

__all__ = ["Metrics", "State", "TOL"]

TOL = 1e-9


@dataclass(frozen=True)
class Metrics:
    """Summary of a state: L̂ and its parts, utilisation and energy."""

    makespan_sum_s: float
    makespan_s: dict[str, float]
    utilisation: dict[str, float]
    edge_power_w: float
    min_battery_margin_j: float
    active_queries: int


class State:
    """Active DAGs, their mapping and per-resource aggregates on one :class:`Instance`."""

    def __init__(self, inst: Instance) -> None:
        self.inst = inst
        n = inst.n_resources
        self.dags: dict[str, DagInfo] = {}
        self.mapping: dict[str, np.ndarray] = {}
        self.m = np.zeros(n, dtype=int)
        self.S = np.zeros(n)
        self.Ssrc = np.zeros(n)
        self.U = np.zeros(n)
        self.W = np.zeros(n)
        self.T = np.zeros(n)
        self.maxw = np.zeros(n)
        self.residents: list[dict[tuple[str, int], float]] = [{} for _ in range(n)]
        self.sources_on: list[set[tuple[str, int]]] = [set() for _ in range(n)]
        self._L: dict[str, float] = {}
        self._sum = 0.0
        self._dirty: set[str] = set()
        self.memo: dict[tuple[str, str], bytes] = {}  # (pass, dag) -> mapping known futile

    # --- DAG life cycle ---------------------------------------------------------------------
    def register(self, dag: Dag | DagInfo) -> DagInfo:
        """Add a DAG with nothing placed yet."""
        info = dag if isinstance(dag, DagInfo) else compile_dag(dag, self.inst)
        if info.name in self.dags:
            raise ValueError(f"dag {info.name!r} is already active")
        self.dags[info.name] = info
        self.mapping[info.name] = np.full(info.n, -1, dtype=int)
        self._dirty.add(info.name)
        return info

    def unregister(self, name: str) -> None:
        """Remove a DAG and free its resources (a departure; nothing else moves)."""
        info = self.dags[name]
        for v in range(info.n):
            if self.mapping[name][v] >= 0:
                self.remove(name, v)
        del self.dags[name], self.mapping[name]
        self._sum -= self._L.pop(name, 0.0)
        self._dirty.discard(name)

    def copy(self) -> State:
        """An independent copy (DAG infos are shared: they are immutable)."""
        new = State.__new__(State)
        new.inst = self.inst
        new.dags = dict(self.dags)
        new.mapping = {k: v.copy() for k, v in self.mapping.items()}
        for attr in ("m", "S", "Ssrc", "U", "W", "T", "maxw"):
            setattr(new, attr, getattr(self, attr).copy())
        new.residents = [dict(r) for r in self.residents]
        new.sources_on = [set(s) for s in self.sources_on]
        new._L = dict(self._L)
        new._sum = self._sum
        new.memo = dict(self.memo)
        new._dirty = set(self._dirty)
        return new

    def assignment(self) -> dict[str, dict[str, str]]:
        """The mapping by name: dag → vertex → resource (placed vertices only)."""
        names = [r.name for r in self.inst.resources]
        return {
            d: {info.names[v]: names[p] for v, p in enumerate(self.mapping[d]) if p >= 0}
            for d, info in self.dags.items()
        }

    # --- placing and removing one vertex ----------------------------------------------------
    def _traffic(self, dag: str, v: int, p: int, sign: float) -> None:
        info, mu = self.dags[dag], self.mapping[dag]
        for u in info.parents[v]:
            q = mu[u]
            if q >= 0 and q != p:
                b = sign * info.omega_out[u] * info.delta[u]
                self.T[p] += b
                self.T[q] += b
        for c in info.children[v]:
            q = mu[c]
            if q >= 0 and q != p:
                b = sign * info.omega_out[v] * info.delta[v]
                self.T[p] += b
                self.T[q] += b

    def add(self, dag: str, v: int, p: int) -> None:
        """Place vertex ``v`` of ``dag`` on resource ``p`` (it must not be placed)."""
        info, mu = self.dags[dag], self.mapping[dag]
        assert mu[v] < 0, f"{dag}:{info.names[v]} is already placed"
        mu[v] = p
        self._traffic(dag, v, p, +1.0)
        lam = self.inst.service_s[info.kind[v], p]
        if info.is_source[v] and self.inst.options.sources_free:
            self.Ssrc[p] += lam
            self.sources_on[p].add((dag, v))
        else:
            w = info.omega_in[v]
            self.m[p] += 1
            self.S[p] += lam
            self.U[p] += w * lam
            self.W[p] += w * self.inst.energy_j[info.kind[v], p]
            self.residents[p][(dag, v)] = w
            if w > self.maxw[p]:
                self.maxw[p] = w
        self._touch(dag, p)

    def remove(self, dag: str, v: int) -> int:
        """Unplace vertex ``v``; returns the resource it was on."""
        info, mu = self.dags[dag], self.mapping[dag]
        p = int(mu[v])
        assert p >= 0, f"{dag}:{info.names[v]} is not placed"
        self._traffic(dag, v, p, -1.0)
        mu[v] = -1
        lam = self.inst.service_s[info.kind[v], p]
        if (dag, v) in self.sources_on[p]:
            self.Ssrc[p] -= lam
            self.sources_on[p].discard((dag, v))
        else:
            w = self.residents[p].pop((dag, v))
            self.m[p] -= 1
            self.S[p] -= lam
            self.U[p] -= w * lam
            self.W[p] -= w * self.inst.energy_j[info.kind[v], p]
            if self.m[p] == 0:
                self.S[p] = self.U[p] = self.W[p] = self.maxw[p] = 0.0
            elif w >= self.maxw[p]:
                self.maxw[p] = max(self.residents[p].values())
        if not self.residents[p] and not self.sources_on[p]:
            self.T[p] = 0.0  # nothing left to send or receive (drops rounding residue)
        self._touch(dag, p)
        return p

    def move(self, dag: str, v: int, p: int) -> int:
        """Move vertex ``v`` to ``p``; returns its previous resource."""
        old = self.remove(dag, v)
        self.add(dag, v, p)
        return old

    def _touch(self, dag: str, p: int) -> None:
        self._dirty.add(dag)
        if self.inst.options.latency_mode == "interfered":
            self._dirty.update(d for d, _ in self.residents[p])
            self._dirty.update(d for d, _ in self.sources_on[p])

    # --- constraints ------------------------------------------------------------------------
    def pi(self, p: int, m: int | None = None) -> float:
        """π_p(m) for the current (or a given) m."""
        m = int(self.m[p]) if m is None else m
        return float(self.inst.slope[p]) * max(m - 1, 0)

    def capacity_ok(self, p: int) -> bool:
        """E6 on resource p in the configured capacity mode."""
        m = int(self.m[p])
        if m == 0:
            return True
        f = 1.0 + self.pi(p)
        if self.inst.options.capacity_mode == "strict":
            return self.maxw[p] * f * self.S[p] <= 1.0 - EPS_CAP
        return self.U[p] * f <= 1.0 - EPS_CAP

    def battery_load_w(self, p: int) -> float:
        """κ + Σ ω ε + e_net·traffic: the device's mean power draw (W)."""
        return float(self.inst.idle_w[p] + self.W[p] + self.inst.net_j_per_byte[p] * self.T[p])

    def battery_ok(self, p: int) -> bool:
        """E7 on resource p (always true on a VM)."""
        if not self.inst.is_edge[p]:
            return True
        return self.battery_load_w(p) <= self.inst.power_budget_w[p] * (1 + TOL) + TOL

    def resource_ok(self, p: int) -> bool:
        return self.capacity_ok(p) and self.battery_ok(p)

    def violations(self) -> list[str]:
        """Every E6/E7 violation on a resource that hosts something, by name."""
        found = []
        for p, r in enumerate(self.inst.resources):
            if self.m[p] and not self.capacity_ok(p):
                found.append(f"E6 capacity on {r.name}")
            if not self.battery_ok(p):  # E7 holds on an idle device too
                found.append(f"E7 battery on {r.name}")
        return found

    # --- latency and makespan ---------------------------------------------------------------
    def lat(self, info: DagInfo, v: int, p: int) -> float:
        """Compute latency of ``v`` on ``p``: λ, times (1+π(m_p)) in interfered mode."""
        lam = float(self.inst.service_s[info.kind[v], p])
        if self.inst.options.latency_mode == "interfered":
            lam *= 1.0 + self.pi(p)
        return lam

    def vectors(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(compute latency λ of every vertex, network cost l + δ/β of every edge in
        :attr:`DagInfo.esrc` order) under the current mapping."""
        info, mu = self.dags[name], self.mapping[name]
        inst = self.inst
        lat = inst.service_s[info.kind, mu]
        if inst.options.latency_mode == "interfered":
            lat = lat * (1.0 + inst.slope[mu] * np.maximum(self.m[mu] - 1, 0))
        ps, pd = mu[info.esrc], mu[info.edst]
        link = inst.latency_s[ps, pd] + info.delta[info.esrc] * inst.inv_bandwidth[ps, pd]
        return lat, link

    def arrivals(self, name: str) -> tuple[list[float], float, int]:
        """Arrival time A_v of every vertex, the makespan and the sink that attains it."""
        info = self.dags[name]
        lat, link = self.vectors(name)
        latl, linkl = lat.tolist(), link.tolist()
        A = [0.0] * info.n
        for e, (s, d) in enumerate(zip(info.esrc.tolist(), info.edst.tolist(), strict=True)):
            a = A[s] + latl[s] + linkl[e]
            if a > A[d]:
                A[d] = a
        include = self.inst.options.include_sink_compute
        best, arg = -1.0, -1
        for k in np.flatnonzero(info.is_sink).tolist():
            end = A[k] + latl[k] if include else A[k]
            if end > best:
                best, arg = end, k
        return A, float(best), arg

    def makespan(self, name: str) -> float:
        """L_G (E3) of one DAG, cached until something it depends on changes."""
        if name in self._dirty or name not in self._L:
            new = self.arrivals(name)[1]
            self._sum += new - self._L.get(name, 0.0)
            self._L[name] = new
            self._dirty.discard(name)
        return self._L[name]

    def total(self) -> float:
        """L̂ (E8): the sum of makespans of the active DAGs (kept as a running sum)."""
        for d in list(self._dirty):
            if d in self.dags:
                self.makespan(d)
        self._dirty.clear()
        return self._sum

    def exact_total(self) -> float:
        """L̂ summed afresh (no running-sum rounding)."""
        self.total()
        return math.fsum(self._L[d] for d in self.dags)

    def critical_path(self, name: str) -> list[int]:
        """Vertices of a longest source→sink path, source first (ties: lowest vertex id)."""
        info = self.dags[name]
        lat, link = self.vectors(name)
        A, _, v = self.arrivals(name)
        path = [v]
        while info.parents[v]:
            best, arg = -1.0, -1
            for u in info.parents[v]:
                t = A[u] + lat[u] + link[info.edge_pos[(u, v)]]
                if t > best + 1e-15:
                    best, arg = t, u
            v = arg
            path.append(v)
        return path[::-1]

    def edge_cost(self, info: DagInfo, u: int, w: int) -> float:
        """Network part of edge ⟨u, w⟩: l + δ_u/β (0 when co-located)."""
        mu = self.mapping[info.name]
        pu, pw = mu[u], mu[w]
        return float(self.inst.latency_s[pu, pw] + info.delta[u] * self.inst.inv_bandwidth[pu, pw])

    # --- summaries --------------------------------------------------------------------------
    def utilisation(self, p: int) -> float:
        """Σ ω λ (1+π(m)) on p: the share of its time the resource is busy."""
        return float(self.U[p] * (1.0 + self.pi(p)))

    def metrics(self) -> Metrics:
        inst = self.inst
        used = np.flatnonzero((self.m > 0) | np.array([bool(x) for x in self.sources_on]))
        edges = inst.edge_ids
        load = inst.idle_w[edges] + self.W[edges] + inst.net_j_per_byte[edges] * self.T[edges]
        finite = np.isfinite(inst.battery_j[edges])
        margins = inst.battery_j[edges][finite] - inst.recharge_s[edges][finite] * load[finite]
        util = self.U[used] * (1.0 + inst.slope[used] * np.maximum(self.m[used] - 1, 0))
        return Metrics(
            makespan_sum_s=self.exact_total(),
            makespan_s={d: self.makespan(d) for d in self.dags},
            utilisation={inst.resources[p].name: float(u) for p, u in zip(used, util, strict=True)},
            edge_power_w=float(load.sum()),
            min_battery_margin_j=float(margins.min()) if len(margins) else math.inf,
            active_queries=sum(info.n for info in self.dags.values()),
        )

    def place_all(self, name: str, resources: Iterable[int] | Mapping[int, int]) -> None:
        """Place every vertex of ``name`` at once (``resources[v]`` for vertex v)."""
        items = resources.items() if isinstance(resources, Mapping) else enumerate(resources)
        for v, p in items:
            self.add(name, v, int(p))
