"""Closing the loop (issue 10): a multi-day replay with slowly drifting service times.

Every window of every day, the planner predicts the mean response time of seed 000's
windowed EPN (``windowed_epn``, one VM) from the service times fitted the night before, the
project simulator measures it under the true (drifted) service times, and the pair joins
the history. Each night the correction ``log(measured/predicted) = α + β·ρ/(1−ρ)`` is refit
on the history (``optimizers/prediction/correction.py``, recency half-life of two days'
windows) and applied to the next day's predictions. Reported per day and model: MAPE of
the raw and of the corrected predictions.

Run: ``.venv/bin/python -m pytest -m bench benchmarks/test_fidelity_correction.py``. Size:
``FIDELITY_DAYS`` (default 7), ``FIDELITY_WINDOWS`` (windows per day, default 12),
``FIDELITY_WINDOW_EVENTS`` (events simulated per window, default 100000).
Results: ``benchmarks/results/fidelity_correction.json``.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from optimizers.prediction import MODELS, Scenario
from optimizers.prediction.catalogue import scenario_classes
from optimizers.prediction.correction import Correction, fit_correction
from optimizers.prediction.measure import project_response_times

pytestmark = pytest.mark.bench

DAYS = int(os.environ.get("FIDELITY_DAYS", "7"))
WINDOWS = int(os.environ.get("FIDELITY_WINDOWS", "12"))
EVENTS = int(os.environ.get("FIDELITY_WINDOW_EVENTS", "100000"))
DRIFT_PER_DAY = 0.03  # true service times grow 3 % a day
RHO_RANGE = (0.3, 0.85)


def scaled(s: Scenario, factor: float) -> Scenario:
    """Every operator's service mean times ``factor``."""
    return replace(s, ops=tuple(replace(o, mean_ms=o.mean_ms * factor) for o in s.ops))


def replay() -> list[dict[str, Any]]:
    """One row per (day, window): true and fitted ρ, measured and each model's raw and
    corrected prediction, and the correction in force."""
    base = next(s for s in scenario_classes()["windowed"] if s.name == "windowed_epn")
    rng = np.random.default_rng(2026)
    history: dict[str, list[tuple[float, float, float]]] = {m: [] for m in MODELS}
    rows = []
    for day in range(DAYS):
        fitted_factor = 1.0 + DRIFT_PER_DAY * max(day - 0.5, 0.0)  # last night's fit
        corrections = {m: fit_correction(h, half_life=2 * WINDOWS) for m, h in history.items()}
        for k in range(WINDOWS):
            true_factor = 1.0 + DRIFT_PER_DAY * (day + k / WINDOWS)
            rho_true = float(rng.uniform(*RHO_RANGE))
            truth = scaled(base, true_factor).at_utilisation(rho_true)
            seen = scaled(truth, fitted_factor / true_factor)
            rho_seen = max(seen.utilisation().values())
            rate = truth.queries[0].rate
            horizon = EVENTS / rate / 0.9  # 10 % warm-up
            rts = project_response_times(truth, horizon, day * 1000 + k, 0.1 * horizon)
            measured = float(rts["q"].mean())
            row: dict[str, Any] = {"day": day + 1, "window": k + 1, "rho_true": rho_true,
                                   "rho_fitted": rho_seen, "measured_ms": measured}
            for name, model in MODELS.items():
                pred = model.predict(seen).rt_ms["q"]
                corr = corrections[name]
                row[f"{name}_ms"] = pred
                row[f"{name}_corrected_ms"] = corr.apply(pred, rho_seen)
                row[f"{name}_correction"] = _describe(corr)
                history[name].append((pred, measured, rho_seen))
            rows.append(row)
    return rows


def _describe(c: Correction) -> dict[str, Any]:
    return {"alpha": c.alpha, "beta": c.beta, "pairs": c.pairs, "reason": c.reason}


def per_day(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """MAPE of raw and corrected predictions per day and model."""
    out = []
    for day in range(1, DAYS + 1):
        mine = [r for r in rows if r["day"] == day]
        entry: dict[str, Any] = {"day": day}
        for name in MODELS:
            for kind, key in (("raw", f"{name}_ms"), ("corrected", f"{name}_corrected_ms")):
                entry[f"{name}_{kind}_mape"] = statistics.fmean(
                    abs(r[key] - r["measured_ms"]) / r["measured_ms"] for r in mine
                )
            entry[f"{name}_correction"] = mine[0][f"{name}_correction"]
        out.append(entry)
    return out


def test_correction_replay(write_result) -> None:
    rows = replay()
    days = per_day(rows)
    later = days[1:]  # day 1 has no history: uncorrected by design
    summary = {
        name: {
            "raw_mape_days_2_on": statistics.fmean(d[f"{name}_raw_mape"] for d in later),
            "corrected_mape_days_2_on": statistics.fmean(
                d[f"{name}_corrected_mape"] for d in later
            ),
            "corrected_mape_last_day": days[-1][f"{name}_corrected_mape"],
        }
        for name in MODELS
    }
    write_result("fidelity_correction", {
        "run": {"days": DAYS, "windows_per_day": WINDOWS, "events_per_window": EVENTS,
                "drift_per_day": DRIFT_PER_DAY, "rho_range": list(RHO_RANGE),
                "scenario": "windowed_epn (seed 000's 3-operator windowed EPN on one VM)"},
        "paper": "seed 000 has no correction; its advice (§7 claim c) is to act on measured "
                 "deviation, which this correction and optimizers/prediction/deviation.py do",
        "notes": [
            "fitted service times lag the truth by half a day of drift (nightly fit)",
            "measured = one project-simulator run per window (10 % warm-up dropped)",
            "the replay calls fit_correction on the pairs directly; in the pipeline the same "
            "function is fitted nightly on gold plans_measured and applied by the planner "
            "(streamplan/corrections.py; tests/test_corrections.py, tests/test_dags.py)",
        ],
        "summary": summary,
        "per_day": days,
        "windows": rows,
    })
    seed = summary["mg1_single_server"]
    assert seed["corrected_mape_days_2_on"] < seed["raw_mape_days_2_on"]
