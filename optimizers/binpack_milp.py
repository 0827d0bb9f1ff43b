"""Exact placement of seed 000's EPNs as a MILP on SCIP (digest §9): the same viability
constraints as the heuristic, δ^e only, minimising nodes (or price) plus ε·migrations.

Three steps, as in the PySCIPOpt examples: :func:`build_model` returns the unsolved model
with named variables, :func:`solve` records how the solve went, :func:`extract` reads the
placement back. :func:`milp_binpack` runs them on plain inputs and :func:`plan_binpack_milp`
on the fitted model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import pyscipopt
from pydantic import Field, model_validator
from pyscipopt import Model, quicksum

from optimizers.binpack import (
    BinpackParams,
    binpack,
    check_instance,
    default_hire_name,
    is_viable,
    planning_problem,
)
from optimizers.epn_plan import build_decision
from optimizers.queueing import EpnLoad
from streamplan.config import AppConfig
from streamplan.fitted import FittedModel
from streamplan.plan import Decision, Prediction, SolverStats, SolverStatus

__all__ = [
    "BinpackMilpParams",
    "add_start",
    "Candidate",
    "MilpResult",
    "MilpStats",
    "MilpVars",
    "build_model",
    "extract",
    "lower_bound",
    "milp_binpack",
    "plan_binpack_milp",
    "solve",
    "unplaceable",
]


class BinpackMilpParams(BinpackParams):
    """The heuristic's parameters (so one ``method.params`` block serves both) plus the
    objective and SCIP's time limit. LW is a hard constraint only with ``enforce_lw``."""

    objective: Literal["nodes", "price"] = Field(
        default="nodes", description="minimise node count or Σ price per hour"
    )
    time_limit_s: float = Field(default=60.0, gt=0, description="SCIP limits/time (s)")

    @model_validator(mode="after")
    def _estimated_only(self) -> BinpackMilpParams:
        if self.delta_source != "estimated":
            raise ValueError(
                f"delta_source must be 'estimated' for the MILP, got {self.delta_source!r}"
            )
        return self


@dataclass(frozen=True)
class Candidate:
    """A node the MILP may use: an existing node (``slot`` None) or hire slot ``slot``."""

    name: str
    speed: float = 1.0
    price: float = 0.0
    slot: int | None = None


@dataclass
class MilpVars:
    """Variables of the built model: ``x[(epn, node)]`` and ``y[node]``."""

    x: dict[tuple[str, str], pyscipopt.Variable]
    y: dict[str, pyscipopt.Variable]


@dataclass
class MilpStats:
    """How the solve went."""

    status: SolverStatus
    objective: float | None
    bound: float | None
    gap: float | None
    time_s: float
    n_vars: int
    n_conss: int
    message: str = ""


@dataclass
class MilpResult:
    """Outcome of :func:`milp_binpack`; ``assignment`` is None without a solution."""

    assignment: dict[str, str] | None
    stats: MilpStats
    lower_bound: int
    migrations: int | None

    @property
    def nodes(self) -> list[str]:
        """Nodes in use (empty without a solution)."""
        return sorted(set(self.assignment.values())) if self.assignment else []


def unplaceable(
    loads: Sequence[EpnLoad], candidates: Sequence[Candidate], params: BinpackParams
) -> list[str]:
    """EPNs that break ρ ≤ ρ_th or δ^e ≤ HW even alone on every candidate node: the
    instance is infeasible (company only adds load; LW is left out, company can fix it)."""
    return [
        e.name
        for e in loads
        if not any(_fits_alone(e.on_speed(c.speed), params) for c in candidates)
    ]


def _fits_alone(load: EpnLoad, params: BinpackParams) -> bool:
    """Upper-side viability alone on a node: necessary for ``x(i,j) = 1``."""
    return is_viable([load], params.model_copy(update={"enforce_lw": False}))


