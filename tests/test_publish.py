"""Publishing is schema-checked and atomic; only feasible plans become current."""

import json
from pathlib import Path

import pytest

from streamplan.plan import Decision, Plan, PlanInputs, Prediction, SolverStats, plan_json_schema
from streamplan.publish import current_plan, publish, validate_plan_document


def _plan(end: str, status: str = "heuristic") -> Plan:
    decision = Decision(
        placement={"op": [{"node": "vm-1", "replicas": 1}]},
        nodes={"vm-1": "keep"},
        node_types={"vm-1": "small"},
        predicted=Prediction(response_time_ms={"q": 1.5}),
        solver=SolverStats(name="test", status=status, time_s=0.1, message="why"),
    )
    inputs = PlanInputs(fitted_model_id="m", config_hash="h", interval_start="2026-01-01T00:00:00+00:00",
                        interval_end=end)
    return Plan.from_decision(decision, app="app", method="binpack", inputs=inputs)


def test_feasible_plan_becomes_current(tmp_path: Path) -> None:
    plan = _plan("2026-01-01T00:10:00+00:00")
    result = publish(plan, tmp_path)
    assert result.became_current
    assert json.loads(result.plan_path.read_text())["schema"] == "streamplan.plan/v1"
    assert current_plan(tmp_path, "app") == plan
    assert (tmp_path / "plan.schema.json").exists()
    assert not [p for p in (tmp_path / "app").rglob(".*")], "no temp files left behind"


def test_infeasible_plan_leaves_current_untouched(tmp_path: Path) -> None:
    good = _plan("2026-01-01T00:10:00+00:00")
    publish(good, tmp_path)
    bad = _plan("2026-01-01T00:20:00+00:00", status="infeasible")
    result = publish(bad, tmp_path)
    assert not result.became_current
    assert "infeasible" in result.reason and "why" in result.reason
    assert result.plan_path.exists(), "the failed plan is kept for the audit trail"
    assert current_plan(tmp_path, "app").plan_id == good.plan_id


def test_plan_id_is_deterministic_per_interval() -> None:
    assert _plan("2026-01-01T00:10:00+00:00").plan_id == _plan("2026-01-01T00:10:00+00:00").plan_id
    assert _plan("2026-01-01T00:10:00+00:00").plan_id != _plan("2026-01-01T00:20:00+00:00").plan_id


def test_schema_violation_names_the_field() -> None:
    doc = json.loads(_plan("2026-01-01T00:10:00Z").to_json())
    doc["placement"]["op"][0]["replicas"] = 0
    with pytest.raises(ValueError, match="placement/op/0/replicas"):
        validate_plan_document(doc)
    assert plan_json_schema()["$id"] == "streamplan.plan/v1"


def test_decision_rejects_inconsistent_plans() -> None:
    with pytest.raises(ValueError, match="uses node 'vm-2' marked release"):
        Decision(
            placement={"op": [{"node": "vm-2", "replicas": 1}]},
            nodes={"vm-2": "release"},
            predicted=Prediction(),
            solver=SolverStats(name="t", status="optimal", time_s=0),
        )
    with pytest.raises(ValueError, match=r"shedding\[op\]\[t\] must be in \[0, 1\], got 1.5"):
        Decision(
            placement={"op": [{"node": "n", "replicas": 1}]},
            nodes={"n": "keep"},
            shedding={"op": {"t": 1.5}},
            predicted=Prediction(),
            solver=SolverStats(name="t", status="optimal", time_s=0),
        )
