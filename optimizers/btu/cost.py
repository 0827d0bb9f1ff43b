"""Cost accounting of seed 002: leasing (every started BTU is paid) plus SLA penalties.

``resource = price · Σ_h max(1, ceil(lifetime_h / BTU))``; an item is delayed at level
k ∈ {1 real time, 2 near real time, 5 relaxed} if its processing time exceeds k·o_slo;
``total_k = resource + P · delayed_k`` and ``compliance_k = 1 − delayed_k / items``.

Digest §10, "cost of a short scenario" (BTU10 priced 1, P = 0.0001, 5 000 delayed items per
cold VM start):

>>> threshold = [(0, 1800), (120, 300), (420, 540)]          # H1; H2 twice
>>> btu_aware = [(0, 1800), (120, 720)]                      # H2 kept until its BTU end
>>> leasing(threshold, btu_s=600, price=1).cost + 10_000 * 0.0001
6.0
>>> leasing(btu_aware, btu_s=600, price=1).cost + 5_000 * 0.0001
4.5
>>> leasing(threshold, btu_s=3600, price=6).cost + 1.0, leasing(btu_aware, 3600, 6).cost + 0.5
(19.0, 12.5)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field

from .inputs import BtuInputError

__all__ = ["LEVELS", "Leasing", "SlaCounts", "leasing", "paid_btus", "totals"]

LEVELS: dict[str, float] = {"rt": 1.0, "nrt": 2.0, "relaxed": 5.0}
_EPS = 1e-6


def paid_btus(start: float, end: float, btu_s: float) -> int:
    """Started BTUs of a lease from ``start`` to ``end`` (at least one).

    >>> paid_btus(0, 600, 600), paid_btus(0, 601, 600), paid_btus(0, 0, 600)
    (1, 2, 1)
    """
    if end < start:
        raise BtuInputError(f"lease ends before it starts: start {start}, end {end}")
    return max(1, math.ceil((end - start) / btu_s - _EPS))


@dataclass(frozen=True)
class Leasing:
    """Leasing figures of one run under one pricing."""

    btu_s: float
    price: float
    leases: int
    paid_btus: int
    prolongations: int
    early_releases: int
    vm_minutes: float
    cost: float

    def as_dict(self) -> dict[str, float]:
        """Plain numbers for JSON and MLflow."""
        return {k: float(v) for k, v in asdict(self).items()}


def leasing(
    lifetimes: Iterable[tuple[float, float]],
    btu_s: float,
    price: float,
    *,
    released_early_after_s: float | None = None,
    still_running: Iterable[bool] | None = None,
) -> Leasing:
    """Price lease lifetimes ``(start, end)`` under one BTU model.

    A release is *early* if more than ``released_early_after_s`` (default: 5 % of the BTU)
    of paid time was left; VMs flagged in ``still_running`` (run end) never count as early.
    """
    if not (isinstance(price, int | float) and math.isfinite(price) and price >= 0):
        raise BtuInputError(f"price must be finite and >= 0, got {price!r}")
    if not (math.isfinite(btu_s) and btu_s > 0):
        raise BtuInputError(f"btu_s must be finite and > 0, got {btu_s!r}")
    window = 0.05 * btu_s if released_early_after_s is None else released_early_after_s
    spans = list(lifetimes)
    running = list(still_running) if still_running is not None else [False] * len(spans)
    btus = early = 0
    minutes = 0.0
    for (start, end), alive in zip(spans, running, strict=True):
        k = paid_btus(start, end, btu_s)
        btus += k
        minutes += (end - start) / 60
        if not alive and start + k * btu_s - end > window + _EPS:
            early += 1
    return Leasing(btu_s, price, len(spans), btus, btus - len(spans), early, minutes,
                   price * btus)


@dataclass
class SlaCounts:
    """Items processed and delayed per operator and level (RT, NRT, relaxed)."""

    items: dict[str, int] = field(default_factory=dict)
    delayed: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, op: str, items: int, delayed: Mapping[str, int]) -> None:
        """Accumulate one batch of measurements of ``op``."""
        self.items[op] = self.items.get(op, 0) + int(items)
        row = self.delayed.setdefault(op, dict.fromkeys(LEVELS, 0))
        for level in LEVELS:
            row[level] += int(delayed[level])

    def total_items(self) -> int:
        """Items over all operators (each operator hop counts, as in the paper)."""
        return sum(self.items.values())

    def total_delayed(self, level: str) -> int:
        """Delayed items at ``level`` over all operators."""
        return sum(row[level] for row in self.delayed.values())

    def compliance(self, level: str) -> float:
        """Share of items not delayed at ``level`` (1 when nothing was processed)."""
        n = self.total_items()
        return 1.0 - self.total_delayed(level) / n if n else 1.0

    def compliance_by_operator(self) -> dict[str, dict[str, float]]:
        """SLA compliance per processing step and level."""
        return {
            op: {lv: (1.0 - self.delayed[op][lv] / n if n else 1.0) for lv in LEVELS}
            for op, n in sorted(self.items.items())
        }


def totals(resource: float, sla: SlaCounts, penalty: float) -> dict[str, float]:
    """``total_k = resource + P · delayed_k`` for each level."""
    if not (math.isfinite(penalty) and penalty >= 0):
        raise BtuInputError(f"penalty must be finite and >= 0, got {penalty!r}")
    return {lv: resource + penalty * sla.total_delayed(lv) for lv in LEVELS}