def lower_bound(
    loads: Sequence[EpnLoad], candidates: Sequence[Candidate], params: BinpackParams
) -> int:
    """``max(1, ⌈Σ_i ρ_i / (ρ_th·speed_max)⌉)``: nodes needed by capacity (5.5) alone."""
    speed = max(c.speed for c in candidates)
    total = sum(e.rho for e in loads) / (params.rho_th * speed)
    return max(1, math.ceil(total - 1e-9))


def build_model(
    loads: Sequence[EpnLoad],
    candidates: Sequence[Candidate],
    current: Mapping[str, str],
    params: BinpackMilpParams,
) -> tuple[Model, MilpVars]:
    """The MILP of digest §9, unsolved.

    Variables ``x(i,j)`` (EPN i on node j) and ``y(j)`` (node j used). With
    ``ρ_kj = AR_k b_k / v_j``, ``ω_kj = AR_k M_2,k / (2 v_j²)`` on a node of speed ``v_j`` and
    ``s_ij = (1+HW)T_i − b_ij``, seed 000 Eq. (5.4) (upper side) for EPN i on node j reads
    ``W_ij = b_ij + Ω_j/(1−ρ_j) ≤ (1+HW)T_i ⇔ Ω_j + s_ij ρ_j ≤ s_ij`` (as ``ρ_j < 1``); it is
    scaled by ``s_ij`` and switched off by big-M when ``x(i,j) = 0``. Eq. (5.5) is
    ``Σ_k ρ_kj x(k,j) ≤ ρ_th y(j)``. Hire slots are interchangeable, so ``y(h) ≥ y(h+1)``
    and ``x(i,h) = 0`` for slot ``h > i``.
    """
    q = len(loads)
    m = Model("seed000-binpack")
    m.hideOutput()
    scaled = {(e.name, c.name): e.on_speed(c.speed) for e in loads for c in candidates}
    x: dict[tuple[str, str], pyscipopt.Variable] = {}
    y = {c.name: m.addVar(vtype="B", name=f"y({c.name})") for c in candidates}
    for i, e in enumerate(loads):
        for c in candidates:
            alone = _fits_alone(scaled[e.name, c.name], params)
            allowed = alone and (c.slot is None or c.slot <= i)
            x[e.name, c.name] = m.addVar(
                vtype="B", ub=1 if allowed else 0, name=f"x({e.name},{c.name})"
            )

    for e in loads:
        m.addCons(quicksum(x[e.name, c.name] for c in candidates) == 1, name=f"assign({e.name})")
    for c in candidates:
        j = c.name
        rho = {e.name: scaled[e.name, j].rho for e in loads}
        omega = {
            e.name: scaled[e.name, j].rate * scaled[e.name, j].service_m2_s2 / 2 for e in loads
        }
        m.addCons(
            quicksum(rho[k] * x[k, j] for k in rho) <= params.rho_th * y[j], name=f"capacity({j})"
        )
        open_ = [k for k in rho if x[k, j].getUbOriginal() > 0.5]
        for i in open_:
            m.addCons(x[i, j] <= y[j], name=f"link({i},{j})")
            s = (1 + params.hw) * scaled[i, j].target_s - scaled[i, j].service_mean_s
            coef = {k: omega[k] / s + rho[k] for k in open_}
            big_m = max(0.0, sum(coef.values()) - 1)
            m.addCons(
                quicksum(coef[k] * x[k, j] for k in open_) <= 1 + big_m * (1 - x[i, j]),
                name=f"hw({i},{j})",
            )
            low = (1 + params.lw) * scaled[i, j].target_s - scaled[i, j].service_mean_s
            if params.enforce_lw and low > 0:
                # W_ij ≥ (1+LW)T_i ⇔ Ω_j + l_ij ρ_j ≥ l_ij, scaled by l_ij; void when x(i,j) = 0
                m.addCons(
                    quicksum((omega[k] / low + rho[k]) * x[k, j] for k in open_) >= x[i, j],
                    name=f"lw({i},{j})",
                )
    slots = sorted((c for c in candidates if c.slot is not None), key=lambda c: c.slot)
    for a, b in zip(slots, slots[1:], strict=False):
        m.addCons(y[a.name] >= y[b.name], name=f"hire_order({b.slot})")
    m.addCons(quicksum(y.values()) >= lower_bound(loads, candidates, params), name="lower_bound")

    cost = {c.name: (c.price if params.objective == "price" else 1.0) for c in candidates}
    positive = [v for v in cost.values() if v > 0]
    eps = (min(positive) if positive else 1.0) / (q + 1)  # all migrations cost < one node
    stay = quicksum(x[e.name, current[e.name]] for e in loads if (e.name, current[e.name]) in x)
    m.setObjective(quicksum(cost[j] * y[j] for j in y) + eps * (q - stay), "minimize")
    return m, MilpVars(x=x, y=y)


