"""Detection: a query whose measured response time exceeds its prediction by more than a
tolerance (seed 000 §7 claim (c): act on measured deviation, not only on rate changes)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Deviation", "deviations"]


@dataclass(frozen=True)
class Deviation:
    """Measured above predicted by ``excess`` (fraction of the prediction)."""

    query: str
    predicted_ms: float
    measured_ms: float
    excess: float

    def message(self) -> str:
        """One log line naming the query, both figures and the excess."""
        return (f"query {self.query}: measured {self.measured_ms:.3f} ms exceeds predicted "
                f"{self.predicted_ms:.3f} ms by {self.excess:.1%}")


def deviations(
    predicted_ms: Mapping[str, float], measured_ms: Mapping[str, float], tolerance: float
) -> list[Deviation]:
    """Queries measured above ``(1 + tolerance)·predicted``, sorted by query name. A query
    without a finite prediction or a measurement is not compared.

    Raises
    ------
    ValueError
        When ``tolerance`` is negative or not finite.

    Examples
    --------
    >>> [d.message() for d in deviations({"a": 2.0, "b": 4.0}, {"a": 2.5, "b": 4.1}, 0.1)]
    ['query a: measured 2.500 ms exceeds predicted 2.000 ms by 25.0%']
    """
    if not (tolerance >= 0 and math.isfinite(tolerance)):
        raise ValueError(f"tolerance must be finite and >= 0, got {tolerance}")
    out = []
    for q in sorted(set(predicted_ms) & set(measured_ms)):
        pred, meas = predicted_ms[q], measured_ms[q]
        if math.isfinite(pred) and pred > 0 and meas > pred * (1.0 + tolerance):
            out.append(Deviation(q, pred, meas, meas / pred - 1.0))
    return out
