"""Seed 002's evaluation setting: the 9-operator manufacturing topology (Table 2), its
sources (Table 1, ×125 time compression), the VM (4 vCPU, 7 GB) and the four arrival
patterns (digest §6, with the choices of §8.10).

>>> rates = per_machine_rates()
>>> round(rates["O6"], 3), round(rates["O7"], 3), round(rates["O8"], 3)
(20.833, 6.25, 0.424)
>>> [stepwise_pattern()[k] for k in (0, 1, 2, 3, 4)]
[2, 5, 8, 5, 2]
>>> len(stepwise_pattern()), len(two_level_pattern()), two_level_pattern()[:3]
(30, 15, [2, 8, 2])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .inputs import SHARES_PER_CORE, BtuInputError, OperatorType, VmType
from .sim import SimOperator, SimSource

__all__ = [
    "BTU_PRICES",
    "KAPPA",
    "PATTERNS",
    "TABLE2",
    "Pattern",
    "manufacturing_sim",
    "manufacturing_types",
    "paper_vm",
    "per_machine_rates",
    "random_walk_pattern",
    "stepwise_pattern",
    "two_level_pattern",
]

# name, description, o_slo (ms), CPU shares, memory MB, image MB, items in per item out,
# successors (Table 2; "1:3" of O1 = one item to each of O3..O5)
TABLE2: dict[str, tuple[str, float, float, float, float, int, tuple[str, ...]]] = {
    "O1": ("Parse & Distribute (OCR)", 1500, 660, 452, 89, 1, ("O3", "O4", "O5")),
    "O2": ("Filter Availability", 600, 131, 524, 68, 50, ("O8",)),
    "O3": ("Calc. Performance", 750, 100, 430, 68, 1, ("O7",)),
    "O4": ("Calc. Availability", 750, 83, 502, 68, 1, ("O7",)),
    "O5": ("Calc. Quality", 750, 77, 527, 68, 1, ("O7",)),
    "O6": ("Monitor Temperature", 600, 65, 440, 68, 100, ("O8",)),
    "O7": ("Calc. OEE (joins 3)", 700, 46, 464, 68, 3, ("O9",)),
    "O8": ("Inform User", 500, 74, 466, 68, 1, ()),
    "O9": ("Generate Report", 1300, 47, 452, 70, 300, ("O8",)),
}
# Table 1 per machine, items per real minute, sent compressed ×125 (one minute every 480 ms)
SOURCES = {"S1": ("O2", 5.0), "S2": ("O1", 1.0), "S3": ("O6", 10.0)}
COMPRESSION = 125.0
KAPPA = 5.0  # digest §8.1: service mean b = o_slo/κ, hop = o_slo − b
BTU_PRICES = {600: 1.0, 1800: 3.0, 3600: 6.0}
PATTERN_MINUTES = 120


def manufacturing_types(kappa: float = KAPPA) -> dict[str, OperatorType]:
    """Table 2 as operator types (hop = o_slo·(1 − 1/κ))."""
    return {
        o: OperatorType(o, slo, cpu, mem, img, hop_ms=slo * (1 - 1 / kappa))
        for o, (_, slo, cpu, mem, img, _, _) in TABLE2.items()
    }


def paper_vm(btu_s: float) -> VmType:
    """The paper's VM (4 vCPU, 7 GB) at the paper's price for a BTU of ``btu_s``."""
    if btu_s not in BTU_PRICES:
        raise BtuInputError(f"btu_s must be one of {sorted(BTU_PRICES)}, got {btu_s!r}")
    return VmType(f"vm-btu{int(btu_s // 60)}", 4 * SHARES_PER_CORE, 7 * 1024.0,
                  BTU_PRICES[btu_s], float(btu_s))


def per_machine_rates() -> dict[str, float]:
    """Input rate of every operator per machine (items/s), propagated through Table 2."""
    rates = dict.fromkeys(TABLE2, 0.0)
    for target, per_min in SOURCES.values():
        rates[target] += per_min * COMPRESSION / 60.0
    for o in ("O1", "O2", "O6", "O3", "O4", "O5", "O7", "O9"):  # topological
        _, _, _, _, _, every, succ = TABLE2[o]
        for s in succ:
            rates[s] += rates[o] / every
    return rates


def manufacturing_sim(kappa: float = KAPPA) -> tuple[list[SimOperator], list[SimSource]]:
    """Simulator operators and sources of the manufacturing topology."""
    ops = [
        SimOperator(o, slo / kappa / 1000.0, slo * (1 - 1 / kappa) / 1000.0, slo / 1000.0,
                    every, succ)
        for o, (_, slo, _, _, _, every, succ) in TABLE2.items()
    ]
    sources = [SimSource(s, t, per_min * COMPRESSION / 60.0) for s, (t, per_min) in SOURCES.items()]
    return ops, sources


# --- arrival patterns (machines over time) ------------------------------------------------------
@dataclass(frozen=True)
class Pattern:
    """Machines emitting, one value per step of ``step_s`` seconds."""

    name: str
    levels: tuple[int, ...]
    step_s: float
    seed: int | None = None

    @property
    def duration_s(self) -> float:
        """Length of the pattern."""
        return len(self.levels) * self.step_s

    def at(self, t: float) -> int:
        """Machines at time ``t`` (the last level holds past the end)."""
        k = min(int(t // self.step_s), len(self.levels) - 1)
        return self.levels[max(k, 0)]


def stepwise_pattern(minutes: int = PATTERN_MINUTES, hold_min: int = 4) -> list[int]:
    """Three levels (2, 5, 8) cycled 2-5-8-5 from low, each held ``hold_min`` minutes."""
    cycle = [2, 5, 8, 5]
    return [cycle[k % 4] for k in range(minutes // hold_min)]


def two_level_pattern(minutes: int = PATTERN_MINUTES, hold_min: int = 8) -> list[int]:
    """Lowest and highest (2, 8), each held ``hold_min`` minutes."""
    return [(2, 8)[k % 2] for k in range(minutes // hold_min)]


def random_walk_pattern(
    index: int, minutes: int = PATTERN_MINUTES, step_s: float = 48.0, first_seed: int = 0
) -> tuple[list[int], int]:
    """The ``index``-th (1 or 2) random walk of Eq. (6) from m = 4 that stays in [1, 8]:
    seeds ``first_seed, first_seed + 1, …`` are tried in order and rejected when the walk
    leaves the band. Returns the levels and the seed used.

    >>> levels, seed = random_walk_pattern(1)
    >>> len(levels), levels[0], min(levels) >= 1 and max(levels) <= 8
    (150, 4, True)
    """
    steps = int(minutes * 60 // step_s)
    found = 0
    seed = first_seed
    while True:
        r = np.random.default_rng(seed).uniform(0, 1, steps - 1)
        moves = np.where(r < 0.4, -1, np.where(r > 0.6, 1, 0))
        walk = np.concatenate([[4], 4 + np.cumsum(moves)])
        if walk.min() >= 1 and walk.max() <= 8:
            found += 1
            if found == index:
                return walk.astype(int).tolist(), seed
        seed += 1
        if seed - first_seed > 10_000_000:  # pragma: no cover - never reached in practice
            raise BtuInputError("no random walk stays in [1, 8]")


def _walk(index: int) -> Pattern:
    levels, seed = random_walk_pattern(index)
    return Pattern(f"random_walk_{index}", tuple(levels), 48.0, seed)


PATTERNS: dict[str, Callable[[], Pattern]] = {
    "stepwise": lambda: Pattern("stepwise", tuple(stepwise_pattern()), 240.0),
    "two_level": lambda: Pattern("two_level", tuple(two_level_pattern()), 480.0),
    "random_walk_1": lambda: _walk(1),
    "random_walk_2": lambda: _walk(2),
}