def add_start(
    model: Model,
    mvars: MilpVars,
    loads: Sequence[EpnLoad],
    candidates: Sequence[Candidate],
    start: Mapping[str, str],
) -> None:
    """Offer a known placement (e.g. the heuristic's) as SCIP's first incumbent.

    Nodes of ``start`` that are not existing candidates become hire slots 0, 1, … in the
    order of the first EPN they host, which satisfies the symmetry breaking. SCIP checks the
    solution when solving starts and drops it if it is infeasible.
    """
    existing = [c.name for c in candidates if c.slot is None]
    slots = [c.name for c in sorted(candidates, key=lambda c: c.slot or 0) if c.slot is not None]
    first: dict[str, int] = {}
    for i, e in enumerate(loads):
        first.setdefault(start[e.name], i)
    new = sorted((n for n in first if n not in existing), key=first.__getitem__)
    if len(new) > len(slots):
        return
    rename = {n: n for n in existing} | dict(zip(new, slots, strict=False))
    sol = model.createSol()
    for (i, j), var in mvars.x.items():
        model.setSolVal(sol, var, 1.0 if rename[start[i]] == j else 0.0)
    used = {rename[n] for n in first}
    for j, var in mvars.y.items():
        model.setSolVal(sol, var, 1.0 if j in used else 0.0)
    model.addSol(sol)


def solve(model: Model, time_limit: float) -> MilpStats:
    """Optimise with a time limit and record status, objective, bound, gap and size."""
    model.setParam("limits/time", time_limit)
    model.optimize()
    scip_status = model.getStatus()
    has_sol = model.getNSols() > 0
    status: SolverStatus
    message = ""
    if scip_status == "optimal":
        status = "optimal"
    elif scip_status == "infeasible":
        status, message = "infeasible", "SCIP proved the instance infeasible"
    elif has_sol:
        status, message = "feasible", f"SCIP stopped ({scip_status}) with a feasible solution"
    else:
        status, message = "error", f"SCIP stopped ({scip_status}) without a solution"
    return MilpStats(
        status=status,
        objective=model.getObjVal() if has_sol else None,
        bound=model.getDualbound() if status != "infeasible" else None,
        gap=model.getGap() if has_sol else None,
        time_s=model.getSolvingTime(),
        n_vars=model.getNVars(),
        n_conss=model.getNConss(),
        message=message,
    )


def extract(model: Model, mvars: MilpVars) -> dict[str, str]:
    """EPN -> node from the best solution (``x > 0.5``)."""
    sol = model.getBestSol()
    return dict(sorted((i, j) for (i, j), v in mvars.x.items() if model.getSolVal(sol, v) > 0.5))


