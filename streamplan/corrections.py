"""Prediction corrections: fitted nightly from measured plans, kept per app, applied by the
planner to every plan's predicted response times (issue 10, closing the loop).

The nightly recalibration fits :class:`~optimizers.prediction.correction.Correction` on the
gold ``plans_measured`` pairs and stores it as ``<home>/corrections/<app>/<fitted_at>.json``.
When the plan measured up to an hour's start deviated from its prediction, the hourly fit
refits the correction at once (:func:`deviation_trigger`). A plan of interval
``[start, end)`` uses the newest correction fitted at or before ``start``, so re-planning
an interval gives the same plan.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from optimizers.prediction.correction import Correction, fit_correction
from streamplan.config import AppConfig
from streamplan.plan import Decision
from streamplan.asof import load_as_of, save_as_of
from streamplan.settings import Settings

log = logging.getLogger(__name__)


def correction_dir(settings: Settings, app: str) -> Path:
    """Where an app's corrections are kept."""
    return settings.home / "corrections" / app


@dataclass(frozen=True)
class StoredCorrection:
    """A correction as kept: when it was fitted and what made it (``nightly`` or the
    deviations that triggered an early refit)."""

    correction: Correction
    fitted_at: datetime
    trigger: str


def save_correction(settings: Settings, app: str, fitted_at: datetime, correction: Correction,
                    trigger: str = "nightly") -> Path:
    """Store ``correction`` as fitted at ``fitted_at`` (re-fitting at the same time
    overwrites)."""
    doc = {"app": app, "trigger": trigger, **asdict(correction)}
    return save_as_of(correction_dir(settings, app), fitted_at, doc)


def correction_at(settings: Settings, app: str, at: datetime) -> StoredCorrection | None:
    """The newest correction fitted at or before ``at``; ``None`` if there is none."""
    found = load_as_of(correction_dir(settings, app), at)
    if found is None:
        return None
    fitted_at, doc = found
    correction = Correction(alpha=doc["alpha"], beta=doc["beta"], pairs=doc["pairs"],
                            reason=doc["reason"])
    return StoredCorrection(correction, fitted_at, doc["trigger"])


def correction_tag(stored: StoredCorrection) -> str:
    """One line for a plan's MLflow run: which correction it used and why it was fitted."""
    c = stored.correction
    used = c.reason or f"alpha {c.alpha:.4f}, beta {c.beta:.4f} from {c.pairs} pairs"
    return f"fitted {stored.fitted_at.isoformat()} ({stored.trigger}): {used}"[:5000]


def refit_correction(spark, settings: Settings, config: AppConfig, at: datetime,
                     trigger: str = "nightly") -> tuple[Correction, Path]:
    """Fit the correction on every (uncorrected prediction, measurement, ρ) pair of gold
    ``plans_measured`` measured up to ``at`` and store it as fitted at ``at``."""
    from pipelines.measure import measured_pairs

    pairs = measured_pairs(spark, settings.lake, config.app, at)
    correction = fit_correction(pairs, config.fit.correction_min_pairs,
                                config.fit.correction_half_life)
    return correction, save_correction(settings, config.app, at, correction, trigger)


def deviation_trigger(spark, settings: Settings, config: AppConfig, at: datetime) -> list[str]:
    """Seed 000 §7 claim (c), act on measured deviation: when the plan measured up to ``at``
    was measured above its published prediction by more than ``fit.deviation_tolerance``,
    refit the correction now (as of ``at``) instead of waiting for the night. Returns the
    deviation lines (empty: nothing done)."""
    from optimizers.prediction.deviation import deviations
    from pipelines.measure import measurements_until

    predicted, measured = measurements_until(spark, settings.lake, config.app, at)
    late = [d.message() for d in deviations(predicted, measured, config.fit.deviation_tolerance)]
    if late and config.fit.correct_predictions:
        correction, _ = refit_correction(spark, settings, config, at,
                                         "deviation: " + "; ".join(late))
        log.warning("app %s: %s; correction refitted at %s: %s", config.app, "; ".join(late),
                    at.isoformat(), correction.reason or f"{correction.pairs} pairs")
    return late


def query_utilisations(decision: Decision, config: AppConfig) -> dict[str, float]:
    """Per query the plan's bottleneck ρ: the highest predicted utilisation of a node that
    hosts one of its operators (NaN when the plan predicts none)."""
    util = decision.predicted.node_utilisation
    out = {}
    for q in config.queries:
        nodes = {e.node for op in config.query_operators(q.name)
                 for e in decision.placement.get(op, [])}
        known = [util[n] for n in nodes if n in util]
        out[q.name] = max(known) if known else math.nan
    return out


def apply_correction(decision: Decision, config: AppConfig, correction: Correction) -> Decision:
    """``decision`` with corrected predicted response times; the raw ones stay in
    ``predicted.extra['uncorrected_rt_ms.<query>']``. A query whose ρ is unknown or ≥ 1
    keeps its raw prediction. A corrected prediction over the query's bound is a violation."""
    rho = query_utilisations(decision, config)
    bounds = {q.name: q.target_rt_ms for q in config.queries}
    raw = decision.predicted.response_time_ms
    corrected, extra, violations = {}, dict(decision.predicted.extra), list(decision.violations)
    for q, ms in raw.items():
        r = rho.get(q, math.nan)
        usable = math.isfinite(ms) and math.isfinite(r) and 0 <= r < 1
        corrected[q] = correction.apply(ms, r) if usable else ms
        extra[f"uncorrected_rt_ms.{q}"] = ms
        if q in bounds and corrected[q] > bounds[q] >= ms:
            violations.append(f"query {q}: corrected prediction {corrected[q]:.2f} ms > bound "
                              f"{bounds[q]} ms (uncorrected {ms:.2f} ms)")
    extra.update({"correction.alpha": correction.alpha, "correction.beta": correction.beta,
                  "correction.pairs": float(correction.pairs)})
    predicted = decision.predicted.model_copy(update={"response_time_ms": corrected,
                                                      "extra": extra})
    return decision.model_copy(update={"predicted": predicted, "violations": violations})
