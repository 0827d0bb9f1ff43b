"""Seed 001's per-bottleneck LP (MILP with OR under max semantics) on PySCIPOpt.

Three steps, as in PySCIPOpt's examples: :func:`build_model` returns the unsolved model and
its named variables, :func:`solve` runs it under limits and records status, gap and time,
:func:`extract` reads the bottleneck's keep shares back.

Only the bottleneck ω*'s shares are free; every other operator keeps r = 1 and operators
outside {ω*} ∪ succ*(ω*) are constants at their current rate (digest §3, paper §VII-D).

Formulations of the AND/SEQ patterns at ω*:

* ``full`` — the paper's LP: one r_{γ,T} ∈ [0, 1] per input and one row
  y_γ ≤ σ_{γ,T}·λ_T·r_{γ,T} per input (Eqs. 12–13).
* ``aggregated`` — the same LP with r eliminated. r_{γ,T} appears only in its own row and in
  the budget, so the cheapest shares that allow y_γ are r_{γ,T} = y_γ/(σ_{γ,T}λ_T) ≤ 1. The
  rows become the bound y_γ ≤ min_T σ_{γ,T}λ_T and the budget term becomes
  y_γ·Σ_T ptime_{γ,T}/σ_{γ,T}. Same optimum and y (SCIP's presolve performs the same
  aggregation); one variable per pattern instead of one per (pattern, type).

OR patterns keep their r variables in both formulations.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pyscipopt import Expr, Model, Variable, quicksum

from .fluid import FlowState, Keep, p_star, propagate, selectivity_value
from .instance import Instance

__all__ = ["Limits", "ShedVars", "SolveResult", "build_model", "extract", "solve"]

Objective = Literal["global", "local"]
Formulation = Literal["aggregated", "full"]
EPS = 1e-9


@dataclass
class ShedVars:
    """Named variables of one bottleneck LP and the snapshot it was built from."""

    bottleneck: int
    objective: Objective
    formulation: Formulation
    state: FlowState
    p_star: float
    budget: float
    """ρ* = λ·p*, the right-hand side of the processing-time constraint."""
    y: dict[tuple[int, int], Variable] = field(default_factory=dict)
    r: dict[int, np.ndarray] = field(default_factory=dict)
    """Pattern position at ω* → its r variables (full form and OR patterns)."""
    build_s: float = 0.0


@dataclass(frozen=True)
class Limits:
    """Solver limits."""

    time_s: float = 60.0
    gap: float = 1e-6


@dataclass(frozen=True)
class SolveResult:
    """What one SCIP run reports."""

    status: Literal["optimal", "feasible", "infeasible", "error"]
    scip_status: str
    objective: float | None
    bound: float | None
    gap: float | None
    time_s: float
    n_vars: int
    n_conss: int
    n_binaries: int


def build_model(
    inst: Instance,
    bottleneck: int,
    *,
    objective: Objective = "global",
    formulation: Formulation = "aggregated",
    keep: Keep | None = None,
) -> tuple[Model, ShedVars]:
    """Build the LP for bottleneck ``bottleneck`` (operator index) under current ``keep``.

    Parameters
    ----------
    inst : Instance
    bottleneck : int
        Index of ω* in ``inst.operators``.
    objective : {"global", "local"}
        Eq. (9) over the sinks, or ω*'s own total output (local baseline).
    formulation : {"aggregated", "full"}
        See the module docstring.
    keep : Keep, optional
        Shares already fixed by earlier rounds (digest A9); r ≡ 1 by default.

    Returns
    -------
    (Model, ShedVars)
        The unsolved SCIP model (maximise) and its variables.

    Examples
    --------
    Digest example G as a tiny instance: ω* has two AND patterns.

    >>> from optimizers.shedding_workload import example_g
    >>> inst = example_g()
    >>> model, v = build_model(inst, inst.op_index["w2"], formulation="full")
    >>> sorted(x.name for x in model.getVars())[:3]
    ['r[w2,g21]_0', 'r[w2,g21]_1', 'r[w2,g22]_0']
    >>> round(v.budget, 6)
    0.8
    """
    started = time.perf_counter()
    state = propagate(inst, keep)
    b = bottleneck
    op = inst.operators[b]
    lam_b = state.lam[b]
    total = float(lam_b.sum())
    ps = p_star(inst.bound(b), total)  # Eq. (2)
    model = Model(f"shed[{op.name}]")
    model.hideOutput()
    v = ShedVars(b, objective, formulation, state, ps, total * ps)
    budget: list[Expr] = []
    cap_b = 1.0 / ps  # Eq. (14) at ω* with μ = 1/p* (digest A8)
    ub: dict[tuple[int, int], float] = {}  # upper bounds of the y's, for big-M rows
    for gi, (g, idx) in enumerate(zip(op.patterns, inst.in_idx[b], strict=True)):
        caps = g.selectivity * lam_b[idx]  # σ_{γ,T}·λ_T: y_γ's bound per input at r = 1
        ub[(b, gi)] = min(g.f * cap_b, selectivity_value(g.kind, caps, inst.or_semantics))
        aggregate = g.kind != "or" and formulation == "aggregated"
        y = model.addVar(name=f"y[{op.name},{g.name}]", lb=0.0,
                         ub=ub[(b, gi)] if aggregate else g.f * cap_b)  # Eqs. 12–14 at r = 1
        v.y[(b, gi)] = y
        if aggregate:
            used = caps > 0
            cost = float(np.sum(g.ptime_s[used] / g.selectivity[used]))  # Eq. (3), r = y/(σλ)
            budget.append(cost * y)
            continue
        r = model.addMatrixVar(len(g.inputs), name=f"r[{op.name},{g.name}]", lb=0.0, ub=1.0)
        v.r[gi] = r
        budget.append(quicksum((lam_b[idx] * g.ptime_s) * r))  # Eq. (3) times λ
        args = caps * r
        if g.kind != "or":
            model.addMatrixCons(y - args <= 0, name=f"sel[{op.name},{g.name}]")  # Eqs. 12–13
        elif inst.or_semantics == "sum":
            model.addCons(y <= quicksum(args), name=f"or_sum[{op.name},{g.name}]")
        else:
            _or_max(model, y, list(args), float(caps.max()), f"{op.name},{g.name}")
    model.addCons(quicksum(budget) <= v.budget, name=f"ptime[{op.name}]")  # p ≤ p*, Eqs. 2–3
    if objective == "global":
        free = [b, *_successors(inst, b)]
        for o in free[1:]:
            _add_successor(model, inst, v, o, set(free), ub)
        terms, offset = [], 0.0
        for s, (o, mask) in zip(inst.sinks, inst.sink_ops, strict=True):
            for gi in np.flatnonzero(mask):
                if (o, gi) in v.y:
                    terms.append(s.weight * v.y[(o, gi)])
                else:
                    offset += s.weight * float(state.y[o][gi])
        model.setObjective(quicksum(terms), "maximize")  # Eq. (9)
        model.addObjoffset(offset)
    else:
        model.setObjective(quicksum(v.y[(b, gi)] for gi in range(len(op.patterns))), "maximize")
    v.build_s = time.perf_counter() - started
    return model, v


def _successors(inst: Instance, b: int) -> list[int]:
    """succ*(ω*) in topological order."""
    below: set[int] = set()
    stack = list(inst.succs[b])
    while stack:
        o = stack.pop()
        if o not in below:
            below.add(o)
            stack.extend(inst.succs[o])
    return [o for o in inst.order if o in below]


def _add_successor(
    model: Model, inst: Instance, v: ShedVars, o: int, free: set[int], ub: dict
) -> None:
    """Selectivity rows of a downstream operator (r = 1, inputs partly variable, Eq. 11)."""
    op = inst.operators[o]
    const = inst.source[o].copy()
    var_in: dict[int, list[Variable]] = {}
    var_ub: dict[int, float] = {}
    for q in inst.preds[o]:
        for gi, t in enumerate(inst.out_idx[q]):
            if q in free:
                var_in.setdefault(int(t), []).append(v.y[(q, gi)])
                var_ub[int(t)] = var_ub.get(int(t), 0.0) + ub[(q, gi)]
            else:
                const[t] += v.state.y[q][gi]
    p = v.state.p[o]
    mu = math.inf if p == 0 else 1.0 / p  # measured μ_ω for Eq. (14)
    for gi, (g, idx) in enumerate(zip(op.patterns, inst.in_idx[o], strict=True)):
        name = f"{op.name},{g.name}"
        args: list[Expr | float] = []
        arg_ub: list[float] = []
        for sigma, t in zip(g.selectivity, idx, strict=True):
            base = sigma * const[t]
            parts = var_in.get(int(t))
            args.append(base + sigma * quicksum(parts) if parts else float(base))
            arg_ub.append(base + sigma * var_ub.get(int(t), 0.0))
        static = [a for a in args if isinstance(a, float)]
        bound = min(g.f * mu, min(arg_ub) if g.kind != "or" else
                    (sum(arg_ub) if inst.or_semantics == "sum" else max(arg_ub)))
        y = model.addVar(name=f"y[{name}]", lb=0.0, ub=bound)
        v.y[(o, gi)] = y
        ub[(o, gi)] = bound
        if g.kind != "or":  # Eq. (10): y ≤ every shed input
            for k, a in enumerate(args):
                if not isinstance(a, float):
                    model.addCons(y <= a, name=f"sel[{name}]_{k}")
        elif inst.or_semantics == "sum":
            model.addCons(y <= quicksum(args), name=f"or_sum[{name}]")
        elif len(static) < len(args):
            _or_max(model, y, args, max(arg_ub), name)


def _or_max(model: Model, y: Variable, args: list, big_m: float, name: str) -> None:
    """y ≤ max(args) exactly (digest A3): y ≤ a_i + M(1 − z_i), Σ z_i = 1, z binary."""
    if len(args) == 1:
        model.addCons(y <= args[0], name=f"or[{name}]_0")
        return
    z = [model.addVar(name=f"z[{name}]_{k}", vtype="B") for k in range(len(args))]
    for k, (a, zk) in enumerate(zip(args, z, strict=True)):
        model.addCons(y <= a + big_m * (1 - zk), name=f"or[{name}]_{k}")
    model.addCons(quicksum(z) == 1, name=f"or_pick[{name}]")


def solve(model: Model, limits: Limits | None = None) -> SolveResult:
    """Optimise ``model`` under ``limits``; status is mapped onto the plan's vocabulary."""
    limits = limits or Limits()
    n_vars = model.getNVars(transformed=False)
    n_conss = model.getNConss(transformed=False)
    n_bin = model.getNBinVars()
    model.setParam("limits/time", limits.time_s)
    model.setParam("limits/gap", limits.gap)
    model.optimize()
    scip = model.getStatus()
    has_sol = model.getNSols() > 0
    if scip == "optimal":
        status = "optimal"
    elif scip == "infeasible":
        status = "infeasible"
    else:
        status = "feasible" if has_sol else "error"
    return SolveResult(
        status=status,
        scip_status=scip,
        objective=model.getObjVal() if has_sol else None,
        bound=model.getDualbound() if has_sol else None,
        gap=model.getGap() if has_sol else None,
        time_s=model.getSolvingTime(),
        n_vars=n_vars,
        n_conss=n_conss,
        n_binaries=n_bin,
    )


def extract(model: Model, v: ShedVars, inst: Instance) -> list[np.ndarray]:
    """Keep shares r_{γ,T} of ω*'s patterns from the solution.

    Full form and OR patterns: the solver's r. Aggregated AND/SEQ: r = y/(σλ), the cheapest
    shares that allow the optimal y (Eqs. 12–13 at equality); inputs with σλ = 0 get r = 0.
    """
    b = v.bottleneck
    lam_b = v.state.lam[b]
    keep = []
    for gi, (g, idx) in enumerate(zip(inst.operators[b].patterns, inst.in_idx[b], strict=True)):
        if gi in v.r:
            r = np.asarray(model.getVal(v.r[gi]), dtype=float)
        else:
            caps = g.selectivity * lam_b[idx]
            y = model.getVal(v.y[(b, gi)])
            with np.errstate(divide="ignore", invalid="ignore"):
                r = np.where(caps > 0, y / caps, 0.0)
        keep.append(np.clip(r, 0.0, 1.0))
    return keep