def milp_binpack(
    loads: Sequence[EpnLoad],
    assignment: Mapping[str, str],
    params: BinpackMilpParams | None = None,
    *,
    nodes: Sequence[str] | None = None,
    speeds: Mapping[str, float] | None = None,
    prices: Mapping[str, float] | None = None,
    hire_speed: float = 1.0,
    hire_price: float = 0.0,
    hire_name: Callable[[int], str] = default_hire_name,
    start: Mapping[str, str] | None = None,
) -> MilpResult:
    """Solve the instance of :func:`optimizers.binpack.binpack` exactly.

    Candidates are the existing nodes plus one hire slot per EPN. An EPN that fits alone
    nowhere makes the result ``infeasible`` before SCIP runs. ``start`` (EPN -> node, e.g.
    the heuristic's placement) seeds SCIP with an incumbent, so a time-limited solve is
    never worse than it.

    Examples
    --------
    Digest check C3: the optimum also needs two nodes and one migration (which EPN moves
    is a tie).

    >>> from optimizers.queueing import second_moment as m2
    >>> e1 = EpnLoad("EPN1", 200, 0.002, m2(0.002), 0.008)
    >>> e2 = EpnLoad("EPN2", 100, 0.003, m2(0.003), 0.0065)
    >>> r = milp_binpack([e1, e2], {"EPN1": "N1", "EPN2": "N1"}, hire_name=lambda k: f"N{k + 2}")
    >>> r.stats.status, r.nodes, r.migrations
    ('optimal', ['N1', 'N3'], 1)
    """
    params = params or BinpackMilpParams()
    existing = check_instance(loads, assignment, nodes)
    loads = sorted(loads, key=lambda e: e.name)
    speeds, prices = speeds or {}, prices or {}
    candidates = [Candidate(n, speeds.get(n, 1.0), prices.get(n, 0.0)) for n in existing]
    k = 1
    while len(candidates) < len(existing) + len(loads):
        if (name := hire_name(k)) not in existing:
            slot = len(candidates) - len(existing)
            candidates.append(Candidate(name, hire_speed, hire_price, slot))
        k += 1
    bound = lower_bound(loads, candidates, params)
    if bad := unplaceable(loads, candidates, params):
        stats = MilpStats(
            status="infeasible",
            objective=None,
            bound=None,
            gap=None,
            time_s=0.0,
            n_vars=0,
            n_conss=0,
            message=f"EPNs {bad} are not viable alone on any node (δ^e > HW or ρ > ρ_th)",
        )
        return MilpResult(None, stats, bound, None)
    model, mvars = build_model(loads, candidates, assignment, params)
    if start is not None:
        add_start(model, mvars, loads, candidates, start)
    stats = solve(model, params.time_limit_s)
    if stats.status not in ("optimal", "feasible"):
        return MilpResult(None, stats, bound, None)
    placed = extract(model, mvars)
    migrations = sum(placed[e] != assignment[e] for e in placed)
    return MilpResult(placed, stats, bound, migrations)


def plan_binpack_milp(model: FittedModel, config: AppConfig) -> Decision:
    """The exact MILP on the fitted model, seeded with the heuristic's placement.

    An infeasible instance yields an infeasible Decision with the reason, never an exception.
    """
    params = BinpackMilpParams.from_method_params(config.method.params)
    problem = planning_problem(model, config, params)
    hire = problem.hire_type
    instance = dict(
        nodes=problem.nodes,
        speeds=problem.speeds,
        hire_speed=hire.speed,
        hire_name=problem.hire_name,
    )
    heuristic = binpack(problem.loads, problem.current, params, **instance)
    res = milp_binpack(
        problem.loads,
        problem.current,
        params,
        prices={n: t.price_per_hour for n, t in problem.node_types.items()},
        hire_price=hire.price_per_hour,
        start=heuristic.assignment,
        **instance,
    )
    st = res.stats
    extra = {
        "lower_bound": float(res.lower_bound),
        "heuristic_nodes": float(len(heuristic.nodes)),
    }
    if res.assignment is not None:
        extra |= {
            "nodes": float(len(res.nodes)),
            "migrations": float(res.migrations or 0),
            "hired": float(sum(n not in problem.node_types for n in res.nodes)),
            "released": float(len(set(problem.nodes) - set(res.nodes))),
        }
    solver = SolverStats(
        name="scip",
        version=f"pyscipopt {pyscipopt.__version__}, SCIP {Model().version()}",
        status=st.status,
        objective=st.objective,
        bound=st.bound,
        gap=st.gap,
        time_s=st.time_s,
        n_vars=st.n_vars,
        n_conss=st.n_conss,
        message=st.message,
        extra=extra,
    )
    if res.assignment is None:
        return Decision(placement={}, nodes={}, predicted=Prediction(), solver=solver)
    return build_decision(problem, config, res.assignment, solver)
