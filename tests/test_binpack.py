"""Seed 000's configuration scheduler: digest checks C2, C3, C5, invariants 1–5, the adapter
and the method registry."""

from __future__ import annotations

import math
import random

import pytest

from optimizers.binpack import BinpackParams, Move, binpack, is_viable, plan_binpack
from optimizers.instances import c5_hours, random_instance
from optimizers.queueing import (
    EpnLoad,
    node_load,
    relative_deviation,
    response_times,
    second_moment,
)
from optimizers.registry import METHODS, run_method
from streamplan.config import AppConfig, MethodSpec
from streamplan.fitted import Deployment, FittedModel, NodeState, QueryModel
from streamplan.plan import Decision


def exp_load(name: str, rate: float, b: float, target: float, rt: float | None = None) -> EpnLoad:
    return EpnLoad(name, rate, b, second_moment(b), target, measured_rt_s=rt)


E1 = exp_load("EPN1", 200, 0.002, 0.008)
E2 = exp_load("EPN2", 100, 0.003, 0.0065)
E3 = exp_load("EPN3", 100, 0.002, 0.004)


def fitted(
    config: AppConfig,
    rates: dict[str, float],
    b_s: float = 0.001,
    placement: dict[str, list[tuple[str, int]]] | None = None,
) -> FittedModel:
    """A hand-built fitted model: exponential EPNs with service mean ``b_s``."""
    queries = {
        q: QueryModel(
            query=q,
            arrival_rate_mean=r,
            arrival_rate_p95=r,
            arrival_rate_max=r,
            service_mean_s=b_s,
            service_m2_s2=second_moment(b_s),
            events=int(r * 600),
        )
        for q, r in rates.items()
    }
    placement = placement or {op: list(e) for op, e in config.deployment.items()}
    used = {node for entries in placement.values() for node, _ in entries}
    types = {n.name: n.type for n in config.nodes}
    nodes = {n: NodeState(type=types.get(n, "small")) for n in sorted(used | set(types))}
    return FittedModel(
        model_id="test-model",
        app=config.app,
        window_start="2026-01-01T00:00:00Z",
        window_end="2026-01-01T01:00:00Z",
        operators={},
        queries=queries,
        deployment=Deployment(placement=placement, nodes=nodes),
    )


BUSY = {"spoon": 300.0, "knife": 250.0, "fork": 200.0}


# --- digest checks ----------------------------------------------------------------------------
def test_c2_move_without_hire() -> None:
    r = binpack([E1, E2, E3], {"EPN1": "N1", "EPN2": "N1", "EPN3": "N2"})
    assert r.moves == [Move(2, "EPN2", "N1", "N2")]  # the Part-3 attempt was rolled back
    assert r.assignment == {"EPN1": "N1", "EPN2": "N2", "EPN3": "N2"}
    assert (r.kept, r.hired, r.released) == (["N1", "N2"], [], [])
    assert r.utilisation == pytest.approx({"N1": 0.4, "N2": 0.5})
    w = {e: v * 1000 for e, v in r.response_time_s.items()}
    assert w == pytest.approx({"EPN1": 3.3333, "EPN2": 5.6, "EPN3": 4.6}, abs=1e-4)
    assert (r.out_of_band_before, r.out_of_band_after) == (2, 1)  # EPN2 and EPN3; then EPN1
    assert r.status == "heuristic"


def test_c3_hire() -> None:
    r = binpack([E1, E2], {"EPN1": "N1", "EPN2": "N1"}, hire_name=lambda k: f"N{k + 2}")
    assert r.assignment == {"EPN1": "N1", "EPN2": "N3"}
    assert (r.kept, r.hired, r.released) == (["N1"], ["N3"], [])
    assert r.response_time_s["EPN2"] * 1000 == pytest.approx(4.2857, abs=1e-4)
    assert r.response_time_s["EPN1"] * 1000 == pytest.approx(3.3333, abs=1e-4)
    assert r.moves_total == r.moves_net == 1


