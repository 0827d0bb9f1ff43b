"""Random inputs of the simulation: Poisson arrivals, service times, output counts."""

from __future__ import annotations

import math

import numpy as np

from streamplan.config import ServiceSpec, WorkloadPhase


def poisson_arrivals(
    phases: list[WorkloadPhase],
    query: str,
    offset_s: float,
    duration_s: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """Sorted arrival times (s from the interval start) of a Poisson process whose rate is
    piecewise constant over the workload timeline; the interval is [offset, offset+duration].

    Per constant-rate segment of length L: N ~ Poisson(rate*L), times i.i.d. uniform, which
    is the order-statistics property of the Poisson process (e.g. Ross, Introduction to
    Probability Models, ch. 5).
    """
    parts = []
    for lo, hi, rate in _segments(phases, query, offset_s, offset_s + duration_s):
        n = rng.poisson(rate * (hi - lo))
        parts.append(np.sort(rng.uniform(lo, hi, n)) - offset_s)
    return np.concatenate(parts) if parts else np.empty(0)


def _segments(
    phases: list[WorkloadPhase], query: str, t0: float, t1: float
) -> list[tuple[float, float, float]]:
    """(start, end, rate) of the constant-rate pieces of the timeline inside [t0, t1]."""
    ordered = sorted(phases, key=lambda p: p.start_s)
    ends = [p.start_s for p in ordered[1:]] + [math.inf]
    out = []
    for phase, end in zip(ordered, ends):
        lo, hi = max(phase.start_s, t0), min(end, t1)
        rate = phase.rates.get(query, 0.0)
        if hi > lo and rate > 0:
            out.append((lo, hi, rate))
    return out


def service_times(spec: ServiceSpec, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` service times in seconds at speed 1 with the spec's mean (and scv, except for
    the exponential, whose scv is 1 by definition)."""
    mean = spec.mean_ms / 1000.0
    if spec.dist == "exponential":
        return rng.exponential(mean, n)
    if spec.dist == "deterministic" or spec.scv == 0:
        return np.full(n, mean)
    if spec.dist == "lognormal":
        # Lognormal moments: E = exp(mu + s2/2), scv = exp(s2) - 1 (Johnson, Kotz &
        # Balakrishnan, Continuous Univariate Distributions vol. 1, ch. 14).
        s2 = math.log1p(spec.scv)
        return rng.lognormal(math.log(mean) - s2 / 2, math.sqrt(s2), n)
    # Uniform on mean*(1 -+ h): variance (2h*mean)^2/12, so scv = h^2/3.
    h = math.sqrt(3 * spec.scv)
    if h > 1:
        raise ValueError(f"uniform service needs scv <= 1/3 (non-negative times), got {spec.scv}")
    return rng.uniform(mean * (1 - h), mean * (1 + h), n)


def output_counts(selectivity: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """Outputs per processed record with mean ``selectivity``: floor(s) + Bernoulli(frac(s))
    (Bernoulli for s <= 1; the least-variance integer law with that mean otherwise)."""
    whole = math.floor(selectivity)
    return whole + (rng.random(n) < selectivity - whole).astype(np.int64)
