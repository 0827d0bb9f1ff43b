"""Seed 001 through the pipeline: the simulator's overloaded example G lands per-type
telemetry, Spark fits ``selectivity_by_type`` from it, and ``method: shedding`` plans from
the fitted model (global LP, local LP and no shedding), logged and published like any plan."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from optimizers.registry import run_method
from pipelines.fit import fit_model
from streamplan import stages
from streamplan.config import AppConfig, load_config
from streamplan.settings import REPO_ROOT

CONFIG = REPO_ROOT / "configs" / "shedding_overload.yaml"
START = datetime(2026, 1, 1, tzinfo=UTC)
INTERVAL = stages.Interval(START, START + timedelta(seconds=300))


def _with_mode(config: AppConfig, mode: str) -> AppConfig:
    raw = config.model_dump(mode="python")
    raw["method"]["params"]["mode"] = mode
    return AppConfig.model_validate(raw)


@pytest.fixture(scope="module")
def overloaded(spark, tmp_path_factory: pytest.TempPathFactory):
    """(settings, config, fitted model) after simulate → ingest → validate → fit."""
    from streamplan.settings import load_settings

    home = tmp_path_factory.mktemp("shedding-home")
    settings = load_settings(home=home)
    config = load_config(CONFIG)
    types = {n.name: n.type for n in config.nodes}
    stages.simulate_telemetry(settings, config, dict(config.deployment), types, INTERVAL, 0.0)
    stages.run_ingest(spark, settings, config, INTERVAL)
    stages.run_validate(spark, settings, config, INTERVAL)
    model = stages.run_fit(spark, settings, config, INTERVAL)
    return settings, config, model


def test_fit_measures_selectivity_per_event_type(overloaded) -> None:
    _, config, model = overloaded
    sim = config.simulation
    for op, mix in sim.output_types.items():
        fitted = model.operators[op].selectivity_by_type
        assert set(fitted) == set(mix), op
        for etype, share in mix.items():
            truth = sim.selectivity.get(op, 1.0) * share
            assert fitted[etype] == pytest.approx(truth, abs=0.02), (op, etype)
    # w2 runs at its capacity (18 ms per event): it processes ~55.6 of the 100 events/s
    assert model.operators["w2"].arrival_rate_mean == pytest.approx(1000 / 18, rel=0.05)
    assert model.operators["w1"].arrival_rate_mean == pytest.approx(100, rel=0.05)


def test_global_lp_beats_local_lp_and_keeps_the_bound(overloaded) -> None:
    settings, config, model = overloaded
    decisions = {m: run_method(model, _with_mode(config, m)) for m in ("global", "local", "none")}
    glob, local, none = decisions["global"], decisions["local"], decisions["none"]
    assert glob.solver.status == "optimal" and not glob.violations
    assert any(share > 0 for share in glob.shedding["w2"].values()), "w2 must shed"
    assert all(0.0 <= v <= 1.0 for shares in glob.shedding.values() for v in shares.values())
    assert max(glob.predicted.response_time_ms.values()) <= 40.0 * 1.01
    out = {m: d.predicted.extra["weighted_output"] for m, d in decisions.items()}
    assert out["global"] >= out["local"] > 0
    # no shedding keeps the overloaded operator unbounded: flagged, never a feasible plan
    assert none.solver.status == "degraded" and none.violations and not none.shedding
    assert local.solver.status in ("optimal", "feasible")


def test_shedding_plan_is_logged_and_published(overloaded) -> None:
    settings, config, model = overloaded
    plan = stages.run_plan(settings, config, model, INTERVAL)
    result = stages.run_publish(settings, plan)
    assert result.became_current, result.reason
    published = result.current_path.read_text()
    assert '"shedding"' in published and plan.shedding["w2"]
    assert plan.mlflow_run_id
    again = stages.run_plan(settings, config, model, INTERVAL)
    assert again.plan_id == plan.plan_id and again.shedding == plan.shedding, "idempotent"
