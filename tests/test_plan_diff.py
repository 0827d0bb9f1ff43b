"""Plan diffs name every operator move and node action change."""

from streamplan.plan import Decision, Plan, PlanInputs, Prediction, SolverStats
from streamplan.plan_diff import diff_plans


def _plan(end: str, placement: dict[str, str], nodes: dict[str, str], rt: float) -> Plan:
    decision = Decision(
        placement={op: [{"node": n, "replicas": 1}] for op, n in placement.items()},
        nodes=nodes,
        node_types={n: "small" for n in nodes},
        predicted=Prediction(response_time_ms={"q": rt}),
        solver=SolverStats(name="t", status="heuristic", time_s=0),
    )
    inputs = PlanInputs(fitted_model_id="m", config_hash="h",
                        interval_start="2026-01-01T00:00:00Z", interval_end=end)
    return Plan.from_decision(decision, app="a", method="binpack", inputs=inputs)


def test_diff_lists_moves_nodes_and_predictions() -> None:
    a = _plan("2026-01-01T01:00:00Z", {"x": "vm-1", "y": "vm-1"}, {"vm-1": "keep"}, 3.0)
    b = _plan("2026-01-01T02:00:00Z", {"x": "vm-1", "y": "vm-2"},
              {"vm-1": "keep", "vm-2": "hire"}, 1.5)
    d = diff_plans(a, b)
    assert d.moved == {"y": ([("vm-1", 1)], [("vm-2", 1)])}
    assert d.nodes == {"vm-2": (None, "hire")}
    assert d.response_time_ms == {"q": (3.0, 1.5)}
    assert not d.empty
    assert diff_plans(a, a).empty
