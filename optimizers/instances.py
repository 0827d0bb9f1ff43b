"""Synthetic instances for seed 000: the C5 trace (stand-in for the paper's lost Table 1)
and random small instances for comparing the heuristic with the MILP."""

from __future__ import annotations

import random

from optimizers.binpack import BinpackParams, is_viable
from optimizers.queueing import EpnLoad, second_moment

__all__ = ["C5_TRIGGERS", "c5_hours", "random_instance"]

#: Digest check C5: rate changes (events/s) at the hourly triggers H = 1..9; rates start at 0.
C5_TRIGGERS: tuple[dict[str, float], ...] = (
    {"EPN1": 500},
    {"EPN1": 1000, "EPN2": 500},
    {"EPN2": 1000, "EPN3": 500},
    {"EPN3": 1000, "EPN4": 1000},
    {"EPN5": 1000},
    {"EPN2": 500, "EPN3": 500},
    {"EPN4": 700},
    {"EPN2": 0, "EPN3": 0, "EPN4": 0, "EPN5": 0},
    {"EPN1": 0},
)


def c5_hours(b_s: float = 0.0005, target_s: float = 0.0015) -> list[list[EpnLoad]]:
    """EPN loads in force after each trigger of :data:`C5_TRIGGERS` (exponential service).

    Examples
    --------
    >>> hours = c5_hours()
    >>> len(hours), [e.rate for e in hours[1]]
    (9, [1000, 500, 0.0, 0.0, 0.0])
    """
    rates = {f"EPN{i}": 0.0 for i in range(1, 6)}
    hours = []
    for changes in C5_TRIGGERS:
        rates |= changes
        hours.append(
            [EpnLoad(e, r, b_s, second_moment(b_s), target_s) for e, r in rates.items()]
        )
    return hours


def random_instance(
    rng: random.Random, n_epns: int, params: BinpackParams | None = None
) -> tuple[list[EpnLoad], dict[str, str]]:
    """``n_epns`` EPNs that each fit alone on a speed-1 node, spread over 1–3 nodes.

    Service means 0.2–1 ms with SCV in {0, 0.5, 1, 2}, targets 1.5–5 × b, loads ρ_i in
    0.02–0.45 (redrawn until viable alone under ``params``).
    """
    params = params or BinpackParams()
    n_nodes = rng.randint(1, 3)
    loads: list[EpnLoad] = []
    assignment: dict[str, str] = {}
    while len(loads) < n_epns:
        name = f"e{len(loads) + 1:02d}"
        b = rng.uniform(0.2e-3, 1e-3)
        load = EpnLoad(
            name=name,
            rate=rng.uniform(0.02, 0.45) / b,
            service_mean_s=b,
            service_m2_s2=second_moment(b, rng.choice([0.0, 0.5, 1.0, 2.0])),
            target_s=b * rng.uniform(1.5, 5.0),
        )
        if is_viable([load], params):
            loads.append(load)
            assignment[name] = f"n{rng.randint(1, n_nodes)}"
    return loads, assignment
