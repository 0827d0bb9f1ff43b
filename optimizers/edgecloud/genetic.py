"""Genetic placement (seed 004, §4.2, after the paper's reference [10]): GAI and GAG.

A chromosome has one gene per query, valued in the resources allowed to it: sources draw from
the edge devices (or their pin), sinks from the VMs, so E4 holds by construction. A whole
population is evaluated at once with numpy: per-resource aggregates by ``bincount`` over
(individual, resource), E6/E7 violations counted on the resources the genes touch, and
makespans by a longest-path pass over the level sets of all DAGs together. Fitness is
L̂ + 10⁶·(number of violated resource constraints); the best *valid* chromosome seen is
kept.

Constants (digest §4, our choice where the paper is silent): random initial population of
100; at most 500 generations; tournament of 3; one-point crossover with p = 0.9; per-gene
mutation with p = 1/n; elitism 2; from generation 20 on, stop once the last improvement of
the best fitness is at or before generation g/2. A wall-clock limit bounds every run.

* **GAI** places an arriving DAG against the capacities left by the placed queries (which
  stay). Its fitness is the new DAG's makespan; in interfered latency mode the other DAGs'
  slow-down is not included (a deviation from digest §4, which the benchmark does not use).
* **GAG** re-places every active DAG on empty resources, ignoring the previous mapping; its
  fitness is the sum of makespans (A6), which joining the DAGs through a zero-cost dummy
  source and sink and summing per-DAG makespans amounts to.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .evaluate import TOL, State
from .model import EPS_CAP, Dag, DagInfo, Instance, compile_dag
from .topset import PlaceResult

__all__ = ["GaParams", "GaResult", "Problem", "gag_replan", "gai_place", "run_ga"]


@dataclass(frozen=True)
class GaParams:
    """GA constants (digest §4)."""

    population: int = 100
    generations: int = 500
    tournament: int = 3
    crossover: float = 0.9
    mutation: float | None = None  # None: 1/n
    elitism: int = 2
    min_generations: int = 20
    time_limit_s: float = math.inf
    penalty: float = 1e6
    seed: int = 0

    def __post_init__(self) -> None:
        checks = {
            "population": self.population >= 2,
            "generations": self.generations >= 0,
            "tournament": self.tournament >= 1,
            "crossover": 0 <= self.crossover <= 1,
            "mutation": self.mutation is None or 0 <= self.mutation <= 1,
            "elitism": 0 <= self.elitism < self.population,
            "time_limit_s": self.time_limit_s > 0,
        }
        for name, ok in checks.items():
            if not ok:
                raise ValueError(f"ga.{name}: invalid value {getattr(self, name)!r}")


@dataclass(frozen=True)
class GaResult:
    """Best valid chromosome (resource index per gene) or None, and run statistics."""

    best: np.ndarray | None
    objective_s: float
    best_violations: int
    generations: int
    evaluations: int
    time_s: float
    stopped: str


class Problem:
    """Genes are the vertices of ``infos``; ``background`` supplies the load already placed
    (None: empty resources). Vertices of ``infos`` must not be placed in ``background``."""

    def __init__(self, inst: Instance, infos: Sequence[DagInfo], background: State | None):
        self.inst = inst
        self.infos = list(infos)
        offsets = np.cumsum([0] + [i.n for i in self.infos])
        self.offsets = offsets
        n = int(offsets[-1])
        self.n = n
        def cat(attr: str) -> np.ndarray:
            return (np.concatenate([getattr(i, attr) for i in self.infos]) if self.infos
                    else np.zeros(0))

        self.kind = cat("kind").astype(int)
        self.omega_in = cat("omega_in")
        self.omega_out = cat("omega_out")
        self.delta = cat("delta")
        self.is_source = cat("is_source").astype(bool)
        self.is_sink = cat("is_sink").astype(bool)
        self.free = self.is_source & inst.options.sources_free
        self.busy = np.flatnonzero(~self.free)
        depth = cat("depth").astype(int)
        self.choices = [a for i in self.infos for a in i.allowed]
        src, dst = [], []
        for k, info in enumerate(self.infos):
            for u, w in info.edges:
                src.append(offsets[k] + u)
                dst.append(offsets[k] + w)
        src_a, dst_a = np.asarray(src, dtype=int), np.asarray(dst, dtype=int)
        order = np.lexsort((dst_a, depth[dst_a])) if len(dst_a) else np.zeros(0, dtype=int)
        self.src, self.dst = src_a[order], dst_a[order]
        self.levels = []
        for d in range(1, int(depth.max(initial=0)) + 1):
            sel = np.flatnonzero(depth[self.dst] == d)
            if not len(sel):
                continue
            dsts, starts = np.unique(self.dst[sel], return_index=True)
            self.levels.append((sel, dsts, starts))
        sinks = np.flatnonzero(self.is_sink)
        dag_of = np.repeat(np.arange(len(self.infos)), np.diff(offsets))
        self.sinks = sinks
        self.sink_starts = np.unique(dag_of[sinks], return_index=True)[1]
        R = inst.n_resources
        bg = background
        self.bg = {
            attr: (getattr(bg, attr).astype(float) if bg is not None else np.zeros(R))
            for attr in ("m", "S", "U", "W", "T", "maxw")
        }
        self.net = bool(inst.net_j_per_byte.any())

    def random(self, rng: np.random.Generator, size: int) -> np.ndarray:
        X = np.empty((size, self.n), dtype=int)
        for g, ch in enumerate(self.choices):
            X[:, g] = ch[rng.integers(len(ch), size=size)]
        return X

    def evaluate(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(L̂ of the genes' DAGs, number of violated resource constraints) per individual."""
        inst = self.inst
        P, R = X.shape[0], inst.n_resources
        lam = inst.service_s[self.kind[None, :], X]
        flat = (np.arange(P)[:, None] * R + X)
        fb = flat[:, self.busy].ravel()
        w = np.broadcast_to(self.omega_in[self.busy], (P, len(self.busy))).ravel()
        lb = lam[:, self.busy].ravel()
        size = P * R
        m_new = np.bincount(fb, minlength=size).reshape(P, R)
        S = np.bincount(fb, weights=lb, minlength=size).reshape(P, R) + self.bg["S"]
        M = m_new + self.bg["m"]
        f = 1.0 + inst.slope * np.maximum(M - 1, 0)
        touched = m_new > 0
        if inst.options.capacity_mode == "strict":
            mx = np.zeros(size)
            np.maximum.at(mx, fb, w)
            mx = np.maximum(mx.reshape(P, R), self.bg["maxw"])
            bad6 = (M > 0) & (mx * f * S > 1.0 - EPS_CAP)
        else:
            U = np.bincount(fb, weights=w * lb, minlength=size).reshape(P, R) + self.bg["U"]
            bad6 = (M > 0) & (U * f > 1.0 - EPS_CAP)
        eps = inst.energy_j[self.kind[None, self.busy], X[:, self.busy]].ravel()
        Wt = np.bincount(fb, weights=w * eps, minlength=size).reshape(P, R) + self.bg["W"]
        load = inst.idle_w + Wt
        if self.net and len(self.src):
            xs, xd = X[:, self.src], X[:, self.dst]
            b = (self.omega_out[self.src] * self.delta[self.src])[None, :] * (xs != xd)
            T = (np.bincount((flat[:, self.src]).ravel(), weights=b.ravel(), minlength=size)
                 + np.bincount((flat[:, self.dst]).ravel(), weights=b.ravel(), minlength=size)
                 ).reshape(P, R)
            touched = touched | (T > 0)
            load = load + inst.net_j_per_byte * (T + self.bg["T"])
        bad7 = inst.is_edge & (load > inst.power_budget_w * (1 + TOL) + TOL)
        nviol = (bad6 & touched).sum(axis=1) + (bad7 & touched).sum(axis=1)
        # makespans: longest paths level by level over all DAGs at once
        if inst.options.latency_mode == "interfered":
            Mx = np.take_along_axis(M, X, axis=1)
            lat = lam * (1.0 + inst.slope[X] * np.maximum(Mx - 1, 0))
        else:
            lat = lam
        A = np.zeros((P, self.n))
        out = lat.copy()
        if len(self.src):
            xs, xd = X[:, self.src], X[:, self.dst]
            link = inst.latency_s[xs, xd] + self.delta[self.src] * inst.inv_bandwidth[xs, xd]
            for sel, dsts, starts in self.levels:
                vals = out[:, self.src[sel]] + link[:, sel]
                red = np.maximum.reduceat(vals, starts, axis=1)
                A[:, dsts] = red
                out[:, dsts] = red + lat[:, dsts]
        ends = out if inst.options.include_sink_compute else A
        per_dag = np.maximum.reduceat(ends[:, self.sinks], self.sink_starts, axis=1)
        return per_dag.sum(axis=1), nviol


