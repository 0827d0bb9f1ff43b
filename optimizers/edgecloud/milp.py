"""Exact MILP of the seed 004 placement problem on SCIP, for small instances (digest §9).

The paper has no exact model; this one measures how far the heuristics are from optimal.

Variables (named): ``x[k|v|r]`` ∈ {0,1} (vertex v of DAG k on resource r, only where E4 and
the pins allow it); ``a[k|v]`` ≥ 0 its arrival time; ``c[k|u>w]`` ≥ 0 the network cost of edge
⟨u, w⟩; ``T[k]`` ≥ 0 the makespan; ``z[r|m]`` ∈ {0,1}, one-hot count m of non-source queries
on r; ``y[k|u>w|r]`` ∈ [0,1] (transfer across r's boundary, only when bytes cost energy) and
``w[k|v|r|m]`` (interfered latency mode only).

* ``assign``: Σ_r x = 1.
* ``net``: c_e ≥ Σ_s (l_rs + δ_u/β_rs) x_{w,s} − M_r (1 − x_{u,r}) for each r (minimisation
  makes c_e exact). ``prec``: a_w ≥ a_u + λ_u + c_e. ``span``: T_k ≥ a_s (+ λ_s).
* ``count``/``onehot``: Σ_m z = 1, Σ_m m·z = background + Σ x over non-source queries.
* ``cap`` (E6 strict, A2): for each non-source i, Σ_j λ_j^r x_j ≤ Σ_m z_{r,m}(1−1e-9)/
  (ω_i(1+π_r(m))) + M(1 − x_{i,r}); utilisation mode: Σ ω_j λ_j x_j ≤ Σ_m z (1−1e-9)/(1+π(m)).
* ``bat`` (E7): κ + Σ ω ε x + e_net·traffic ≤ C/τ on each edge device.
* ``migr`` (optional): at most K vertices leave their current resource.

Objective: min Σ_k T_k (E8). A ``background`` state adds the load of queries that stay (their
makespans are not modelled, so it is refused in interfered latency mode).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from pyscipopt import Model, quicksum

from .evaluate import State
from .model import EPS_CAP, DagInfo, Instance

__all__ = ["MilpLimits", "MilpResult", "MilpVars", "build_model", "extract", "solve", "solve_milp"]


@dataclass(frozen=True)
class MilpLimits:
    """Wall time (s), relative gap and SCIP's feasibility tolerance."""

    time_limit_s: float = 60.0
    gap: float = 0.0
    feastol: float = 1e-9


@dataclass
class MilpVars:
    """Handles on the model's variables."""

    infos: list[DagInfo]
    x: dict[tuple[str, int], dict[int, object]]
    a: dict[tuple[str, int], object]
    T: dict[str, object]
    n_vars: int
    n_conss: int
    build_s: float


@dataclass(frozen=True)
class MilpResult:
    """SCIP's answer in streamplan's vocabulary, with the mapping when there is one."""

    status: str
    scip_status: str
    objective_s: float | None
    bound_s: float | None
    gap: float | None
    time_s: float
    mapping: dict[str, np.ndarray] | None
    n_vars: int = 0
    n_conss: int = 0
    version: str = ""


