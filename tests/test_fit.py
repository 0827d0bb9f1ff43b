"""The Spark fit recovers the simulator's true parameters from telemetry alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pipelines.fit import fit_model, write_gold
from pipelines.tables import gold_path
from streamplan import stages
from streamplan.config import AppConfig

START = datetime(2026, 1, 1, tzinfo=UTC)
INTERVAL = stages.Interval(START, START + timedelta(seconds=300))


def _spread_config(config: AppConfig, service_source: str) -> AppConfig:
    """Each query alone on its own VM (so seed 000's low-load calibration applies)."""
    raw = config.model_dump(mode="python")
    raw["nodes"] = [{"name": f"vm-{i}", "type": "small"} for i in (1, 2, 3)]
    node_of = {q.name: f"vm-{i}" for i, q in enumerate(config.queries, start=1)}
    raw["deployment"] = {o.name: [(node_of[o.query], 1)] for o in config.operators}
    raw["fit"]["service_source"] = service_source
    return AppConfig.model_validate(raw)


def _ingest(spark, settings, config: AppConfig) -> None:
    types = {n.name: n.type for n in config.nodes}
    stages.simulate_telemetry(settings, config, dict(config.deployment), types, INTERVAL, 0.0)
    stages.run_ingest(spark, settings, config, INTERVAL)
    stages.run_validate(spark, settings, config, INTERVAL)


def test_fit_recovers_service_times_and_selectivities(spark, settings, demo_config) -> None:
    _ingest(spark, settings, demo_config)
    model = fit_model(spark, settings.lake, demo_config, INTERVAL.start, INTERVAL.end)
    truth = demo_config.simulation.service
    for name, om in model.operators.items():
        assert om.service_mean_s * 1000 == pytest.approx(truth[name].mean_ms, rel=0.05), name
        assert om.calibration == "direct"
        assert om.service_scv == pytest.approx(1.0, abs=0.15), "exponential service"
        lo, hi = om.service_mean_ci
        assert lo <= om.service_mean_s <= hi
        expected_sel = demo_config.simulation.selectivity.get(name, 1.0)
        assert om.selectivity == pytest.approx(expected_sel, rel=0.08), name
    spoon = model.queries["spoon"]
    assert spoon.service_mean_s * 1000 == pytest.approx(1.0, rel=0.05)
    # the busy phase runs at 300 ev/s: the max over 10 s windows sits near it, the mean below
    assert spoon.arrival_rate_max == pytest.approx(300, rel=0.1)
    assert spoon.arrival_rate_mean < spoon.arrival_rate_p95 <= spoon.arrival_rate_max
    assert spoon.measured_rt_ms and spoon.measured_rt_ms > spoon.service_mean_s * 1000
    assert model.deployment.placement["spoon_match"] == [("vm-1", 1)]
    assert model.delta_versions["operator_metrics"] >= 0
    versions = write_gold(spark, settings.lake, model)
    again = write_gold(spark, settings.lake, model)
    rows = spark.read.format("delta").load(gold_path(settings.lake, "operator_models"))
    assert rows.count() == len(model.operators), "re-fitting the same interval overwrites"
    assert again["operator_models"] == versions["operator_models"] + 1


def test_low_load_calibration(spark, settings, demo_config) -> None:
    config = _spread_config(demo_config, "low_load")
    _ingest(spark, settings, config)
    model = fit_model(spark, settings.lake, config, INTERVAL.start, INTERVAL.end)
    for q in model.queries.values():
        assert q.calibration == "low_load"
        assert q.cal_windows >= config.fit.min_cal_windows
        # seed 000 §3: b = mean(ρ/AR) over low-rate windows recovers the EPN's CPU time/event
        assert q.service_mean_s * 1000 == pytest.approx(1.0, rel=0.1), q.query
        assert q.service_m2_s2 == pytest.approx(2 * q.service_mean_s**2)


def test_low_load_without_windows_names_the_query(spark, settings, demo_config) -> None:
    raw = demo_config.model_dump(mode="python")
    raw["fit"]["service_source"] = "low_load"
    config = AppConfig.model_validate(raw)  # all queries share vm-1: never alone
    _ingest(spark, settings, config)
    with pytest.raises(ValueError, match="fit.service_source=low_load but query 'spoon'"):
        fit_model(spark, settings.lake, config, INTERVAL.start, INTERVAL.end)


def test_no_telemetry_is_a_clear_error(spark, settings, demo_config) -> None:
    with pytest.raises(ValueError, match="no operator telemetry for app 'kitchen'"):
        fit_model(spark, settings.lake, demo_config, INTERVAL.start, INTERVAL.end)
