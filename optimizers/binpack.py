"""Seed 000's configuration scheduler: greedy bin-packing of EPNs onto single-core nodes.

The three parts follow the digest's §4 (paper §6) with its ambiguity choices:
A1 a node is a donor iff some EPN has δ > HW (we also count ρ > ρ_th, so every output node
meets (5.5)); A2 ``delta_source`` picks δ^m, δ^e or their maximum for Part 1, while every
feasibility test uses δ^e; A3 feasibility enforces only δ^e ≤ HW and ρ ≤ ρ_th unless
``enforce_lw``; A4 Part 3 tries the deutero acceptor list; A5 an EPN that does not fit alone is
kept alone and flagged ``infeasible_single``; A9 at least one node is kept; A11 service times
scale with node speed; A12 ties break by node id, then EPN id; A13 both ``moves_total`` and
``moves_net`` are reported.

:func:`binpack` is the pure core on plain inputs; :func:`plan_binpack` adapts it to the
fitted model and the application config.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NamedTuple, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from optimizers.epn_plan import build_decision, epn_problem, evaluate_assignment
from optimizers.prediction import MODELS
from optimizers.prediction.epn import loads_for_model
from optimizers.queueing import EpnLoad, node_load, relative_deviation, response_times
from streamplan.config import AppConfig
from streamplan.fitted import FittedModel
from streamplan.plan import Decision, SolverStats

__all__ = [
    "BinpackParams",
    "BinpackResult",
    "Move",
    "binpack",
    "check_instance",
    "is_viable",
    "plan_binpack",
]

TOL = 1e-9  # slack on every ≤ / ≥ test, so exact boundary cases count as inside


class BinpackParams(BaseModel):
    """Parameters of seed 000's method (``method.params`` in the application config)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hw: float = Field(default=0.2, ge=0, description="high water-mark HW on δ (fraction)")
    lw: float = Field(default=-0.2, gt=-1, le=0, description="low water-mark LW on δ (fraction)")
    rho_th: float = Field(default=0.8, gt=0, le=1, description="cap ρ_th on node load")
    delta_source: Literal["measured", "estimated", "max"] = Field(
        default="estimated", description="δ used to classify nodes in Part 1 (A2)"
    )
    enforce_lw: bool = Field(default=False, description="treat LW as a hard constraint (A3)")
    rt_model: str | None = Field(
        default=None,
        description="response-time model giving each EPN's M_2 (optimizers.prediction.MODELS); "
        "None keeps the fitted M_2 of seed 000",
    )

    @field_validator("rt_model")
    @classmethod
    def _known_model(cls, name: str | None) -> str | None:
        if name is not None and name not in MODELS:
            raise ValueError(f"unknown response-time model {name!r} (known: {sorted(MODELS)})")
        return name

    @model_validator(mode="after")
    def _band(self) -> BinpackParams:
        if not self.lw < self.hw:
            raise ValueError(f"lw ({self.lw}) must be below hw ({self.hw})")
        return self

    @classmethod
    def from_method_params(cls, params: Mapping[str, Any]) -> Self:
        """Validate ``config.method.params``; errors name the field as ``method.params.<f>``."""
        try:
            return cls.model_validate(dict(params))
        except ValidationError as exc:
            parts = []
            for err in exc.errors():
                loc = ".".join(str(p) for p in err["loc"])
                where = f"method.params.{loc}" if loc else "method.params"
                parts.append(f"{where}: {err['msg']} (value: {err.get('input')!r})")
            raise ValueError("; ".join(parts)) from exc


def is_viable(classes: Sequence[EpnLoad], params: BinpackParams) -> bool:
    """Whether one node may host ``classes`` (already scaled to its speed).

    Seed 000, Eqs. (5.4) and (5.5) (reconstructed) with the A3 choice: ``ρ ≤ ρ_th`` and
    ``δ^e_i ≤ HW`` for every hosted EPN, plus ``δ^e_i ≥ LW`` when ``enforce_lw``.

    Examples
    --------
    Digest check C2: EPN3 and EPN2 together give δ = +0.15 and −0.1385, both within HW.

    >>> from optimizers.queueing import second_moment as m2
    >>> e2 = EpnLoad("EPN2", 100, 0.003, m2(0.003), 0.0065)
    >>> e3 = EpnLoad("EPN3", 100, 0.002, m2(0.002), 0.004)
    >>> is_viable([e3, e2], BinpackParams())
    True
    >>> is_viable([e3, e2], BinpackParams(hw=0.1))
    False
    """
    if node_load(classes) > params.rho_th + TOL:
        return False
    targets = {c.name: c.target_s for c in classes}
    for name, w in response_times(classes).items():
        delta = relative_deviation(w, targets[name])
        if delta > params.hw + TOL or (params.enforce_lw and delta < params.lw - TOL):
            return False
    return True