def build_model(
    inst: Instance,
    infos: Sequence[DagInfo],
    *,
    background: State | None = None,
    current: Mapping[str, np.ndarray] | None = None,
    migration_budget: int | None = None,
) -> tuple[Model, MilpVars]:
    """The MILP of ``infos`` on ``inst`` (see the module docstring)."""
    start = time.perf_counter()
    opts = inst.options
    interfered = opts.latency_mode == "interfered"
    if interfered and background is not None and background.dags:
        raise ValueError("milp: interfered latency mode needs an empty background (the "
                         "background DAGs' makespans are not modelled)")
    R = inst.n_resources
    bg = {a: (getattr(background, a) if background is not None else np.zeros(R))
          for a in ("m", "S", "U", "W", "T", "maxw")}
    model = Model("edgecloud")
    model.hideOutput()
    x: dict[tuple[str, int], dict[int, object]] = {}
    busy_on: dict[int, list[tuple[str, int]]] = {r: [] for r in range(R)}
    any_on: dict[int, list[tuple[str, int]]] = {r: [] for r in range(R)}
    by_name = {i.name: i for i in infos}
    for info in infos:
        for v in range(info.n):
            key = (info.name, v)
            x[key] = {}
            for r in info.allowed[v]:
                r = int(r)
                x[key][r] = model.addVar(vtype="B", name=f"x[{info.name}|{info.names[v]}|{r}]")
                any_on[r].append(key)
                if not (info.is_source[v] and opts.sources_free):
                    busy_on[r].append(key)
            model.addCons(quicksum(x[key].values()) == 1, name=f"assign[{info.name}|{v}]")

    def lam(key: tuple[str, int], r: int) -> float:
        info = by_name[key[0]]
        return float(inst.service_s[info.kind[key[1]], r])

    def omega(key: tuple[str, int]) -> float:
        return float(by_name[key[0]].omega_in[key[1]])

    # --- co-location count z and capacity (E6) ---------------------------------------------
    z: dict[int, dict[int, object]] = {}
    for r in range(R):
        J = busy_on[r]
        m0 = int(bg["m"][r])
        if not J:
            continue
        z[r] = {m: model.addVar(vtype="B", name=f"z[{r}|{m}]") for m in range(m0, m0 + len(J) + 1)}
        model.addCons(quicksum(z[r].values()) == 1, name=f"onehot[{r}]")
        model.addCons(quicksum(m * zv for m, zv in z[r].items())
                      == m0 + quicksum(x[j][r] for j in J), name=f"count[{r}]")
        pi = lambda m, r=r: float(inst.slope[r]) * max(m - 1, 0)  # noqa: E731
        if opts.capacity_mode == "strict":
            load = bg["S"][r] + quicksum(lam(j, r) * x[j][r] for j in J)
            big = bg["S"][r] + sum(lam(j, r) for j in J)
            for i in J:
                w = omega(i)
                if w <= 0:
                    continue
                rhs = quicksum(
                    (big if m == 0 else (1 - EPS_CAP) / (w * (1 + pi(m)))) * zv
                    for m, zv in z[r].items())
                model.addCons(load <= rhs + big * (1 - x[i][r]), name=f"cap[{r}|{i[0]}|{i[1]}]")
            if m0 > 0 and bg["maxw"][r] > 0:
                w = float(bg["maxw"][r])
                model.addCons(load <= quicksum((1 - EPS_CAP) / (w * (1 + pi(m))) * zv
                                               for m, zv in z[r].items()), name=f"capbg[{r}]")
        else:
            util = bg["U"][r] + quicksum(omega(j) * lam(j, r) * x[j][r] for j in J)
            model.addCons(util <= quicksum((1 - EPS_CAP) / (1 + pi(m)) * zv
                                           for m, zv in z[r].items()), name=f"cap[{r}]")

    # --- battery (E7) ------------------------------------------------------------------------
    for r in range(R):
        if not inst.is_edge[r] or not math.isfinite(inst.power_budget_w[r]):
            continue
        terms = [omega(j) * float(inst.energy_j[by_name[j[0]].kind[j[1]], r]) * x[j][r]
                 for j in busy_on[r]]
        e = float(inst.net_j_per_byte[r])
        if e > 0:
            for info in infos:
                for u, w in info.edges:
                    b = float(info.omega_out[u] * info.delta[u])
                    xu = x[(info.name, u)].get(r)
                    xw = x[(info.name, w)].get(r)
                    if b <= 0 or (xu is None and xw is None):
                        continue
                    y = model.addVar(lb=0, ub=1, name=f"y[{info.name}|{u}>{w}|{r}]")
                    xu = xu if xu is not None else 0
                    xw = xw if xw is not None else 0
                    model.addCons(y >= xu - xw)
                    model.addCons(y >= xw - xu)
                    terms.append(e * b * y)
        model.addCons(inst.idle_w[r] + bg["W"][r] + e * bg["T"][r] + quicksum(terms)
                      <= float(inst.power_budget_w[r]), name=f"bat[{r}]")

    # --- latency, precedence, makespan -------------------------------------------------------
    a: dict[tuple[str, int], object] = {}
    T: dict[str, object] = {}

    def latency_expr(key: tuple[str, int]):
        info = by_name[key[0]]
        if not interfered:
            return quicksum(lam(key, r) * xv for r, xv in x[key].items())
        terms = []
        for r, xv in x[key].items():
            if r not in z:  # nothing busy can join r: m is the background count
                terms.append(lam(key, r) * (1 + float(inst.slope[r]) * max(int(bg["m"][r]) - 1, 0))
                             * xv)
                continue
            for m, zv in z[r].items():
                wv = model.addVar(lb=0, ub=1, name=f"w[{info.name}|{key[1]}|{r}|{m}]")
                model.addCons(wv >= xv + zv - 1)
                terms.append(lam(key, r) * (1 + float(inst.slope[r]) * max(m - 1, 0)) * wv)
        return quicksum(terms)

    lat = {}
    for info in infos:
        for v in range(info.n):
            key = (info.name, v)
            a[key] = model.addVar(lb=0, name=f"a[{info.name}|{info.names[v]}]")
            lat[key] = latency_expr(key)
        for u, w in info.edges:
            ku, kw = (info.name, u), (info.name, w)
            c = model.addVar(lb=0, name=f"c[{info.name}|{info.names[u]}>{info.names[w]}]")
            for r, xu in x[ku].items():
                costs = {s: (0.0 if s == r else float(inst.latency_s[r, s]
                                                       + info.delta[u] * inst.inv_bandwidth[r, s]))
                         for s in x[kw]}
                big = max(costs.values())
                if big <= 0:
                    continue
                model.addCons(c >= quicksum(costs[s] * x[kw][s] for s in x[kw]) - big * (1 - xu),
                              name=f"net[{info.name}|{u}>{w}|{r}]")
            model.addCons(a[kw] >= a[ku] + lat[ku] + c, name=f"prec[{info.name}|{u}>{w}]")
        T[info.name] = model.addVar(lb=0, name=f"T[{info.name}]")
        for s in np.flatnonzero(info.is_sink):
            ks = (info.name, int(s))
            extra = lat[ks] if opts.include_sink_compute else 0
            model.addCons(T[info.name] >= a[ks] + extra, name=f"span[{info.name}|{s}]")
    if current is not None and migration_budget is not None:
        stay = [x[(d, v)][int(p)] for d, mu in current.items() if d in by_name
                for v, p in enumerate(mu) if p >= 0 and int(p) in x[(d, v)]]
        moved_out = sum(1 for d, mu in current.items() if d in by_name
                        for v, p in enumerate(mu) if p >= 0 and int(p) not in x[(d, v)])
        model.addCons(len(stay) + moved_out - quicksum(stay) <= migration_budget, name="migr")
    model.setObjective(quicksum(T.values()), "minimize")
    handles = MilpVars(list(infos), x, a, T, model.getNVars(), model.getNConss(),
                       time.perf_counter() - start)
    return model, handles


