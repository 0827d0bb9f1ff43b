"""Exact FCFS single-server simulation of one operator under a shedding plan (Lindley).

Departure of event n: D_n = C_n + max_{k≤n}(A_k − C_{k−1}) with C the running sum of service
times (C_0 = 0), so a whole run is two cumulative sums and one running maximum in numpy.
Used to check that a plan keeps the operator's measured mean sojourn under B* within the
paper's 10% tolerance (digest §10, invariant 9).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from .fluid import Keep, processing_load, propagate
from .instance import Instance

__all__ = ["lindley_sojourn", "simulate_sojourn"]


def lindley_sojourn(arrivals: np.ndarray, services: np.ndarray) -> np.ndarray:
    """Sojourn D_n − A_n of every event of a FCFS single-server queue.

    Examples
    --------
    Two events at t = 0 with 1 s service each: the second waits 1 s.

    >>> lindley_sojourn(np.array([0.0, 0.0]), np.array([1.0, 1.0])).tolist()
    [1.0, 2.0]
    """
    c = np.cumsum(services)
    c_prev = np.concatenate(([0.0], c[:-1]))
    departures = c + np.maximum.accumulate(arrivals - c_prev)
    return departures - arrivals


def simulate_sojourn(
    inst: Instance,
    keep: Keep,
    op: int,
    *,
    service: Literal["mm1", "per_event"] = "mm1",
    n_events: int = 400_000,
    warmup: float = 0.1,
    seed: int = 0,
) -> float:
    """Mean sojourn (s) of operator ``op`` under ``keep``, Poisson arrivals at its rate.

    ``mm1``: exponential service with the plan's mean p (Eq. 3), the M/M/1 load the LP
    assumes. ``per_event``: an event of type T costs Σ_γ Bernoulli(r_{γ,T})·Exp(ptime_{γ,T})
    (digest §9 simulator), which tests the M/M/1 assumption itself. The first ``warmup``
    share of events is discarded.
    """
    rng = np.random.default_rng(seed)
    state = propagate(inst, keep)
    lam = state.lam[op]
    total = float(lam.sum())
    arrivals = np.cumsum(rng.exponential(1.0 / total, n_events))
    if service == "mm1":
        p = processing_load(inst, op, lam, keep[op]) / total
        services = rng.exponential(p, n_events)
    else:
        types = rng.choice(lam.size, n_events, p=lam / total)
        services = np.zeros(n_events)
        position = np.full(lam.size, -1)
        for g, idx, r in zip(inst.operators[op].patterns, inst.in_idx[op], keep[op],
                             strict=True):
            position[idx] = np.arange(idx.size)
            pos = position[types]
            hit = pos >= 0
            kept = hit & (rng.random(n_events) < np.where(hit, r[pos], 0.0))
            services[kept] += rng.exponential(g.ptime_s[pos[kept]])
            position[idx] = -1
    return float(lindley_sojourn(arrivals, services)[int(warmup * n_events):].mean())
