"""Actuation: a plan as vertex overrides and a FlinkDeployment patch; `streamplan apply
--dry-run` and `streamplan explain` against a fake Flink REST API."""

from __future__ import annotations

import json

import pytest
import yaml

from streamplan.cli import main
from streamplan.flink.actuate import ActuationError, changes, deployment_patch, render_overrides
from streamplan.flink.rest import scrape
from streamplan.plan import Plan
from streamplan.publish import publish
from streamplan.settings import REPO_ROOT
from tests.test_flink_rest import fake  # noqa: F401 (fixture)

CONFIG = str(REPO_ROOT / "infra" / "flink" / "app.yaml")


def make_plan(parallelism: dict[str, int], explanations: dict | None = None) -> Plan:
    return Plan.model_validate({
        "plan_id": "p1", "app": "flinkload", "created_at": "2026-01-01T00:00:00Z",
        "method": "flink-parallelism",
        "inputs": {"fitted_model_id": "m", "config_hash": "h", "interval_start": "a",
                   "interval_end": "b"},
        "placement": {op: [{"node": "tm-1", "replicas": p}] for op, p in parallelism.items()},
        "nodes": {"tm-1": "keep"},
        "predicted": {"response_time_ms": {"load": 7.5}},
        "solver": {"name": "flink-parallelism", "status": "heuristic", "time_s": 0.0},
        "explanations": explanations or {},
    })


def test_overrides_and_patch_name_vertex_ids(fake):  # noqa: F811
    running = scrape(fake.rest, "j1")
    plan = make_plan({"parse": 3, "enrich": 1})
    assert render_overrides(plan, running) == {"v1": 3, "v2": 1}
    patch = yaml.safe_load(deployment_patch({"v1": 3, "v2": 1}, "load"))
    assert patch["kind"] == "FlinkDeployment" and patch["metadata"] == {"name": "load"}
    assert patch["spec"]["flinkConfiguration"] == {
        "pipeline.jobvertex-parallelism-overrides": "v1:3,v2:1"}
    (change,) = changes(plan, running)
    assert (change.operator, change.vertex_id, change.current, change.target) == (
        "parse", "v1", 1, 3)
    missing = r"plan operators \['aggregate'\] are not vertices of job load"
    with pytest.raises(ActuationError, match=missing):
        render_overrides(make_plan({"aggregate": 2}), running)


def test_apply_dry_run_prints_the_change_and_writes_nothing(fake, settings, capsys):  # noqa: F811
    publish(make_plan({"parse": 3, "enrich": 1}), settings.publish_dir)
    code = main(["--home", str(settings.home), "apply", "--config", CONFIG,
                 "--flink-url", fake.rest.url, "--dry-run"])
    out = capsys.readouterr().out
    assert code == 0
    assert "parse (v1): parallelism 1 -> 3" in out and "enrich" not in out.split("pipeline.")[0]
    assert "pipeline.jobvertex-parallelism-overrides: v1:3,v2:1" in out
    assert not (settings.publish_dir / "flinkload" / "flink").exists()
    code = main(["--home", str(settings.home), "apply", "--config", CONFIG,
                 "--flink-url", fake.rest.url])
    assert code == 0
    written = (settings.publish_dir / "flinkload" / "flink" / "p1.conf").read_text()
    assert written == "pipeline.jobvertex-parallelism-overrides: v1:3,v2:1\n"


def test_apply_reports_a_job_that_is_not_running(fake, settings, capsys):  # noqa: F811
    fake.state = "FAILED"
    publish(make_plan({"parse": 2}), settings.publish_dir)
    assert main(["--home", str(settings.home), "apply", "--config", CONFIG,
                 "--flink-url", fake.rest.url, "--dry-run"]) == 1
    assert "expected one running job, found 0 (load (j1): FAILED)" in capsys.readouterr().out


def test_explain_prints_each_operator_and_its_reasons(settings, tmp_path, capsys):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(make_plan(
        {"parse": 3, "enrich": 1},
        {"parse": ["utilisation 1.67 per subtask at parallelism 1 is above the target 0.7"]},
    ).model_dump(mode="json", by_alias=True)))
    assert main(["--home", str(settings.home), "explain", "--config", CONFIG, str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:] == [
        "enrich: tm-1×1", "  - unchanged: nothing to explain",
        "parse: tm-1×3",
        "  - utilisation 1.67 per subtask at parallelism 1 is above the target 0.7",
    ]
