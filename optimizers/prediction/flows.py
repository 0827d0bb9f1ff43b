"""Two-moment flow formulas of Whitt's Queueing Network Analyzer (QNA).

Reference: W. Whitt, "The Queueing Network Analyzer", Bell System Technical Journal 62(9),
1983 — GI/G/1 wait with the Krämer–Langenbach-Belz correction, departure, splitting and
superposition (asymptotic method) of flows described by rate and SCV.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["departure_scv", "gg1_wait", "split_scv", "superpose_scv"]


def gg1_wait(rho: float, service_mean: float, ca2: float, cs2: float) -> float:
    """Mean FIFO wait in a GI/G/1 queue (Kingman / QNA with the KLB factor); ``inf`` for ρ ≥ 1.

    ``W_q = b·ρ/(1−ρ)·(c_a² + c_s²)/2·g`` with ``g = exp(−2(1−ρ)(1−c_a²)²/(3ρ(c_a²+c_s²)))``
    when ``c_a² < 1`` and ``g = 1`` otherwise (Whitt 1983, the Krämer–Langenbach-Belz
    approximation; Kingman 1961).
    With Poisson arrivals (``c_a² = 1``) this is the Pollaczek–Khinchine mean, exact.

    Examples
    --------
    M/M/1 at ρ = 0.5 with b = 2 ms: ``W_q = b·ρ/(1−ρ) = 2`` ms.

    >>> gg1_wait(0.5, 2.0, 1.0, 1.0)
    2.0
    >>> round(gg1_wait(0.5, 2.0, 1.0, 0.0), 12)  # M/D/1: half the M/M/1 wait
    1.0
    >>> gg1_wait(1.0, 2.0, 1.0, 1.0)
    inf
    """
    if rho >= 1.0:
        return math.inf
    if rho <= 0.0 or ca2 + cs2 <= 0.0:
        return 0.0  # no load, or D/D/1: nobody waits
    g = 1.0
    if ca2 < 1.0:
        g = math.exp(-2.0 * (1.0 - rho) * (1.0 - ca2) ** 2 / (3.0 * rho * (ca2 + cs2)))
    return service_mean * rho / (1.0 - rho) * (ca2 + cs2) / 2.0 * g


def departure_scv(rho: float, ca2: float, cs2: float) -> float:
    """SCV of the departure flow of a single-server station, ``c_d² = ρ²c_s² + (1−ρ²)c_a²``
    (Whitt 1983, departure flow of a single-server node).

    Examples
    --------
    Burke: M/M/1 departures are Poisson; a deterministic server at ρ = 0.5 smooths them.

    >>> departure_scv(0.7, 1.0, 1.0)
    1.0
    >>> departure_scv(0.5, 1.0, 0.0)
    0.75
    """
    return rho**2 * cs2 + (1.0 - rho**2) * ca2


def split_scv(p: float, c2: float) -> float:
    """SCV of a flow thinned by independent Bernoulli(p) routing, ``p·c² + 1 − p``
    (Whitt 1983, splitting).

    Examples
    --------
    >>> round(split_scv(0.25, 0.2), 12)
    0.8
    >>> split_scv(1.0, 0.5)
    0.5
    """
    return p * c2 + 1.0 - p


def superpose_scv(rates: Sequence[float], scvs: Sequence[float]) -> float:
    """SCV of a superposition of independent flows, rate-weighted mean of their SCVs
    (asymptotic method, Whitt 1983, superposition); 1 when no flow carries load.

    Examples
    --------
    >>> superpose_scv([1.0, 3.0], [0.0, 2.0])
    1.5
    """
    total = sum(rates)
    if total <= 0:
        return 1.0
    return sum(r * c for r, c in zip(rates, scvs, strict=True)) / total