def solve(model: Model, limits: MilpLimits = MilpLimits()) -> tuple[str, str, float]:
    """Optimise; returns (status, SCIP status, elapsed s)."""
    model.setParam("limits/time", limits.time_limit_s)
    model.setParam("limits/gap", limits.gap)
    model.setParam("numerics/feastol", limits.feastol)
    start = time.perf_counter()
    model.optimize()
    elapsed = time.perf_counter() - start
    scip = model.getStatus()
    if scip == "optimal":
        status = "optimal"
    elif model.getNSols() > 0:
        status = "feasible"
    elif scip in ("infeasible", "inforunbd"):
        status = "infeasible"
    else:
        status = "error"
    return status, scip, elapsed


def extract(model: Model, handles: MilpVars) -> dict[str, np.ndarray]:
    """The chosen resource of every vertex in the best solution."""
    sol = model.getBestSol()
    out = {}
    for info in handles.infos:
        mu = np.full(info.n, -1, dtype=int)
        for v in range(info.n):
            vals = {r: model.getSolVal(sol, xv) for r, xv in handles.x[(info.name, v)].items()}
            mu[v] = max(vals, key=vals.get)
        out[info.name] = mu
    return out


def solve_milp(
    inst: Instance,
    infos: Sequence[DagInfo],
    limits: MilpLimits = MilpLimits(),
    **build_kwargs,
) -> MilpResult:
    """Build, solve and read back in one call."""
    model, handles = build_model(inst, infos, **build_kwargs)
    status, scip, elapsed = solve(model, limits)
    has = model.getNSols() > 0
    return MilpResult(
        status=status,
        scip_status=scip,
        objective_s=model.getObjVal() if has else None,
        bound_s=model.getDualbound() if scip != "infeasible" else None,
        gap=model.getGap() if has else None,
        time_s=elapsed + handles.build_s,
        mapping=extract(model, handles) if has else None,
        n_vars=handles.n_vars,
        n_conss=handles.n_conss,
        version=str(model.version()),
    )
