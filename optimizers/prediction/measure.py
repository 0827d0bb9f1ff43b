"""Measured mean response times of a scenario: the project simulator and ciw, over seeds."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats

from optimizers.prediction.ciw_model import ciw_response_times
from optimizers.prediction.scenarios import START, Scenario
from streamplan.simulation import simulate

__all__ = ["Measurement", "measure", "project_response_times", "SIMULATORS"]

Runner = Callable[[Scenario, float, int, float], dict[str, np.ndarray]]


def project_response_times(
    scenario: Scenario, duration_s: float, seed: int, warmup_s: float = 0.0
) -> dict[str, np.ndarray]:
    """Response times (ms) per query from one run of ``streamplan.simulation.simulate``.

    The simulator returns completed events in arrival order without their arrival times, so
    the warm-up drops the first ``warmup_s / duration_s`` share of each query's events."""
    scenario.check_stable()
    config = scenario.app_config(duration_s, seed)
    res = simulate(config, scenario.placement(), {n: "unit" for n in scenario.nodes}, START,
                   duration_s, seed=seed)
    cut = warmup_s / duration_s
    return {q: rt[math.ceil(cut * rt.size):] for q, rt in res.response_times_ms.items()}


SIMULATORS: dict[str, Runner] = {"project": project_response_times, "ciw": ciw_response_times}


@dataclass(frozen=True)
class Measurement:
    """Mean response time per query (ms) over independent replications and the half-width
    of its 95 % Student-t confidence interval."""

    mean_ms: dict[str, float]
    ci_ms: dict[str, float]
    events: dict[str, int]


def measure(
    scenario: Scenario, simulator: str, events: int, seeds: list[int], warmup: float = 0.1
) -> Measurement:
    """Run ``simulator`` ("project" or "ciw") once per seed for about ``events`` input events
    (the first ``warmup`` share of the horizon discarded) and pool the per-seed means.

    Raises
    ------
    ValueError
        On an unknown simulator, fewer than two seeds or ``events < 1``.
    """
    if simulator not in SIMULATORS:
        raise ValueError(f"simulator: unknown {simulator!r} (known: {sorted(SIMULATORS)})")
    if len(seeds) < 2:
        raise ValueError(f"seeds: need at least 2 replications for a CI, got {len(seeds)}")
    if events < 1:
        raise ValueError(f"events must be >= 1, got {events}")
    total_rate = sum(q.rate for q in scenario.queries)
    duration = events / total_rate / (1.0 - warmup)
    runs = [SIMULATORS[simulator](scenario, duration, s, warmup * duration) for s in seeds]
    mean, ci, count = {}, {}, {}
    for q in scenario.queries:
        per_seed = np.array([r[q.name].mean() for r in runs])
        half = stats.t.ppf(0.975, len(seeds) - 1) * per_seed.std(ddof=1) / math.sqrt(len(seeds))
        mean[q.name], ci[q.name] = float(per_seed.mean()), float(half)
        count[q.name] = int(sum(r[q.name].size for r in runs))
    return Measurement(mean, ci, count)
