"""The EDRP integer program on PySCIPOpt: build, solve and read back (seed 003, Section 5).

``build_model`` adds named variables ``x[i|U]``, ``y[i>j|U|V]``, ``r``, ``t_D`` and named
constraints ``path[...]`` (13), ``downtime[i]`` (14), ``R_max``/``C_max``/``TD_max`` (15)–(17),
``capacity[u]`` (18), ``assign[i]`` (19), ``out[i>j|U]`` (20) and ``in[i>j|V]`` (21), and the
objective F' (Eq. (12)). ``y`` is continuous in [0, 1] by default: with (19)–(21) and binary x
it equals x_i,U ∧ x_j,V exactly (digest §3), so the optimum is the paper's.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from pyscipopt import SCIP_PARAMSETTING, Expr, Model, Variable, quicksum

from .inputs import EdrpInputs, Multiset
from .space import Space, build_space

__all__ = ["EdrpVars", "Limits", "SolveResult", "build_model", "extract", "solve", "warm_start"]


@dataclass
class EdrpVars:
    """Handles on the model's variables and the space they were built from."""

    space: Space
    x: dict[str, dict[Multiset, Variable]]
    y: dict[tuple[str, str], dict[tuple[Multiset, Multiset], Variable]]
    r: Variable
    t_d: Variable
    n_vars: int
    n_conss: int
    build_s: float


@dataclass(frozen=True)
class Limits:
    """Solver limits: wall time (s), relative gap, memory (MB) and effort switches.

    ``fast_presolve`` uses SCIP's FAST presolving (probing dominates the rEDRP solve time
    otherwise); ``heuristics`` False turns primal heuristics off, sensible once a starting
    solution is known (the LP relaxation is tight on these models).
    """

    time_limit_s: float = 60.0
    gap: float = 0.0
    memory_mb: float = 3000.0
    fast_presolve: bool = True
    heuristics: bool = True


@dataclass(frozen=True)
class SolveResult:
    """What SCIP reported: status in streamplan's vocabulary plus the raw SCIP status."""

    status: str
    scip_status: str
    objective: float | None
    bound: float | None
    gap: float | None
    time_s: float
    bb_nodes: int
    version: str


def _name(ms: Multiset) -> str:
    return "+".join(ms)


def build_model(
    inputs: EdrpInputs,
    *,
    restricted: bool = False,
    prune: bool = True,
    y_binary: bool = False,
) -> tuple[Model, EdrpVars]:
    """Build the EDRP (or rEDRP with ``restricted``) ILP without solving it."""
    start = time.perf_counter()
    space = build_space(inputs, restricted=restricted, prune=prune)
    w, b = inputs.weights, inputs.bounds
    m = Model("rEDRP" if restricted else "EDRP")
    m.hideOutput()

    x = {
        i: {u: m.addVar(f"x[{i}|{_name(u)}]", vtype="B") for u in cands}
        for i, cands in space.choices.items()
    }
    ytype = "B" if y_binary else "C"
    y = {
        (i, j): {
            (u, v): m.addVar(f"y[{i}>{j}|{_name(u)}|{_name(v)}]", vtype=ytype, lb=0, ub=1)
            for (u, v) in pairs
        }
        for (i, j), pairs in space.links.items()
    }
    r = m.addVar("r", lb=0)
    t_d = m.addVar("t_D", lb=0)

    def latency(i: str) -> Expr:  # R_i(x), Eq. (7)
        return quicksum(c.latency_s * x[i][u] for u, c in space.choices[i].items())

    def delay(e: tuple[str, str]) -> Expr:  # D_(i,j)(y), Eq. (7)
        return quicksum(lk.delay_s * y[e][p] for p, lk in space.links[e].items() if lk.delay_s)

    cost = quicksum(  # C(x, y), Eqs. (8)–(9)
        [c.cost * x[i][u] for i, cands in space.choices.items() for u, c in cands.items()]
        + [
            lk.cost * y[e][p]
            for e, pairs in space.links.items()
            for p, lk in pairs.items()
            if lk.cost
        ]
    )
    for path in space.paths:  # Eq. (13) with Eq. (6)
        hops = list(zip(path, path[1:], strict=False))
        m.addCons(
            r >= quicksum(latency(i) for i in path) + quicksum(delay(e) for e in hops),
            name=f"path[{'>'.join(path)}]",
        )
    for i, cands in space.choices.items():  # Eq. (14) with Eq. (11)
        m.addCons(
            t_d >= quicksum(c.downtime_s * x[i][u] for u, c in cands.items() if c.downtime_s),
            name=f"downtime[{i}]",
        )
    m.addCons(r <= b.r_max_s, name="R_max")  # Eq. (15)
    m.addCons(cost <= b.c_max, name="C_max")  # Eq. (16)
    m.addCons(t_d <= b.td_max_s, name="TD_max")  # Eq. (17)
    res_i = {o.name: o.resources for o in inputs.operators}
    for node in inputs.nodes:  # Eq. (18)
        u = node.name
        m.addCons(
            quicksum(
                n * res_i[i] * x[i][ms]
                for i, cands in space.choices.items()
                for ms in cands
                if (n := Counter(ms)[u])
            )
            <= node.capacity,
            name=f"capacity[{u}]",
        )
    for i in space.choices:  # Eq. (19)
        m.addCons(quicksum(x[i].values()) == 1, name=f"assign[{i}]")
    for (i, j), pairs in space.links.items():  # Eqs. (20)–(21)
        by_up: dict[Multiset, list[Variable]] = {u: [] for u in x[i]}
        by_down: dict[Multiset, list[Variable]] = {v: [] for v in x[j]}
        for (u, v), var in y[(i, j)].items():
            by_up[u].append(var)
            by_down[v].append(var)
        for u, vars_ in by_up.items():
            m.addCons(quicksum(vars_) == x[i][u], name=f"out[{i}>{j}|{_name(u)}]")
        for v, vars_ in by_down.items():
            m.addCons(quicksum(vars_) == x[j][v], name=f"in[{i}>{j}|{_name(v)}]")

    m.setObjective(  # F', Eq. (12) with r and t_D
        (w.r / b.r_max_s) * r + (w.c / b.c_max) * cost + (w.d / b.td_max_s) * t_d, "minimize"
    )
    handles = EdrpVars(
        space, x, y, r, t_d, m.getNVars(False), m.getNConss(False), time.perf_counter() - start
    )
    return m, handles