def test_c3_with_hard_lw_terminates_degraded() -> None:
    # A3: under a hard LW, EPN2 fails on every fresh node; we flag it instead of looping.
    r = binpack([E1, E2], {"EPN1": "N1", "EPN2": "N1"}, BinpackParams(enforce_lw=True))
    assert r.status == "degraded"
    assert r.infeasible_single == ["EPN2"]
    assert r.assignment == {"EPN1": "N1", "EPN2": "hire-1"}


C5_NODES = [1, 2, 3, 4, 5, 4, 4, 1, 1]  # digest C5: the paper's Table-1 pattern


def run_c5() -> list:
    assignment = {f"EPN{i}": "n1" for i in range(1, 6)}
    results = []
    for loads in c5_hours():
        r = binpack(loads, assignment, hire_name=lambda k: f"n{k + 1}")
        results.append(r)
        assignment = r.assignment
    return results


def test_c5_table1_pattern() -> None:
    results = run_c5()
    assert [len(r.nodes) for r in results] == C5_NODES
    h5, h6, h8 = results[4], results[5], results[7]
    assert all(len({e for e, n in h5.assignment.items() if n == node}) == 1 for node in h5.nodes)
    assert h6.assignment["EPN2"] == h6.assignment["EPN3"]  # EPN2 joins EPN3
    assert len(h6.released) == 1 and not h6.hired
    assert results[6].moves_total == 0  # H=7: the reduction frees no node
    assert (h8.moves_total, h8.moves_net) == (8, 4)  # A13: churn within one run
    assert all(r.status == "heuristic" for r in results)


# --- invariants 1–5 on random instances ----------------------------------------------------------
def initial_donors(loads: list[EpnLoad], assignment: dict[str, str], p: BinpackParams) -> set:
    donors = set()
    for node in set(assignment.values()):
        classes = [e for e in loads if assignment[e.name] == node]
        if not is_viable(classes, p.model_copy(update={"enforce_lw": False})):
            donors.add(node)
    return donors


@pytest.mark.parametrize("seed", range(30))
def test_invariants_random(seed: int) -> None:
    rng = random.Random(seed)
    params = BinpackParams()
    loads, assignment = random_instance(rng, rng.randint(3, 12), params)
    nodes_before = sorted(set(assignment.values()))
    r = binpack(loads, assignment, params)

    # 1. every EPN on exactly one node
    assert sorted(r.assignment) == sorted(e.name for e in loads)
    # 2. estimated mode: every output node is viable
    for node in r.nodes:
        classes = [e for e in loads if r.assignment[e.name] == node]
        assert node_load(classes) <= params.rho_th + 1e-9
        w = response_times(classes)
        for e in classes:
            assert relative_deviation(w[e.name], e.target_s) <= params.hw + 1e-9
    # 3. node accounting and lower bound
    assert not set(r.released) & set(r.assignment.values())
    assert set(r.hired) <= set(r.assignment.values())
    assert len(r.nodes) == len(nodes_before) + len(r.hired) - len(r.released)
    total = sum(e.rho for e in loads)
    assert len(r.nodes) >= max(1, math.ceil(total / params.rho_th - 1e-9))
    # 4. Part 2 takes only from donors and moves no EPN twice
    part2 = [m for m in r.moves if m.part == 2]
    donors = initial_donors(loads, assignment, params)
    assert all(m.src in donors for m in part2)
    assert len({m.epn for m in part2}) == len(part2)
    # 5. fixed point
    again = binpack(loads, r.assignment, params, nodes=r.nodes)
    assert again.assignment == r.assignment
    assert (again.moves, again.hired, again.released) == ([], [], [])


