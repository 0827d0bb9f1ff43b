"""M/M/c formulas the adapter uses to predict o_d, o_queue and SLA compliance from the
fitted model (an operator type = one FCFS queue served by its c instances).

Examples
--------
M/M/1 at ρ = 0.5 (μ = 1): P(wait) = 0.5, Wq = 1, Lq = 0.5, P(T > t) = e^{−0.5 t}:

>>> erlang_c(1, 0.5), mean_wait(1, 0.5, 1.0), mean_queue(1, 0.5, 1.0)
(0.5, 1.0, 0.5)
>>> round(sojourn_tail(1, 0.5, 1.0, 2.0), 6) == round(math.exp(-1.0), 6)
True

M/M/2 with a = 1 (the textbook value C(2, 1) = 1/3):

>>> round(erlang_c(2, 1.0), 6)
0.333333
"""

from __future__ import annotations

import math

from optimizers.queueing import erlang_c

__all__ = ["erlang_c", "mean_queue", "mean_wait", "sojourn_tail"]


def mean_wait(c: int, lam: float, mu: float) -> float:
    """Wq of M/M/c (s); ``inf`` when ρ ≥ 1."""
    if lam <= 0:
        return 0.0
    if lam >= c * mu:
        return math.inf
    return erlang_c(c, lam / mu) / (c * mu - lam)


def mean_queue(c: int, lam: float, mu: float) -> float:
    """Lq = λ·Wq (items waiting); ``inf`` when ρ ≥ 1."""
    w = mean_wait(c, lam, mu)
    return lam * w if math.isfinite(w) else math.inf


def sojourn_tail(c: int, lam: float, mu: float, t: float) -> float:
    """P(wait + service > t) in M/M/c FCFS; 1 when ρ ≥ 1."""
    if t <= 0:
        return 1.0
    if lam >= c * mu:
        return 1.0
    a = lam / mu
    pw = erlang_c(c, a)
    k = c - 1 - a
    if abs(k) < 1e-9:
        return math.exp(-mu * t) * (1 + pw * mu * t)
    return min(1.0, math.exp(-mu * t) * (1 + pw / k * (1 - math.exp(-mu * k * t))))