class Move(NamedTuple):
    """One committed move of an EPN (Part 2 or 3); rolled-back Part-3 moves are dropped."""

    part: int
    epn: str
    src: str
    dst: str


@dataclass
class BinpackResult:
    """Outcome of one scheduler run (net placement; A13)."""

    assignment: dict[str, str]
    kept: list[str]
    hired: list[str]
    released: list[str]
    response_time_s: dict[str, float]
    utilisation: dict[str, float]
    infeasible_single: list[str]
    moves: list[Move]
    moves_net: int
    feasibility_checks: int
    out_of_band_before: int
    out_of_band_after: int
    notes: list[str] = field(default_factory=list)

    @property
    def moves_total(self) -> int:
        """Committed moves, counting an EPN each time it moves (A13)."""
        return len(self.moves)

    @property
    def nodes(self) -> list[str]:
        """Nodes in use after the run (kept and hired)."""
        return sorted(self.kept + self.hired)

    @property
    def status(self) -> Literal["heuristic", "degraded"]:
        """``degraded`` when some EPN does not fit alone on a node (A5)."""
        return "degraded" if self.infeasible_single else "heuristic"


def default_hire_name(k: int) -> str:
    """Name of the ``k``-th hired node (1-based) when the caller gives none."""
    return f"hire-{k}"


def binpack(
    loads: Sequence[EpnLoad],
    assignment: Mapping[str, str],
    params: BinpackParams | None = None,
    *,
    nodes: Sequence[str] | None = None,
    speeds: Mapping[str, float] | None = None,
    hire_speed: float = 1.0,
    hire_name: Callable[[int], str] = default_hire_name,
) -> BinpackResult:
    """Run seed 000's configuration scheduler once (digest §4, Parts 1–3).

    Parameters
    ----------
    loads : sequence of EpnLoad
        Every EPN with its rate, service moments (calibration speed) and target.
    assignment : mapping
        EPN name -> node currently hosting it.
    params : BinpackParams, optional
        HW, LW, ρ_th, δ source and LW enforcement; the paper's values by default.
    nodes : sequence of str, optional
        Nodes of the current deployment, including empty ones (default: those in
        ``assignment``).
    speeds : mapping, optional
        Node -> speed relative to the calibration host (default 1).
    hire_speed : float
        Speed of a hired node.
    hire_name : callable
        ``k -> name`` of the k-th hire; names already in use are skipped.

    Returns
    -------
    BinpackResult

    Raises
    ------
    ValueError
        On duplicate EPN names, an EPN without a node, a node outside ``nodes`` or no node.

    Examples
    --------
    Digest check C3: one node hosts EPN1 and EPN2, EPN2 misses its target, nothing else
    accepts it, so a node is hired for it.

    >>> from optimizers.queueing import second_moment as m2
    >>> e1 = EpnLoad("EPN1", 200, 0.002, m2(0.002), 0.008)
    >>> e2 = EpnLoad("EPN2", 100, 0.003, m2(0.003), 0.0065)
    >>> r = binpack([e1, e2], {"EPN1": "N1", "EPN2": "N1"}, hire_name=lambda k: f"N{k + 2}")
    >>> r.assignment, r.hired, r.released, r.moves_net
    ({'EPN1': 'N1', 'EPN2': 'N3'}, ['N3'], [], 1)
    """
    params = params or BinpackParams()
    node_list = check_instance(loads, assignment, nodes)
    by_name = {load.name: load for load in loads}
    packer = _Packer(by_name, assignment, node_list, params, speeds or {}, hire_speed, hire_name)
    packer.run()
    return packer.result()


def check_instance(
    loads: Sequence[EpnLoad], assignment: Mapping[str, str], nodes: Sequence[str] | None
) -> list[str]:
    """Validate an instance and return its sorted node list (default: nodes in use).

    Raises
    ------
    ValueError
        On duplicate EPN names, an EPN without a node, a node outside ``nodes`` or no node.
    """
    names = [load.name for load in loads]
    if dup := sorted({n for n in names if names.count(n) > 1}):
        raise ValueError(f"loads: duplicate EPN {dup[0]!r}")
    node_list = sorted(set(nodes) if nodes is not None else set(assignment.values()))
    if not node_list:
        raise ValueError("nodes: at least one node is needed (A9)")
    for name in names:
        if name not in assignment:
            raise ValueError(f"assignment: EPN {name!r} has no node")
        if assignment[name] not in node_list:
            raise ValueError(f"assignment[{name}]: node {assignment[name]!r} is not in nodes")
    return node_list