def warm_start(model: Model, handles: EdrpVars, deployment: Mapping[str, Multiset]) -> bool:
    """Offer a complete deployment as a starting solution; False if not a candidate/feasible."""
    if set(deployment) != set(handles.x) or any(
        ms not in handles.x[i] for i, ms in deployment.items()
    ):
        return False
    sol = model.createSol()
    for i, ms in deployment.items():
        model.setSolVal(sol, handles.x[i][ms], 1.0)
    paths = {p: 0.0 for p in handles.space.paths}
    for path in paths:
        total = sum(handles.space.choices[i][deployment[i]].latency_s for i in path)
        for e in zip(path, path[1:], strict=False):
            total += handles.space.links[e][(deployment[e[0]], deployment[e[1]])].delay_s
        paths[path] = total
    for e, pairs in handles.y.items():
        model.setSolVal(sol, pairs[(deployment[e[0]], deployment[e[1]])], 1.0)
    model.setSolVal(sol, handles.r, max(paths.values(), default=0.0))
    model.setSolVal(
        sol,
        handles.t_d,
        max((handles.space.choices[i][ms].downtime_s for i, ms in deployment.items()), default=0),
    )
    return bool(model.addSol(sol, free=True))


def solve(model: Model, limits: Limits = Limits()) -> SolveResult:
    """Optimise under ``limits`` and report status, objective, bound, gap and time."""
    model.setParam("limits/time", limits.time_limit_s)
    model.setParam("limits/gap", limits.gap)
    model.setParam("limits/memory", limits.memory_mb)
    if limits.fast_presolve:
        model.setPresolve(SCIP_PARAMSETTING.FAST)
    if not limits.heuristics:
        model.setHeuristics(SCIP_PARAMSETTING.OFF)
    start = time.perf_counter()
    model.optimize()
    elapsed = time.perf_counter() - start
    scip_status = model.getStatus()
    has_sol = model.getNSols() > 0
    if scip_status == "optimal":
        status = "optimal"
    elif has_sol:
        status = "feasible"
    elif scip_status in ("infeasible", "inforunbd"):
        status = "infeasible"
    else:
        status = "error"
    return SolveResult(
        status=status,
        scip_status=scip_status,
        objective=model.getObjVal() if has_sol else None,
        bound=model.getDualbound() if scip_status != "infeasible" else None,
        gap=model.getGap() if has_sol else None,
        time_s=elapsed,
        bb_nodes=model.getNNodes(),
        version=str(model.version()),
    )


def extract(model: Model, handles: EdrpVars, eps: float = 0.5) -> dict[str, Multiset]:
    """The chosen multiset per operator: the U with x_i,U = 1 in the best solution."""
    sol = model.getBestSol()
    return {
        i: next(u for u, var in xs.items() if model.getSolVal(sol, var) > eps)
        for i, xs in handles.x.items()
    }
