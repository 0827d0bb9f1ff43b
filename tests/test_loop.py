"""The whole loop on real Spark, Delta, GE, SCIP and MLflow, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pytest
import yaml
from mlflow.tracking import MlflowClient

from streamplan.cli import main
from streamplan.history import plan_history
from streamplan.publish import current_plan
from streamplan.settings import load_settings
from tests.conftest import DEMO_CONFIG


@pytest.fixture(scope="module")
def demo_home(spark, tmp_path_factory) -> Path:
    """A home with one demo run done (the `spark` fixture keeps one JVM for all tests)."""
    home = tmp_path_factory.mktemp("loop") / "home"
    assert main(["--home", str(home), "demo"]) == 0
    return home


def test_demo_publishes_logs_and_measures(demo_home: Path) -> None:
    settings = load_settings(demo_home)
    plan = current_plan(settings.publish_dir, "kitchen")
    assert plan is not None and plan.feasible
    # the busy phase overloads vm-1 (ρ≈0.75, W≈3 ms > 1.2·2 ms): the heuristic must hire
    assert "hire" in plan.nodes.values()
    for q, w in plan.predicted.response_time_ms.items():
        assert w <= 2.0 * 1.2 + 1e-9, f"{q} predicted outside the HW band"
    run = MlflowClient(settings.tracking_uri).get_run(plan.mlflow_run_id)
    assert run.data.tags["streamplan.live"] == "true"
    for q in ("spoon", "knife", "fork"):
        predicted = run.data.metrics[f"predicted_rt_ms.{q}"]
        measured = run.data.metrics[f"measured_rt_ms.{q}"]
        # the model is exact for this world (run-to-completion M/G/1): within 15% over 10 min
        assert measured == pytest.approx(predicted, rel=0.15), q
    assert run.data.tags["streamplan.deviation"] == "none", "no query beyond the 20% tolerance"
    arts = {a.path for a in MlflowClient(settings.tracking_uri).list_artifacts(run.info.run_id)}
    assert {"plan", "model", "plots", "validation"} <= arts
    mlflow.set_tracking_uri(settings.tracking_uri)
    logged = mlflow.artifacts.load_dict(f"runs:/{run.info.run_id}/plan/plan.json")
    assert logged["plan_id"] == plan.plan_id
    assert list((settings.reports).glob("validation-*.html"))


def test_demo_is_idempotent(demo_home: Path) -> None:
    settings = load_settings(demo_home)
    first = current_plan(settings.publish_dir, "kitchen")
    assert main(["--home", str(demo_home), "demo"]) == 0
    second = current_plan(settings.publish_dir, "kitchen")
    assert second.placement == first.placement and second.nodes == first.nodes
    assert second.plan_id == first.plan_id and second.mlflow_run_id == first.mlflow_run_id
    history = plan_history(settings, "kitchen")
    assert [h.plan_id for h in history] == [first.plan_id], "one run per plan, not per rerun"


def test_infeasible_plan_leaves_current_untouched(demo_home: Path, tmp_path: Path) -> None:
    settings = load_settings(demo_home)
    live = current_plan(settings.publish_dir, "kitchen")
    raw = yaml.safe_load(DEMO_CONFIG.read_text())
    raw["method"] = {"name": "binpack-milp", "params": {"hw": 0.2, "rho_th": 0.8}}
    for q in raw["queries"]:
        q["target_rt_ms"] = 0.5  # below the service time itself: nothing can meet it
    config = tmp_path / "impossible.yaml"
    config.write_text(yaml.safe_dump(raw))
    end = live.inputs.interval_end
    args = ["--home", str(demo_home)]
    assert main([*args, "plan", "--config", str(config), "--end", end]) == 1
    assert main([*args, "publish", "--config", str(config), "--end", end]) == 1
    assert current_plan(settings.publish_dir, "kitchen") == live
    failed = [h for h in plan_history(settings, "kitchen") if h.status == "infeasible"]
    assert failed and not failed[0].live


def test_broken_config_fails_fast(tmp_path: Path, capsys) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(json.dumps({"app": "x", "operators": []}))
    assert main(["--home", str(tmp_path), "demo", "--config", str(config)]) == 2
    assert "field 'operators'" in capsys.readouterr().err


def test_history_and_diff_commands(demo_home: Path, capsys) -> None:
    settings = load_settings(demo_home)
    live = current_plan(settings.publish_dir, "kitchen")
    assert main(["--home", str(demo_home), "history"]) == 0
    assert "plans of kitchen" in capsys.readouterr().out
    live_runs = [h for h in plan_history(settings, "kitchen") if h.live]
    assert [h.plan_id for h in live_runs] == [live.plan_id]
    assert main(["--home", str(demo_home), "diff", live.plan_id, live.plan_id]) == 0
    assert list(settings.reports.glob("diff-*.png"))
