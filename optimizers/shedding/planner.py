"""Global LP, local LP and no shedding on one instance (seed 001 §IV steps 3–6).

:func:`plan` finds the first operator (topological order) whose M/M/1 sojourn exceeds its
bound, solves the LP there, fixes the resulting shares and repeats until no operator
violates its bound (digest A9: at most one round per operator). After each solve the
leftover processing budget is spent on the cheapest dropped events (A10, "shed no more
than needed"), which leaves the objective unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from .fluid import FlowState, Keep, full_keep, processing_load, propagate
from .instance import Instance
from .lp import Formulation, Limits, SolveResult, build_model, extract, solve

__all__ = ["Mode", "Round", "ShedPlan", "fill_budget", "plan"]

Mode = Literal["global", "local", "none"]


@dataclass(frozen=True)
class Round:
    """One bottleneck solved."""

    bottleneck: str
    p_star_s: float
    build_s: float
    result: SolveResult


@dataclass
class ShedPlan:
    """Keep shares for every operator, the predicted state under them and how they came."""

    mode: Mode
    keep: Keep
    state: FlowState
    rounds: list[Round] = field(default_factory=list)
    status: Literal["optimal", "feasible", "degraded", "infeasible", "error"] = "optimal"
    message: str = ""

    def drops(self, inst: Instance) -> dict[str, dict[str, dict[str, float]]]:
        """Drop shares x = 1 − r of the shedding operators: operator → pattern → type → x."""
        shed = {r.bottleneck for r in self.rounds}
        return {
            o.name: {
                g.name: dict(zip(g.inputs, np.round(1.0 - r, 12).tolist(), strict=True))
                for g, r in zip(o.patterns, self.keep[i], strict=True)
            }
            for i, o in enumerate(inst.operators)
            if o.name in shed
        }


def fill_budget(
    inst: Instance, op: int, lam: np.ndarray, keep: list[np.ndarray], budget: float
) -> list[np.ndarray]:
    """Spend the budget ρ* left after the LP on the cheapest dropped events (digest A10).

    Maximises Σ λ_T·r_{γ,T} subject to Eq. (3)'s budget with the LP's outputs fixed; raising
    r only loosens Eqs. (12)–(13), so this is a fractional knapsack solved greedily by
    ascending ptime. A solution over budget by solver tolerance is scaled back onto it.
    """
    keep = [r.copy() for r in keep]
    used = processing_load(inst, op, lam, keep)
    if used > budget:
        return [r * (budget / used) for r in keep]
    patterns = inst.operators[op].patterns
    unit = np.concatenate([lam[idx] * g.ptime_s for g, idx in zip(patterns, inst.in_idx[op],
                                                                    strict=True)])
    ptime = np.concatenate([g.ptime_s for g in patterns])
    flat = np.concatenate(keep)
    flat[unit == 0] = 1.0  # events that cost nothing are never dropped
    room_cost = unit * (1.0 - flat)
    order = np.argsort(ptime, kind="stable")
    cum = np.cumsum(room_cost[order])
    left = budget - used
    full = order[cum <= left]
    flat[full] = 1.0
    rest = order[cum > left]
    if rest.size and unit[rest[0]] > 0:
        spent = cum[full.size - 1] if full.size else 0.0
        flat[rest[0]] += (left - spent) / unit[rest[0]]
    return np.split(np.clip(flat, 0.0, 1.0), np.cumsum([len(g.inputs) for g in patterns])[:-1])


def plan(
    inst: Instance,
    mode: Mode = "global",
    *,
    formulation: Formulation = "aggregated",
    limits: Limits | None = None,
) -> ShedPlan:
    """Shed with the global LP, the local LP or not at all.

    Examples
    --------
    Digest example G: the global LP keeps 25% of γ21's inputs and 54.17% of γ22's; local
    fills the cheaper γ21 first. Global sinks 158.33 e/s, local 83.33 e/s.

    >>> from optimizers.shedding_workload import example_g
    >>> inst = example_g()
    >>> g, l = plan(inst, "global"), plan(inst, "local")
    >>> round(g.state.weighted_output(inst), 2), round(l.state.weighted_output(inst), 2)
    (158.33, 83.33)
    >>> {k: round(x, 6) for k, x in g.drops(inst)["w2"]["g22"].items()}
    {'1': 0.458333, '2': 0.458333, '3': 0.458333}
    """
    keep = full_keep(inst)
    result = ShedPlan(mode, keep, propagate(inst, keep))
    if mode == "none":
        late = result.state.violations(inst)
        if late:
            result.status = "degraded"
            result.message = "bound violated at " + ", ".join(inst.operators[o].name for o in late)
        return result
    done: set[int] = set()
    for _ in range(len(inst.operators)):
        late = [o for o in result.state.violations(inst) if o not in done]
        if not late:
            break
        b = late[0]
        model, v = build_model(inst, b, objective=mode, formulation=formulation, keep=keep)
        res = solve(model, limits)
        result.rounds.append(Round(inst.operators[b].name, v.p_star, v.build_s, res))
        if res.status not in ("optimal", "feasible"):
            result.status = res.status
            result.message = (f"SCIP returned {res.scip_status} for bottleneck "
                              f"{inst.operators[b].name!r}")
            return result
        if res.status == "feasible":
            result.status = "feasible"
        keep[b] = fill_budget(inst, b, v.state.lam[b], extract(model, v, inst), v.budget)
        done.add(b)
        result.state = propagate(inst, keep)
    return result
