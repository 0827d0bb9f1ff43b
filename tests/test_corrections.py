"""Closing the loop (issue 10): measured plans → gold pairs with ρ → the nightly correction →
the planner's corrected predictions, on real Spark, Delta and MLflow."""

from __future__ import annotations

import math
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from optimizers.prediction.correction import Correction
from pipelines.measure import measured_pairs, record_measurement
from streamplan.config import load_config
from streamplan.corrections import (
    apply_correction,
    correction_at,
    deviation_trigger,
    query_utilisations,
)
from streamplan.plan import Decision, Prediction, Replicas, SolverStats
from streamplan.settings import REPO_ROOT, load_settings
from streamplan.stages import Interval, run_plan
from tests.test_binpack import BUSY, fitted

DEMO = REPO_ROOT / "configs" / "demo.yaml"
DAY_END = datetime(2026, 1, 6, tzinfo=UTC)


def decision(rt_ms: dict[str, float], util: dict[str, float]) -> Decision:
    """Demo queries: spoon's operators on vm-a, knife's and fork's on vm-b."""
    config = load_config(DEMO)
    node_of = {"spoon": "vm-a", "knife": "vm-b", "fork": "vm-b"}
    return Decision(
        placement={o.name: [Replicas(node=node_of[o.query], replicas=1)]
                   for o in config.operators},
        nodes={"vm-a": "keep", "vm-b": "keep"},
        node_types={"vm-a": "small", "vm-b": "small"},
        predicted=Prediction(response_time_ms=rt_ms, node_utilisation=util),
        solver=SolverStats(name="test", status="heuristic", time_s=0.0),
    )


def test_corrected_predictions_keep_the_raw_ones_and_flag_a_broken_bound() -> None:
    config = load_config(DEMO)
    bounds = {q.name: q.target_rt_ms for q in config.queries}
    raw = {"spoon": 1.0, "knife": bounds["knife"] * 0.9, "fork": 4.0}
    d = decision(raw, {"vm-a": 0.5, "vm-b": 0.75})
    assert query_utilisations(d, config) == {"spoon": 0.5, "knife": 0.75, "fork": 0.75}
    c = Correction(alpha=math.log(1.25), beta=0.0, pairs=9)
    out = apply_correction(d, config, c)
    assert out.predicted.response_time_ms == pytest.approx(
        {"spoon": 1.25, "knife": raw["knife"] * 1.25, "fork": 5.0})
    assert out.predicted.extra["uncorrected_rt_ms.knife"] == raw["knife"]
    assert out.predicted.extra["correction.pairs"] == 9
    assert [v.split(":")[0] for v in out.violations] == ["query knife"]
    # an unknown ρ (no node utilisation predicted) keeps the raw prediction
    blind = apply_correction(decision(raw, {}), config, c)
    assert blind.predicted.response_time_ms == raw