class _Packer:
    """Mutable state of one run: EPN lists per node, current δ per EPN, counters."""

    def __init__(
        self,
        loads: dict[str, EpnLoad],
        assignment: Mapping[str, str],
        nodes: list[str],
        params: BinpackParams,
        speeds: Mapping[str, float],
        hire_speed: float,
        hire_name: Callable[[int], str],
    ) -> None:
        self.loads = loads
        self.params = params
        self.initial = {e: assignment[e] for e in loads}
        self.el: dict[str, list[str]] = {n: [] for n in nodes}
        for e in sorted(loads):
            self.el[assignment[e]].append(e)
        self.speed = {n: speeds.get(n, 1.0) for n in nodes}
        self.hire_speed = hire_speed
        self.hire_name = hire_name
        self.hired: list[str] = []
        self.released: list[str] = []
        self.flagged: list[str] = []
        self.moves: list[Move] = []
        self.checks = 0
        self.notes: list[str] = []
        self.delta = self._initial_deltas()
        self.out_of_band_before = self._out_of_band()

    # --- model --------------------------------------------------------------------------
    def classes(self, node: str, extra: str | None = None) -> list[EpnLoad]:
        names = self.el[node] + ([extra] if extra else [])
        return [self.loads[e].on_speed(self.speed[node]) for e in names]

    def rho(self, node: str) -> float:
        return node_load(self.classes(node))

    def estimated(self, node: str) -> dict[str, float]:
        """δ^e of every EPN on ``node`` (seed 000, Eq. (5.3), reconstructed)."""
        w = response_times(self.classes(node))
        return {e: relative_deviation(w[e], self.loads[e].target_s) for e in self.el[node]}

    def recompute(self, node: str) -> None:
        """Sub-step re-compute(δ): δ^e replaces whatever δ the node's EPNs carried."""
        self.delta.update(self.estimated(node))

    def ordered(self, node: str) -> list[str]:
        """EL_j in non-increasing δ, ties by EPN id (A12)."""
        return sorted(self.el[node], key=lambda e: (-self.delta[e], e))

    def is_donor(self, node: str) -> bool:
        """A1: some δ > HW; extended by ρ > ρ_th so that (5.5) holds on every output node."""
        over = any(self.delta[e] > self.params.hw + TOL for e in self.el[node])
        return over or self.rho(node) > self.params.rho_th + TOL

    def fits(self, node: str, e: str) -> bool:
        self.checks += 1
        return is_viable(self.classes(node, extra=e), self.params)

    def fits_fresh(self, e: str) -> bool:
        self.checks += 1
        return is_viable([self.loads[e].on_speed(self.hire_speed)], self.params)

    def _initial_deltas(self) -> dict[str, float]:
        """Part 1's δ per EPN from ``delta_source`` (A2); δ^e where no RT was measured."""
        source = self.params.delta_source
        delta: dict[str, float] = {}
        missing: list[str] = []
        for node in self.el:
            est = self.estimated(node)
            for e in self.el[node]:
                rt = self.loads[e].measured_rt_s
                measured = None if rt is None else relative_deviation(rt, self.loads[e].target_s)
                if measured is None and source != "estimated":
                    missing.append(e)
                if measured is None or source == "estimated":
                    delta[e] = est[e]
                elif source == "measured":
                    delta[e] = measured
                else:
                    delta[e] = max(measured, est[e])
        if missing:
            self.notes.append(f"no measured response time for {missing}; used δ^e instead (A2)")
        return delta

    def _out_of_band(self) -> int:
        lo, hi = self.params.lw - TOL, self.params.hw + TOL
        return sum(not lo <= d <= hi for d in self.delta.values())

    # --- actions ------------------------------------------------------------------------
    def move(self, part: int, e: str, src: str, dst: str) -> None:
        self.el[src].remove(e)
        self.el[dst].append(e)
        self.moves.append(Move(part, e, src, dst))

    def hire(self) -> str:
        k = len(self.hired) + 1  # hires happen only in Part 2, before any release
        while (name := self.hire_name(k)) in self.el:
            k += 1
        self.el[name] = []
        self.speed[name] = self.hire_speed
        self.hired.append(name)
        return name

    def release(self, node: str) -> None:
        del self.el[node]
        if node in self.hired:
            self.hired.remove(node)
        else:
            self.released.append(node)

    def _al_key(self, node: str) -> tuple[float, str]:
        return (self.rho(node), node)

    def _dl_key(self, node: str) -> tuple[float, str]:
        return (-self.rho(node), node)

    # --- the three parts ----------------------------------------------------------------
    def run(self) -> None:
        dl = sorted((n for n in self.el if self.is_donor(n)), key=self._dl_key)
        al = sorted((n for n in self.el if n not in dl), key=self._al_key)
        self.part2(dl, al)
        self.part3(al)
        self.release_empty()
        self.delta = {}
        for node in self.el:
            self.recompute(node)

    def part2(self, dl: list[str], al: list[str]) -> None:
        """Empty the donor list: move each donor's worst EPN to the least-loaded acceptor
        that stays viable, or to a hired node (A5: flag EPNs that fit nowhere alone)."""
        while dl:
            d = dl[0]
            e = self.ordered(d)[0]
            target = next((a for a in al if self.fits(a, e)), None)
            if target is None and self.fits_fresh(e):
                target = self.hire()
                al.insert(0, target)
            elif target is None:
                self.flagged.append(e)
                if len(self.el[d]) == 1:  # alone already: keep it, D leaves both lists
                    dl.remove(d)
                    continue
                target = self.hire()  # isolate it on a node that joins neither list
            self.move(2, e, d, target)
            self.recompute(d)
            self.recompute(target)
            if not self.is_donor(d):
                dl.remove(d)
                al.append(d)
            al.sort(key=self._al_key)
            dl.sort(key=self._dl_key)

    def part3(self, al: list[str]) -> None:
        """Release pseudo-donors while |AL| > 1; stop at the first one that cannot be emptied,
        restoring the checkpoint (A4: acceptors come from DAL)."""
        while len(al) > 1:
            checkpoint = {n: list(self.el[n]) for n in al}
            deltas, n_moves = dict(self.delta), len(self.moves)
            d, dal = al[0], al[1:]
            for e in self.ordered(d):
                target = next((a for a in dal if self.fits(a, e)), None)
                if target is None:
                    self.el.update(checkpoint)
                    self.delta = deltas
                    del self.moves[n_moves:]
                    return
                self.move(3, e, d, target)
                self.recompute(target)
                dal.sort(key=self._al_key)
            self.release(d)
            al[:] = dal

    def release_empty(self) -> None:
        """A9: release nodes left empty (e.g. beside flagged nodes), keeping at least one."""
        for node in sorted(self.el):
            if not self.el[node] and len(self.el) > 1:
                self.release(node)

    # --- output -------------------------------------------------------------------------
    def result(self) -> BinpackResult:
        assignment = {e: n for n, epns in self.el.items() for e in epns}
        assignment = dict(sorted(assignment.items()))
        w, rho = evaluate_assignment(list(self.loads.values()), assignment, self.speed)
        return BinpackResult(
            assignment=assignment,
            kept=sorted(n for n in self.el if n not in self.hired),
            hired=sorted(self.hired),
            released=sorted(self.released),
            response_time_s=dict(sorted(w.items())),
            utilisation={n: rho.get(n, 0.0) for n in sorted(self.el)},
            infeasible_single=sorted(self.flagged),
            moves=list(self.moves),
            moves_net=sum(assignment[e] != self.initial[e] for e in assignment),
            feasibility_checks=self.checks,
            out_of_band_before=self.out_of_band_before,
            out_of_band_after=self._out_of_band(),
            notes=self.notes,
        )


