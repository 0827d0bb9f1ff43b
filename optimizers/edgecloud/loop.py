"""The control loop (seed 004, digest §4): one event per control interval.

Per interval: place the arriving DAG (TopSet, TopSet/P or GAI) or delete the departing DAG's
queries (nothing else moves); GAG instead re-places every active DAG from scratch on every
arrival and departure. Then rebalance (never for GAG), and record planning time φ_t,
migrations ρ̄_t (E9), the maximum stabilisation time ψ̄_t (E10–E12), L̂ (E8), utilisation
U^t, and the edge devices' power and smallest battery margin.

A battery that runs down (:meth:`Controller.battery`) lowers an edge device's capacity C;
queries are evicted from it (largest energy draw first) until E7 holds, re-placed one by one
on the valid resource that keeps their DAG's makespan smallest, and the rebalancing strategy
runs as after an arrival.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from .evaluate import State
from .generator import Event
from .genetic import GaParams, gag_replan, gai_place
from .model import Dag, Instance, compile_dag
from .rebalance import STRATEGIES, place_vertex, rebalance
from .topset import PlaceResult, topset_place

__all__ = ["METHODS", "Controller", "IntervalRecord"]

METHODS = ("topset", "topset-p", "gai", "gag")


@dataclass
class IntervalRecord:
    """What happened in one control interval."""

    t: int
    event: str
    dag: str
    ok: bool
    reason: str = ""
    planning_s: float = 0.0
    place_s: float = 0.0
    rebalance_s: float = 0.0
    migrations: int = 0
    rebalance_moves: int = 0
    stabilisation_s: float = 0.0
    makespan_sum_s: float = 0.0
    makespan_before_rebalance_s: float = 0.0
    active_dags: int = 0
    active_queries: int = 0
    utilisation: float = 0.0
    max_resource_utilisation: float = 0.0
    edge_power_w: float = 0.0
    min_battery_margin_j: float = math.inf
    ga_generations: int | None = None
    extra: dict[str, float] = field(default_factory=dict)


class Controller:
    """Runs one placement method (and rebalancing strategy) over a sequence of events."""

    def __init__(
        self,
        inst: Instance,
        method: str,
        rebalance: str = "none",
        *,
        ga: GaParams | None = None,
        seed: int = 0,
        eta_s: float = 1.0,
    ) -> None:
        if method not in METHODS:
            raise ValueError(f"method: unknown {method!r} (known: {list(METHODS)})")
        if rebalance not in STRATEGIES:
            raise ValueError(f"rebalance: unknown {rebalance!r} (known: {list(STRATEGIES)})")
        if method == "gag" and rebalance != "none":
            raise ValueError("rebalance: GAG re-places every DAG itself; use rebalance 'none'")
        self.inst = inst
        self.method = method
        self.strategy = rebalance
        self.ga = ga if ga is not None else GaParams()
        self.seed = seed
        self.eta_s = eta_s
        self.state = State(inst)
        self.t = 0
        self.rejected: list[str] = []
        self.dags: dict[str, Dag] = {}

    # --- events ----------------------------------------------------------------------------
    def step(self, event: Event) -> IntervalRecord:
        """Handle one arrival or departure."""
        if event.kind == "add":
            return self.arrive(event.dag)
        return self.depart(event.name)

    def arrive(self, dag: Dag) -> IntervalRecord:
        start = time.perf_counter()
        before = self._snapshot()
        rec = IntervalRecord(self.t, "add", dag.name, True)
        info = compile_dag(dag, self.inst)
        if self.method in ("topset", "topset-p"):
            res = topset_place(self.state, info, penalty=self.method == "topset-p")
        elif self.method == "gai":
            res, ga = gai_place(self.state, info, self._ga())
            rec.ga_generations = ga.generations
        else:
            res, gens = self._gag([*self.state.dags.values(), info])
            rec.ga_generations = gens
        rec.place_s = time.perf_counter() - start
        if res.ok:
            self.dags[dag.name] = dag
        else:
            rec.ok, rec.reason = False, res.reason
            self.rejected.append(dag.name)
        return self._finish(rec, before, start)

    def depart(self, name: str) -> IntervalRecord:
        start = time.perf_counter()
        before = self._snapshot()
        rec = IntervalRecord(self.t, "remove", name, True)
        if name in self.state.dags:
            self.state.unregister(name)
            self.dags.pop(name, None)
            if self.method == "gag" and self.state.dags:
                res, gens = self._gag(list(self.state.dags.values()))
                rec.ga_generations = gens
                if not res.ok:
                    rec.reason = res.reason  # the previous mapping minus the DAG stays
        else:
            rec.reason = f"dag {name} is not active (it was rejected on arrival)"
        rec.place_s = time.perf_counter() - start
        return self._finish(rec, before, start)

    def battery(self, resource: str, battery_j: float) -> IntervalRecord:
        """Edge device ``resource`` now holds ``battery_j``: evict, re-place, rebalance."""
        start = time.perf_counter()
        before = self._snapshot()
        self.inst = self.inst.with_battery(resource, battery_j)
        self.state.inst = self.inst
        rec = IntervalRecord(self.t, "battery", resource, True)
        p = self.inst.index[resource]
        evicted: list[tuple[str, int]] = []
        while not self.state.battery_ok(p) and self.state.residents[p]:
            key = max(self.state.residents[p], key=lambda k: (
                self.state.dags[k[0]].omega_in[k[1]]
                * self.inst.energy_j[self.state.dags[k[0]].kind[k[1]], p], k))
            self.state.remove(*key)
            evicted.append(key)
        evicted.sort(key=lambda k: (k[0], int(self.state.dags[k[0]].depth[k[1]]), k[1]))
        for d, v in evicted:
            if d not in self.state.dags:
                continue
            if not place_vertex(self.state, d, v, avoid=p):
                rec.ok = False
                rec.reason += (f"{'; ' if rec.reason else ''}dag {d} dropped: vertex "
                               f"{self.state.dags[d].names[v]} fits nowhere after eviction")
                self.state.unregister(d)
                self.dags.pop(d, None)
                self.rejected.append(d)
        rec.extra["evicted"] = float(len(evicted))
        rec.place_s = time.perf_counter() - start
        return self._finish(rec, before, start)

    # --- helpers -----------------------------------------------------------------------------
    def _ga(self) -> GaParams:
        from dataclasses import replace

        return replace(self.ga, seed=self.seed * 100_003 + self.t)

    def _gag(self, infos) -> tuple[PlaceResult, int]:
        new, ga = gag_replan(self.inst, infos, self._ga())
        name = infos[-1].name if infos else ""
        if new is None:
            return PlaceResult(False, name, f"GAG found no valid placement of {len(infos)} DAGs "
                               f"in {ga.generations} generations (best chromosome breaks "
                               f"{ga.best_violations} resource constraints; stopped: "
                               f"{ga.stopped})"), ga.generations
        self.state = new
        return PlaceResult(True, name), ga.generations

    def _snapshot(self) -> dict[str, np.ndarray]:
        return {d: mu.copy() for d, mu in self.state.mapping.items()}

    def _finish(self, rec: IntervalRecord, before: dict[str, np.ndarray], start: float
                ) -> IntervalRecord:
        rec.makespan_before_rebalance_s = self.state.total()
        if self.strategy != "none":
            rb = rebalance(self.state, self.strategy)
            rec.rebalance_s = rb.time_s
            rec.rebalance_moves = len(rb.moves)
        rec.planning_s = time.perf_counter() - start
        moved, psi = 0, 0.0
        for d, old in before.items():
            if d not in self.state.mapping:
                continue
            info = self.state.dags[d]
            new = self.state.mapping[d]
            for v in np.flatnonzero((old != new) & (old >= 0)):
                moved += 1
                w = info.omega_in[v]
                lam = self.inst.service_s[info.kind[v], new[v]]
                psi = max(psi, w * self.eta_s / (1 / lam - w) if lam > 0 else 0.0)
        rec.migrations, rec.stabilisation_s = moved, psi
        m = self.state.metrics()
        rec.makespan_sum_s = m.makespan_sum_s
        rec.active_dags = len(self.state.dags)
        rec.active_queries = m.active_queries
        rec.utilisation = m.active_queries / self.inst.n_resources
        rec.max_resource_utilisation = max(m.utilisation.values(), default=0.0)
        rec.edge_power_w = m.edge_power_w
        rec.min_battery_margin_j = m.min_battery_margin_j
        self.t += 1
        return rec