def test_nightly_correction_from_gold_pairs_is_applied_by_the_next_plans(
    spark, tmp_path: Path, monkeypatch
) -> None:
    from streamplan import orchestration

    config_path = tmp_path / "kitchen.yaml"
    shutil.copy(DEMO, config_path)
    monkeypatch.setenv("STREAMPLAN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("STREAMPLAN_MLFLOW_URI", raising=False)
    settings = load_settings()
    app = load_config(config_path).app
    # a day of hourly plans measured 1.3x over their (uncorrected) prediction, ρ varying
    hours = [DAY_END - timedelta(hours=h) for h in range(8, 0, -1)]
    for i, end in enumerate(hours):
        rho = 0.2 + 0.08 * i
        record_measurement(
            spark, settings.lake, f"plan-{i}", app, {"spoon": 1.3 * (2 + i)},
            {"spoon": 2.0 + i}, end, {"spoon": 2.0 + i}, {"spoon": rho})
    # a plan measured after the night is not used; a row without ρ is left out
    record_measurement(spark, settings.lake, "later", app, {"spoon": 50.0}, {"spoon": 1.0},
                       DAY_END + timedelta(hours=1), None, {"spoon": 0.5})
    record_measurement(spark, settings.lake, "no-rho", app, {"spoon": 50.0}, {"spoon": 1.0},
                       hours[0])
    pairs = measured_pairs(spark, settings.lake, app, DAY_END)
    assert [p[0] for p in pairs] == [2.0 + i for i in range(8)]

    out = orchestration.fit_prediction_correction(str(config_path), DAY_END)
    assert out["applied"] and out["pairs"] == 8
    assert out["alpha"] == pytest.approx(math.log(1.3), abs=1e-9)
    assert out["beta"] == pytest.approx(0.0, abs=1e-9)
    run = MlflowClient(settings.tracking_uri).get_run(out["mlflow_run_id"])
    assert run.data.metrics["correction.pairs"] == 8
    assert run.data.tags["streamplan.correction"] == "applied"
    # the planner uses it for intervals starting at or after the night's end, not before
    assert correction_at(settings, app, DAY_END - timedelta(seconds=1)) is None
    assert correction_at(settings, app, DAY_END + timedelta(hours=3)).correction.alpha \
        == out["alpha"]
    config = load_config(config_path)
    model = fitted(config, BUSY)
    after = run_plan(settings, config, model, Interval(DAY_END, DAY_END + timedelta(hours=1)))
    before = run_plan(settings, config, model, Interval(DAY_END - timedelta(hours=1), DAY_END))
    assert "uncorrected_rt_ms.spoon" not in before.predicted.extra
    for q, ms in before.predicted.response_time_ms.items():
        assert after.predicted.extra[f"uncorrected_rt_ms.{q}"] == ms
        assert after.predicted.response_time_ms[q] == pytest.approx(1.3 * ms)
    tags = MlflowClient(settings.tracking_uri).get_run(after.mlflow_run_id).data.tags
    assert tags["streamplan.correction"].startswith(f"fitted {DAY_END.isoformat()} (nightly)")


def test_a_measured_deviation_refits_the_correction_at_once(spark, tmp_path: Path,
                                                             monkeypatch) -> None:
    """Seed 000's advice: the hour after a plan is measured 30% over its prediction, the
    hourly fit refits the correction instead of waiting for the night; an hour measured as
    predicted refits nothing."""
    monkeypatch.setenv("STREAMPLAN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("STREAMPLAN_MLFLOW_URI", raising=False)
    settings, config = load_settings(), load_config(DEMO)
    hours = [DAY_END + timedelta(hours=h) for h in range(7)]
    for i, end in enumerate(hours[:6]):
        record_measurement(spark, settings.lake, f"plan-{i}", config.app,
                           {"spoon": 1.3 * (2 + i)}, {"spoon": 2.0 + i}, end,
                           {"spoon": 2.0 + i}, {"spoon": 0.3 + 0.1 * i})
    record_measurement(spark, settings.lake, "as-predicted", config.app, {"spoon": 3.0},
                       {"spoon": 3.0}, hours[6], None, {"spoon": 0.4})
    late = deviation_trigger(spark, settings, config, hours[5])
    assert late == ["query spoon: measured 9.100 ms exceeds predicted 7.000 ms by 30.0%"]
    stored = correction_at(settings, config.app, hours[5] + timedelta(minutes=30))
    assert stored.fitted_at == hours[5] and stored.trigger == f"deviation: {late[0]}"
    assert stored.correction.pairs == 6
    assert stored.correction.alpha == pytest.approx(math.log(1.3), abs=1e-9)
    assert deviation_trigger(spark, settings, config, hours[6]) == []
    assert correction_at(settings, config.app, hours[6]).fitted_at == hours[5]


def test_too_few_pairs_store_the_identity_with_its_reason(spark, tmp_path: Path,
                                                          monkeypatch) -> None:
    from streamplan import orchestration

    config_path = tmp_path / "kitchen.yaml"
    shutil.copy(DEMO, config_path)
    monkeypatch.setenv("STREAMPLAN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("STREAMPLAN_MLFLOW_URI", raising=False)
    out = orchestration.fit_prediction_correction(str(config_path), DAY_END)
    assert not out["applied"] and out["pairs"] == 0
    assert "need 5" in out["reason"]
    stored = correction_at(load_settings(), "kitchen", DAY_END)
    assert stored is not None and not stored.correction.applied