def planning_problem(model: FittedModel, config: AppConfig, params: BinpackParams):
    """The EPN problem of the fitted model, with each EPN's moments from the response-time
    model ``params.rt_model`` (seed 000's single server when None)."""
    problem = epn_problem(model, config)
    if params.rt_model is not None:
        loads, notes = loads_for_model(problem.loads, model, config, params.rt_model)
        problem = replace(problem, loads=loads, notes=[*problem.notes, *notes])
    return problem


def plan_binpack(model: FittedModel, config: AppConfig) -> Decision:
    """Seed 000's heuristic on the fitted model: one EPN per configured query."""
    params = BinpackParams.from_method_params(config.method.params)
    start = time.perf_counter()
    problem = planning_problem(model, config, params)
    res = binpack(
        problem.loads,
        problem.current,
        params,
        nodes=problem.nodes,
        speeds=problem.speeds,
        hire_speed=problem.hire_type.speed,
        hire_name=problem.hire_name,
    )
    elapsed = time.perf_counter() - start
    violations = [
        f"query {e}: does not fit alone on a node (infeasible_single, δ^e > HW or ρ > ρ_th)"
        for e in res.infeasible_single
    ]
    solver = SolverStats(
        name="seed000-binpack",
        status=res.status,
        objective=float(len(res.nodes)),
        time_s=elapsed,
        message="; ".join(res.notes),
        extra={
            "moves_total": float(res.moves_total),
            "moves_net": float(res.moves_net),
            "hired": float(len(res.hired)),
            "released": float(len(res.released)),
            "feasibility_checks": float(res.feasibility_checks),
            "out_of_band_before": float(res.out_of_band_before),
            "out_of_band_after": float(res.out_of_band_after),
        },
    )
    return build_decision(problem, config, res.assignment, solver, violations)