# --- δ source, A5, A9, A11 ------------------------------------------------------------------------
@pytest.mark.parametrize(("source", "moved"), [("estimated", 0), ("measured", 1), ("max", 1)])
def test_delta_source(source: str, moved: int) -> None:
    # The model says EPN a is fine alone (δ^e = −0.29); the measured RT is twice the target.
    a = exp_load("a", 150, 0.002, 0.004, rt=0.008)
    r = binpack([a], {"a": "N1"}, BinpackParams(delta_source=source))
    assert r.moves_net == moved
    assert len(r.nodes) == 1
    if moved:
        assert (r.hired, r.released) == (["hire-1"], ["N1"])


def test_measured_without_rt_falls_back_to_estimated() -> None:
    r = binpack([E1, E2], {"EPN1": "N1", "EPN2": "N1"}, BinpackParams(delta_source="measured"))
    assert r.assignment == {"EPN1": "N1", "EPN2": "hire-1"}
    assert any("no measured response time" in n for n in r.notes)


def test_infeasible_single_alone_stays() -> None:
    bad = exp_load("bad", 450, 0.002, 0.004)  # ρ = 0.9 > ρ_th
    ok = exp_load("ok", 50, 0.002, 0.004)
    r = binpack([bad, ok], {"bad": "N1", "ok": "N2"})
    assert r.status == "degraded" and r.infeasible_single == ["bad"]
    assert r.assignment == {"bad": "N1", "ok": "N2"}  # N1 is no acceptor: ok cannot join it


def test_infeasible_single_in_a_group_is_isolated() -> None:
    bad = exp_load("bad", 450, 0.002, 0.004)
    ok = exp_load("ok", 50, 0.002, 0.004)
    r = binpack([bad, ok], {"bad": "N1", "ok": "N1"})
    assert r.infeasible_single == ["bad"]
    assert r.assignment == {"bad": "hire-1", "ok": "N1"}


def test_faster_hire_fits_what_a_calibration_node_cannot() -> None:
    heavy = exp_load("h", 450, 0.002, 0.004)  # alone: ρ 0.9 at speed 1, 0.45 at speed 2
    slow = binpack([heavy], {"h": "N1"})
    fast = binpack([heavy], {"h": "N1"}, hire_speed=2.0)
    assert slow.status == "degraded"
    assert fast.status == "heuristic" and fast.assignment == {"h": "hire-1"}
    assert fast.utilisation == pytest.approx({"hire-1": 0.45})


def test_never_fewer_than_one_node() -> None:
    idle = [exp_load(f"e{i}", 0, 0.001, 0.002) for i in range(4)]
    nodes = ["N0", "N1", "N2", "N3", "N4"]  # N4 hosts nothing
    r = binpack(idle, {f"e{i}": f"N{i}" for i in range(4)}, nodes=nodes)
    assert len(r.nodes) == 1 and len(r.released) == 4
    empty = binpack([], {}, nodes=["N1", "N2"])
    assert empty.nodes == ["N2"] and empty.released == ["N1"]  # Part 3 frees the first by id