def run_ga(problem: Problem, params: GaParams) -> GaResult:
    """Evolve placements for ``problem``; see the module docstring for the operators."""
    start = time.perf_counter()
    rng = np.random.default_rng(params.seed)
    n, P = problem.n, params.population
    pm = params.mutation if params.mutation is not None else 1.0 / max(n, 1)
    pop = problem.random(rng, P)
    L, nv = problem.evaluate(pop)
    fit = L + params.penalty * nv
    evaluations = P
    best_fit = float(fit.min())
    best_valid, best_valid_L = None, math.inf
    best_viol = int(nv.min())

    def keep_valid(pop, L, nv):
        nonlocal best_valid, best_valid_L
        ok = np.flatnonzero(nv == 0)
        if len(ok):
            i = ok[np.argmin(L[ok])]
            if L[i] < best_valid_L - 1e-15:
                best_valid, best_valid_L = pop[i].copy(), float(L[i])

    keep_valid(pop, L, nv)
    last_improve, g, stopped = 0, 0, "generations"
    k = P - params.elitism
    while g < params.generations:
        if time.perf_counter() - start > params.time_limit_s:
            stopped = "time"
            break
        if g >= params.min_generations and last_improve <= g / 2:
            stopped = "no improvement"
            break
        g += 1
        elite = pop[np.argsort(fit, kind="stable")[: params.elitism]]
        cand = rng.integers(P, size=(2, k, params.tournament))
        winners = np.take_along_axis(cand, np.argmin(fit[cand], axis=2)[..., None], 2)[..., 0]
        p1, p2 = pop[winners[0]], pop[winners[1]]
        if n > 1:
            cut = rng.integers(1, n, size=k)
            do = rng.random(k) < params.crossover
            second = do[:, None] & (np.arange(n)[None, :] >= cut[:, None])
            children = np.where(second, p2, p1)
        else:
            children = p1.copy()
        rows, cols = np.nonzero(rng.random((k, n)) < pm)
        for c in np.unique(cols):
            r = rows[cols == c]
            ch = problem.choices[c]
            children[r, c] = ch[rng.integers(len(ch), size=len(r))]
        pop = np.concatenate([elite, children])
        L, nv = problem.evaluate(pop)
        fit = L + params.penalty * nv
        evaluations += P
        keep_valid(pop, L, nv)
        best_viol = min(best_viol, int(nv.min()))
        if fit.min() < best_fit - 1e-12:
            best_fit, last_improve = float(fit.min()), g
    return GaResult(best_valid, best_valid_L, best_viol, g, evaluations,
                    time.perf_counter() - start, stopped)


