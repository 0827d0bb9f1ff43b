"""flink-parallelism method and guardrails: Erlang C against closed forms, minimal
parallelism by enumeration, guardrail holds with reasons, hard goals block publishing."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from optimizers.flink_parallelism import plan_flink_parallelism
from optimizers.queueing import erlang_c, mgc_response_time_s
from streamplan.config import load_config
from streamplan.fitted import Deployment, FittedModel, NodeState, OperatorModel, QueryModel
from streamplan.guardrails import GuardState, Guardrails, apply_guardrails, guard_decision
from streamplan.settings import REPO_ROOT

CONFIG = load_config(REPO_ROOT / "infra" / "flink" / "app.yaml")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def model(rates: dict[str, float], service_s: dict[str, float], current: dict[str, int],
          utilisation: float = 0.5) -> FittedModel:
    ops = {
        op: OperatorModel(operator=op, query="load", arrival_rate_mean=r, arrival_rate_max=r,
                          arrival_rate_p95=r, service_m2_s2=2 * service_s[op] ** 2,
                          service_mean_s=service_s[op], service_scv=1.0, selectivity=1.0,
                          utilisation=utilisation, calibration="busy_time", samples=3)
        for op, r in rates.items()
    }
    return FittedModel(
        model_id="m", app="flinkload", window_start="a", window_end="b", rate_statistic="mean",
        operators=ops,
        queries={"load": QueryModel(query="load", arrival_rate_mean=1, arrival_rate_max=1,
                                    arrival_rate_p95=1, service_mean_s=0.0, service_m2_s2=0.0,
                                    events=1)},
        deployment=Deployment(placement={op: [("tm-1", c)] for op, c in current.items()},
                              nodes={"tm-1": NodeState(type="minicluster")}),
    )


@pytest.mark.parametrize("a", [0.1, 0.9, 1.5, 1.99])
def test_erlang_c_matches_closed_forms(a):
    assert erlang_c(1, min(a, 0.99)) == pytest.approx(min(a, 0.99))  # M/M/1: P(wait) = ρ
    assert erlang_c(2, a) == pytest.approx(a * a / (2 + a))  # M/M/2: 2ρ²/(1+ρ), ρ = a/2


def test_mm1_response_time_is_s_over_one_minus_rho():
    assert mgc_response_time_s(80.0, 0.01, 1.0, 1) == pytest.approx(0.01 / (1 - 0.8))
    assert mgc_response_time_s(100.0, 0.01, 1.0, 1) == math.inf


def test_parallelism_is_the_smallest_meeting_the_target_utilisation():
    rates = {"parse": 333.0, "enrich": 333.0, "aggregate": 40.0}
    service = {"parse": 0.005, "enrich": 0.0005, "aggregate": 0.001}
    d = plan_flink_parallelism(model(rates, service, {o: 1 for o in rates}), CONFIG)
    for op, reps in d.placement.items():
        (r,) = reps
        load = rates[op] * service[op]
        feasible = [c for c in range(1, 9) if load / c <= 0.7]  # enumeration
        assert r.replicas == feasible[0] and r.node == "tm-1"
    assert d.placement["parse"][0].replicas == 3
    assert any("above the target" in w for w in d.explanations["parse"])
    assert "enrich" not in d.explanations


def test_response_time_bound_adds_subtasks_until_met():
    query = CONFIG.queries[0].model_copy(update={"target_rt_ms": 7.0})
    config = CONFIG.model_copy(update={"queries": [query]})
    rates = {"parse": 100.0, "enrich": 1.0, "aggregate": 1.0}
    service = {"parse": 0.005, "enrich": 0.0001, "aggregate": 0.0001}
    d = plan_flink_parallelism(model(rates, service, {o: 1 for o in rates}), config)
    c = d.placement["parse"][0].replicas
    assert 1000 * mgc_response_time_s(100.0, 0.005, 1.0, c) + 0.2 <= 7.0 + 1e-6
    assert 1000 * mgc_response_time_s(100.0, 0.005, 1.0, c - 1) > 7.0 - 0.2  # minimal
    assert d.predicted.response_time_ms["load"] <= 7.0


def test_scale_down_waits_for_n_consecutive_recommendations():
    rules = Guardrails(scale_down_after=3, stabilisation_s=0)
    state = GuardState()
    for i in range(1, 3):
        out = apply_guardrails({"parse": 2}, {"parse": 4}, state, NOW + timedelta(minutes=i), rules)
        assert out.parallelism == {"parse": 4}
        assert f"recommended {i} of 3" in out.reasons["parse"][0]
        state = out.state
    out = apply_guardrails({"parse": 2}, {"parse": 4}, state, NOW + timedelta(minutes=3), rules)
    assert out.parallelism == {"parse": 2}
    assert out.state.last_change_at == NOW + timedelta(minutes=3)
    # an up recommendation in between resets the count
    streak = GuardState(down_streak={"parse": 2})
    up = apply_guardrails({"parse": 5}, {"parse": 4}, streak, NOW, rules)
    assert up.state.down_streak["parse"] == 0


def test_stabilisation_max_change_and_bounds():
    rules = Guardrails(stabilisation_s=300, max_change=2, min_parallelism=1, max_parallelism=6)
    changed = GuardState(last_change_at=NOW)
    held = apply_guardrails({"parse": 5}, {"parse": 1}, changed, NOW + timedelta(seconds=60), rules)
    assert held.parallelism == {"parse": 1} and "stabilisation" in held.reasons["parse"][0]
    later = apply_guardrails({"parse": 9}, {"parse": 1}, changed, NOW + timedelta(seconds=301),
                             rules)
    assert later.parallelism == {"parse": 3}
    assert [r.split(" by")[0].split(" (")[0] for r in later.reasons["parse"]] == [
        "clamped 9 -> 6", "change 1 -> 6 limited to 3"]
    with pytest.raises(ValueError, match="min_parallelism 4 > max_parallelism 2"):
        apply_guardrails({}, {}, GuardState(), NOW,
                         Guardrails(min_parallelism=4, max_parallelism=2))


def test_a_guarded_plan_that_breaks_capacity_is_infeasible_and_explained():
    rates = {"parse": 333.0, "enrich": 10.0, "aggregate": 10.0}
    service = {"parse": 0.005, "enrich": 0.001, "aggregate": 0.001}
    m = model(rates, service, {"parse": 1, "enrich": 1, "aggregate": 1}, utilisation=0.99)
    d = plan_flink_parallelism(m, CONFIG)
    ok, _ = guard_decision(d, m, CONFIG, GuardState(), NOW, Guardrails(max_change=4))
    assert ok.feasible and ok.placement["parse"][0].replicas == 3
    assert any("saturated" in w for w in ok.explanations["parse"])
    capped, _ = guard_decision(d, m, CONFIG, GuardState(), NOW, Guardrails(max_change=0 + 1))
    assert capped.placement["parse"][0].replicas == 2  # 1 + max_change; 333*0.005/2 < 1
    assert capped.feasible
    frozen, _ = guard_decision(d, m, CONFIG, GuardState(last_change_at=NOW), NOW, Guardrails())
    assert not frozen.feasible
    assert "capacity: parse utilisation 1.67 >= 1 at parallelism 1" in frozen.solver.message
    assert any("stabilisation" in w for w in frozen.explanations["parse"])


def test_scheduled_replans_keep_the_guardrail_state_per_interval(settings):
    """Through stages.run_plan without a caller-held state (as replan_hourly runs it): the
    first hour holds the scale-down, the second applies it, a re-run of the second hour
    reads the same kept state and gives the same plan."""
    from streamplan.config import MethodSpec
    from streamplan.stages import Interval, run_plan

    rules = {"stabilisation_s": 0, "scale_down_after": 2}
    config = CONFIG.model_copy(update={"method": MethodSpec(
        name="flink-parallelism", params={**CONFIG.method.params, "guardrails": rules})})
    rates = {"parse": 50.0, "enrich": 50.0, "aggregate": 50.0}
    service = {"parse": 0.004, "enrich": 0.001, "aggregate": 0.001}
    hours = [Interval(NOW + timedelta(hours=h), NOW + timedelta(hours=h + 1)) for h in range(2)]

    def plan_hour(i: int):
        m = model(rates, service, {"parse": 3, "enrich": 1, "aggregate": 1}).model_copy(
            update={"window_start": hours[i].start.isoformat(),
                    "window_end": hours[i].end.isoformat()})
        return run_plan(settings, config, m, hours[i])

    first, second = plan_hour(0), plan_hour(1)
    assert first.placement["parse"][0].replicas == 3
    assert any("held: recommended 1 of 2" in w for w in first.explanations["parse"])
    assert second.placement["parse"][0].replicas == 1
    again = plan_hour(1)
    assert again.plan_id == second.plan_id and again.placement == second.placement