def test_hire_names_skip_existing() -> None:
    r = binpack([E1, E2], {"EPN1": "hire-1", "EPN2": "hire-1"})
    assert r.hired == ["hire-2"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"nodes": []}, "at least one node"),
        ({"assignment": {"EPN1": "N1"}}, r"EPN 'EPN2' has no node"),
        ({"nodes": ["N2"]}, r"assignment\[EPN1\]"),
    ],
)
def test_input_validation(kwargs: dict, match: str) -> None:
    args = {"loads": [E1, E2], "assignment": {"EPN1": "N1", "EPN2": "N1"}} | kwargs
    with pytest.raises(ValueError, match=match):
        binpack(**args)
    with pytest.raises(ValueError, match="duplicate EPN"):
        binpack([E1, E1], {"EPN1": "N1"})


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"hw": -0.1}, r"method\.params\.hw"),
        ({"rho_th": 1.5}, r"method\.params\.rho_th"),
        ({"delta_source": "guess"}, r"method\.params\.delta_source"),
        ({"lw": 0.0, "hw": 0.0}, "lw .* must be below hw"),
        ({"typo": 1}, r"method\.params\.typo"),
    ],
)
def test_params_errors_name_the_field(params: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        BinpackParams.from_method_params(params)


# --- adapter and registry -------------------------------------------------------------------------
def test_plan_binpack_on_demo(demo_config: AppConfig) -> None:
    d = plan_binpack(fitted(demo_config, BUSY), demo_config)
    hire = "kitchen-small-1"
    assert d.nodes == {"vm-1": "keep", hire: "hire"}
    assert d.node_types == {"vm-1": "small", hire: "small"}
    # fork (tie on δ, first by name) moves to the hired VM; all its operators go with it
    for q in demo_config.queries:
        nodes = {e.node for op in demo_config.query_operators(q.name) for e in d.placement[op]}
        assert nodes == ({hire} if q.name == "fork" else {"vm-1"})
    assert sorted(d.placement) == sorted(o.name for o in demo_config.operators)
    assert all(e.replicas == 1 for entries in d.placement.values() for e in entries)
    assert d.predicted.response_time_ms["fork"] == pytest.approx(1.25)
    assert d.predicted.response_time_ms["spoon"] == pytest.approx(1 / 0.45)
    assert d.predicted.node_utilisation == pytest.approx({"vm-1": 0.55, hire: 0.2})
    assert d.predicted.cost_per_hour == pytest.approx(0.088)
    assert d.predicted.downtime_s is None and d.shedding == {}
    s = d.solver
    assert (s.name, s.status, s.objective) == ("seed000-binpack", "heuristic", 2.0)
    assert s.extra["moves_total"] == s.extra["moves_net"] == s.extra["hired"] == 1
    assert s.extra["released"] == 0 and s.extra["feasibility_checks"] >= 1
    assert d.feasible and d.violations == []


def test_plan_binpack_reports_split_query_and_degraded(demo_config: AppConfig) -> None:
    placement = {op: list(e) for op, e in demo_config.deployment.items()}
    placement["spoon_match"] = [("vm-2", 1)]
    rates = BUSY | {"knife": 900.0}  # ρ 0.9 alone: does not fit anywhere
    d = plan_binpack(fitted(demo_config, rates, placement=placement), demo_config)
    assert d.solver.status == "degraded" and d.feasible
    assert any("spoon" in v and "split" in v for v in d.violations)
    assert any("knife" in v and "infeasible_single" in v for v in d.violations)
    assert {e.node for op in ("spoon_window", "spoon_match") for e in d.placement[op]} == {
        d.placement["spoon_window"][0].node
    }


def test_plan_binpack_unbounded_prediction_stays_valid_json(demo_config: AppConfig) -> None:
    d = plan_binpack(fitted(demo_config, BUSY | {"knife": 1000.0}), demo_config)  # ρ = 1
    assert "knife" not in d.predicted.response_time_ms
    assert any("knife" in v and "unbounded" in v for v in d.violations)
    assert Decision.model_validate_json(d.model_dump_json()) == d


def test_plan_binpack_rejects_missing_query(demo_config: AppConfig) -> None:
    with pytest.raises(ValueError, match="no fitted model for query 'fork'"):
        plan_binpack(fitted(demo_config, {"spoon": 1.0, "knife": 1.0}), demo_config)


def test_registry_dispatch(demo_config: AppConfig) -> None:
    assert {"binpack", "binpack-milp"} <= set(METHODS)
    model = fitted(demo_config, BUSY)
    assert run_method(model, demo_config).solver.name == "seed000-binpack"
    milp = demo_config.model_copy(update={"method": MethodSpec(name="binpack-milp")})
    assert run_method(model, milp).solver.name == "scip"
    bad = demo_config.model_copy(update={"method": MethodSpec(name="nope")})
    with pytest.raises(ValueError, match=r"method\.name.*'nope'.*binpack"):
        run_method(model, bad)