def gai_place(state: State, dag: Dag | DagInfo, params: GaParams) -> tuple[PlaceResult, GaResult]:
    """GAI: place an arriving DAG by GA against the remaining capacities."""
    start = time.perf_counter()
    info = dag if isinstance(dag, DagInfo) else compile_dag(dag, state.inst)
    result = run_ga(Problem(state.inst, [info], state), params)
    if result.best is None:
        reason = (f"GAI found no valid placement for dag {info.name} in {result.generations} "
                  f"generations (best chromosome breaks {result.best_violations} resource "
                  f"constraints; stopped: {result.stopped})")
        return PlaceResult(False, info.name, reason, time.perf_counter() - start), result
    state.register(info)
    state.place_all(info.name, result.best)
    return PlaceResult(True, info.name, "", time.perf_counter() - start), result


def gag_replan(
    inst: Instance, infos: Sequence[DagInfo], params: GaParams
) -> tuple[State | None, GaResult]:
    """GAG: every active DAG re-placed from scratch; the new state, or None if no valid one."""
    result = run_ga(Problem(inst, infos, None), params)
    if result.best is None:
        return None, result
    state = State(inst)
    offset = 0
    for info in infos:
        state.register(info)
        state.place_all(info.name, result.best[offset: offset + info.n])
        offset += info.n
    return state, result
