"""Closing the loop: a correction of predicted response times fitted on measured pairs.

Given the accumulated (predicted, measured, ρ) triples of past plans, fit
``log(measured / predicted) = α + β·ρ/(1−ρ)`` by weighted least squares — a multiplicative
correction whose size may grow with the heavy-traffic factor ρ/(1−ρ) of the P-K and Kingman
waits — with weights halving every ``half_life`` pairs back in time, so slow drift (service
times changing from day to day) is followed. Too few pairs leave the model uncorrected.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Correction", "MIN_PAIRS", "fit_correction"]

MIN_PAIRS = 5


@dataclass(frozen=True)
class Correction:
    """``corrected = predicted · exp(α + β·ρ/(1−ρ))``; ``reason`` says why it is the identity."""

    alpha: float = 0.0
    beta: float = 0.0
    pairs: int = 0
    reason: str | None = None

    @property
    def applied(self) -> bool:
        return self.reason is None

    def apply(self, predicted_ms: float, rho: float) -> float:
        """The corrected prediction; an unstable one (``inf`` or ρ ≥ 1) stays ``inf``.

        Examples
        --------
        >>> Correction(alpha=math.log(2.0)).apply(3.0, 0.5)
        6.0
        >>> Correction(reason="too few pairs").apply(3.0, 0.5)
        3.0
        """
        if not math.isfinite(predicted_ms) or rho >= 1.0:
            return math.inf
        return predicted_ms * math.exp(self.alpha + self.beta * rho / (1.0 - rho))


def fit_correction(
    pairs: Sequence[tuple[float, float, float]],
    min_pairs: int = MIN_PAIRS,
    half_life: float | None = None,
) -> Correction:
    """Fit the correction on ``(predicted_ms, measured_ms, rho)`` triples, oldest first.

    Pairs with an unstable prediction (``inf``) carry no ratio and are skipped. With fewer
    than ``min_pairs`` usable pairs the identity is returned with the reason. With a single
    distinct ρ only ``α`` is fitted.

    Raises
    ------
    ValueError
        On a NaN or non-positive value, a ρ outside [0, 1) with a finite prediction, or a
        non-positive ``half_life``; the message names the pair and field.

    Examples
    --------
    Measured is always 1.5× the prediction: ``α = ln 1.5``, ``β = 0``.

    >>> c = fit_correction([(p, 1.5 * p, r) for p, r in [(2, .2), (3, .4), (5, .6), (9, .8),
    ...                                                  (4, .5)]])
    >>> round(c.apply(10.0, 0.7), 9), round(c.beta, 9) + 0.0
    (15.0, 0.0)
    >>> fit_correction([(2.0, 3.0, 0.5)]).reason
    'only 1 usable (predicted, measured) pairs, need 5: predictions left uncorrected'
    """
    if half_life is not None and not half_life > 0:
        raise ValueError(f"half_life must be > 0, got {half_life}")
    xs, ys, ages = [], [], []
    for i, (pred, meas, rho) in enumerate(pairs):
        for field, value in (("predicted_ms", pred), ("measured_ms", meas)):
            if math.isnan(value) or value <= 0:
                raise ValueError(f"pairs[{i}].{field} must be > 0, got {value}")
        if not math.isfinite(pred):
            continue
        if not 0 <= rho < 1:
            raise ValueError(f"pairs[{i}].rho must be in [0, 1) for a finite prediction, got {rho}")
        xs.append(rho / (1.0 - rho))
        ys.append(math.log(meas / pred))
        ages.append(len(pairs) - 1 - i)
    if len(xs) < min_pairs:
        return Correction(
            pairs=len(xs),
            reason=f"only {len(xs)} usable (predicted, measured) pairs, need {min_pairs}: "
            "predictions left uncorrected",
        )
    w = np.ones(len(xs)) if half_life is None else 0.5 ** (np.asarray(ages) / half_life)
    x, y = np.asarray(xs), np.asarray(ys)
    xm, ym = np.average(x, weights=w), np.average(y, weights=w)
    sxx = float(np.sum(w * (x - xm) ** 2))
    beta = float(np.sum(w * (x - xm) * (y - ym)) / sxx) if sxx > 1e-12 else 0.0
    return Correction(alpha=float(ym - beta * xm), beta=beta, pairs=len(xs))
