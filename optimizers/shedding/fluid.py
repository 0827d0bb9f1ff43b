"""Seed 001's fluid model: selectivity functions along the DAG and the M/M/1 bound.

Given keep shares r (1 = process everything), :func:`propagate` computes every operator's
arrival rates (Eq. 11), pattern outputs (Table I / Eq. 10), mean processing time p (Eq. 3)
and M/M/1 sojourn B (Eq. 1), in topological order. An overloaded operator (λp ≥ 1) processes
only μ = 1/p of its λ arrivals, so its outputs scale by 1/(λp) (§VIII: it "cannot count more
events per second than it can process"); outputs are also capped by Eq. (14).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .instance import Instance

__all__ = [
    "FlowState",
    "Keep",
    "full_keep",
    "p_star",
    "processing_load",
    "propagate",
    "selectivity_value",
    "sojourn",
]

Keep = list[list[np.ndarray]]
"""Keep shares r_{γ,T} per operator, per pattern, aligned with ``Pattern.inputs``."""


def full_keep(inst: Instance) -> Keep:
    """r ≡ 1: no shedding anywhere."""
    return [[np.ones(len(g.inputs)) for g in o.patterns] for o in inst.operators]


def selectivity_value(kind: str, args: np.ndarray, or_semantics: str = "max") -> float:
    """Table I: AND/SEQ → min of the (shed, σ-scaled) input rates, OR → max (or sum, A3).

    Examples
    --------
    Eq. (4), SEQ(0;0;1) with λ0 = 400, λ1 = 200 → min(400/2, 200):

    >>> selectivity_value("seq", np.array([0.5 * 400, 1.0 * 200]))
    200.0
    >>> args = np.array([50.0, 120.0])
    >>> selectivity_value("or", args), selectivity_value("or", args, "sum")
    (120.0, 170.0)
    """
    if kind == "or":
        return float(args.sum() if or_semantics == "sum" else args.max())
    return float(args.min())


def sojourn(p: float, lam: float) -> float:
    """Eq. (1): M/M/1 mean sojourn B = 1/(1/p − λ) = p/(1 − λp); ∞ when λp ≥ 1.

    >>> round(sojourn(0.0008, 1000.0), 6)
    0.004
    >>> sojourn(0.0018, 1000.0)
    inf
    """
    rho = lam * p
    return p / (1.0 - rho) if rho < 1.0 else math.inf


def p_star(bound_s: float, lam: float) -> float:
    """Eq. (2) solved for p: p* = B*/(1 + λB*), the largest mean processing time meeting B*.

    Digest example G: B* = 4 ms at λ = 1000 e/s gives p* = 0.8 ms.

    >>> round(p_star(0.004, 1000.0), 9)
    0.0008
    """
    return bound_s / (1.0 + lam * bound_s)


def processing_load(inst: Instance, op: int, lam: np.ndarray, keep: list[np.ndarray]) -> float:
    """λ·p of Eq. (3): Σ_T Σ_γ λ_T · ptime_{γ,T} · r_{γ,T} (seconds of work per second)."""
    return float(
        sum(
            np.dot(lam[idx] * g.ptime_s, r)
            for g, idx, r in zip(inst.operators[op].patterns, inst.in_idx[op], keep, strict=True)
        )
    )


@dataclass(frozen=True)
class FlowState:
    """Rates and queueing figures of every operator under one set of keep shares."""

    lam: np.ndarray
    """λ_{T,ω}, shape (operators, types), Eq. (11)."""
    y: tuple[np.ndarray, ...]
    """Output rate y_{ω,γ} per operator and pattern."""
    p: np.ndarray
    """Mean processing time per arriving event, Eq. (3) (0 without arrivals)."""
    rho: np.ndarray
    """Utilisation λ_ω p_ω."""
    sojourn: np.ndarray
    """M/M/1 mean sojourn, Eq. (1); ∞ when overloaded."""

    def sink_rates(self, inst: Instance) -> dict[str, float]:
        """Event rate reaching each sink."""
        return {s.name: float(self.y[o][mask].sum())
                for s, (o, mask) in zip(inst.sinks, inst.sink_ops, strict=True)}

    def weighted_output(self, inst: Instance) -> float:
        """Eq. (9): Σ_s w_s · (rate reaching s)."""
        rates = self.sink_rates(inst)
        return float(sum(s.weight * rates[s.name] for s in inst.sinks))

    def response_times(self, inst: Instance) -> dict[str, float]:
        """Per sink: sum of M/M/1 sojourns along the slowest operator path (our extension)."""
        rt = np.zeros(len(inst.operators))
        for o in inst.order:
            upstream = max((rt[q] for q in inst.preds[o]), default=0.0)
            rt[o] = self.sojourn[o] + upstream
        return {s.name: float(rt[o]) for s, (o, _) in zip(inst.sinks, inst.sink_ops, strict=True)}

    def violations(self, inst: Instance) -> list[int]:
        """Operators whose sojourn exceeds their B*, in topological order."""
        return [o for o in inst.order
                if self.lam[o].sum() > 0 and self.sojourn[o] > inst.bound(o) * (1 + 1e-9)]


def propagate(inst: Instance, keep: Keep | None = None) -> FlowState:
    """Forward-propagate the fluid model through the DAG under keep shares ``keep``."""
    keep = keep or full_keep(inst)
    n_ops = len(inst.operators)
    lam = inst.source.copy()
    ys: list[np.ndarray] = [np.zeros(0)] * n_ops
    p = np.zeros(n_ops)
    rho = np.zeros(n_ops)
    soj = np.zeros(n_ops)
    for o in inst.order:
        for q in inst.preds[o]:
            np.add.at(lam[o], inst.out_idx[q], ys[q])  # Eq. (11)
        lam[o][~inst.consumes[o]] = 0.0  # an edge carries only the types its head consumes
        total = lam[o].sum()
        load = processing_load(inst, o, lam[o], keep[o])
        p[o] = load / total if total > 0 else 0.0
        rho[o] = load
        soj[o] = sojourn(p[o], total) if total > 0 else 0.0
        scale = 1.0 / load if load > 1.0 else 1.0  # overloaded: only μ of λ is processed
        cap = math.inf if p[o] == 0 else 1.0 / p[o]  # μ_ω of Eq. (14)
        ys[o] = np.array([
            min(scale * selectivity_value(g.kind, g.selectivity * lam[o][idx] * r,
                                          inst.or_semantics), g.f * cap)
            for g, idx, r in zip(inst.operators[o].patterns, inst.in_idx[o], keep[o], strict=True)
        ])
    return FlowState(lam, tuple(ys), p, rho, soj)
