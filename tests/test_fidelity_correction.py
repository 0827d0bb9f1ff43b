"""Closing the loop (issue 10): the fitted correction and deviation detection."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optimizers.prediction import MODELS
from optimizers.prediction.catalogue import scenario_classes
from optimizers.prediction.correction import Correction, fit_correction
from optimizers.prediction.deviation import deviations
from optimizers.prediction.measure import project_response_times


def synthetic(alpha: float, beta: float, rhos: list[float]) -> list[tuple[float, float, float]]:
    return [(2.0 + r, (2.0 + r) * math.exp(alpha + beta * r / (1 - r)), r) for r in rhos]


def test_fit_recovers_alpha_and_beta() -> None:
    c = fit_correction(synthetic(0.3, -0.05, [0.1, 0.3, 0.5, 0.7, 0.9, 0.6]))
    assert c.applied and c.pairs == 6
    assert (c.alpha, c.beta) == pytest.approx((0.3, -0.05))
    assert c.apply(4.0, 0.8) == pytest.approx(4.0 * math.exp(0.3 - 0.05 * 4))


def test_half_life_follows_recent_pairs() -> None:
    """The ratio steps from 1.0 to 2.0; a short half-life forgets the old level."""
    pairs = [(1.0, 1.0, 0.5)] * 20 + [(1.0, 2.0, 0.5)] * 5
    flat = fit_correction(pairs)
    recent = fit_correction(pairs, half_life=1.0)
    assert flat.beta == recent.beta == 0.0  # one distinct rho: alpha only
    assert abs(recent.apply(1.0, 0.5) - 2.0) < 0.1 < abs(flat.apply(1.0, 0.5) - 2.0)


def test_too_few_pairs_and_unstable_predictions_leave_it_uncorrected() -> None:
    pairs = synthetic(0.2, 0.0, [0.2, 0.4, 0.6, 0.8]) + [(math.inf, 5.0, 1.2)] * 3
    c = fit_correction(pairs)
    assert not c.applied and c.pairs == 4 and "need 5" in c.reason
    assert c.apply(3.0, 0.5) == 3.0
    assert Correction(alpha=1.0).apply(math.inf, 0.5) == math.inf
    assert Correction(alpha=1.0).apply(3.0, 1.0) == math.inf


@pytest.mark.parametrize(
    ("pairs", "kwargs", "match"),
    [
        ([(1.0, float("nan"), 0.5)], {}, r"pairs\[0\]\.measured_ms must be > 0, got nan"),
        ([(1.0, 1.0, 0.5), (-2.0, 1.0, 0.5)], {}, r"pairs\[1\]\.predicted_ms .*got -2"),
        ([(1.0, 1.0, 1.0)], {}, r"pairs\[0\]\.rho must be in \[0, 1\).*got 1.0"),
        ([], {"half_life": 0.0}, r"half_life must be > 0, got 0.0"),
    ],
)
def test_bad_pairs_name_the_field(pairs: list, kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        fit_correction(pairs, **kwargs)


def test_correction_shrinks_the_seed_model_error_on_simulated_windows() -> None:
    """Fit on eight simulated windows of seed 000's windowed EPN, test on four others."""
    base = next(s for s in scenario_classes()["windowed"] if s.name == "windowed_epn")
    rng = np.random.default_rng(11)
    model = MODELS["mg1_single_server"]
    rows = []
    for k, rho in enumerate(rng.uniform(0.3, 0.8, 12)):
        s = base.at_utilisation(float(rho))
        horizon = 60000 / s.queries[0].rate
        measured = float(project_response_times(s, horizon, k, 0.1 * horizon)["q"].mean())
        rows.append((model.predict(s).rt_ms["q"], measured, float(rho)))
    c = fit_correction(rows[:8])
    raw = np.mean([abs(p - m) / m for p, m, _ in rows[8:]])
    corrected = np.mean([abs(c.apply(p, r) - m) / m for p, m, r in rows[8:]])
    assert corrected < 0.5 * raw


def test_deviations_flag_only_measured_above_tolerance() -> None:
    predicted = {"a": 2.0, "b": 4.0, "c": math.inf, "d": 1.0}
    measured = {"a": 2.21, "b": 4.4, "c": 50.0, "e": 9.0}
    found = deviations(predicted, measured, tolerance=0.1)
    assert [d.query for d in found] == ["a"]
    assert found[0].excess == pytest.approx(0.105)
    assert "query a: measured 2.210 ms exceeds predicted 2.000 ms by 10.5%" == found[0].message()
    assert deviations(predicted, measured, tolerance=0.0)[1].query == "b"
    with pytest.raises(ValueError, match=r"tolerance must be finite and >= 0, got -0.1"):
        deviations(predicted, measured, tolerance=-0.1)
