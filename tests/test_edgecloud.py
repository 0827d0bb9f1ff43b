"""Seed 004 (Ghosh et al.): edge + cloud placement of many DAGs — the digest's worked example,
an independent checker, MILP vs brute force, heuristics vs the optimum, the control loop's
invariants, the generator, the adapter and bad input."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from optimizers.edgecloud import (
    Dag,
    EdgeCloudInputError,
    GaParams,
    Instance,
    Options,
    Resource,
    State,
    Vertex,
    brute_force,
    check_plan,
    compile_dag,
    gag_replan,
    gai_place,
    rebalance,
    topset_place,
)
from optimizers.edgecloud.adapter import build_instance, plan_gai, plan_topset, plan_topset_p
from optimizers.edgecloud.generator import (
    SETUPS,
    dag_pool,
    make_setup,
    poisson_trace,
    random_dag,
    rw_trace,
)
from optimizers.edgecloud.loop import Controller
from optimizers.edgecloud.milp import solve_milp
from optimizers.edgecloud.params import parse_params
from optimizers.graphs import GraphError
from optimizers.registry import METHODS, run_method
from streamplan.config import AppConfig, ConfigError, load_config
from streamplan.fitted import (
    Deployment,
    FittedModel,
    LinkModel,
    NodeModel,
    NodeState,
    OperatorModel,
    PlacementCosts,
    QueryModel,
)
from streamplan.settings import REPO_ROOT

CONFIG = REPO_ROOT / "configs" / "edgecloud_small.yaml"
FAST_GA = GaParams(population=30, generations=60, min_generations=10, seed=3)


# --- the digest's worked example (§10) -------------------------------------------------------
def worked(battery_wh: float = 40.0, mode: str = "exclusive") -> tuple[Instance, Dag]:
    """Chain s → a → k on edge E and VM C (ms in the digest, seconds here)."""
    res = (
        Resource("E", "edge", "pi", interference=0.1, idle_w=2.0, battery_j=battery_wh * 3600,
                 recharge_s=43_200),
        Resource("C", "cloud", "vm", interference=0.1),
    )
    service = np.array([[0.002, 0.002], [0.009, 0.008], [0.001, 0.001]])
    energy = np.array([[0.0, 0.0], [0.01, 0.0], [0.0, 0.0]])
    lat = np.array([[0.0, 0.05], [0.05, 0.0]])
    bw = np.array([[np.inf, 1e6], [1e6, np.inf]])
    inst = Instance(res, ("s", "a", "k"), service, energy, lat, bw, Options(latency_mode=mode))
    dag = Dag("g", (Vertex("s", "s", 1.0, 5000), Vertex("a", "a", 0.5, 200),
                    Vertex("k", "k", 1.0, 0)), (("s", "a"), ("a", "k")), input_rate=100)
    return inst, dag


def placed(inst: Instance, dag: Dag, resources: list[int]) -> State:
    state = State(inst)
    state.register(dag)
    state.place_all(dag.name, resources)
    return state


def test_worked_example_option_a_is_optimal_and_topset_finds_it() -> None:
    inst, dag = worked(40)
    a = placed(inst, dag, [0, 0, 1])
    b = placed(inst, dag, [0, 1, 1])
    assert a.total() == pytest.approx(0.0612) and b.total() == pytest.approx(0.0650)
    state = State(inst)
    assert topset_place(state, dag).ok
    assert state.assignment() == {"g": {"s": "E", "a": "E", "k": "C"}}
    assert state.total() == pytest.approx(0.0612)
    opt, mapping = brute_force(inst, [dag])
    assert opt == pytest.approx(0.0612) and mapping["g"]["a"] == "E"
    milp = solve_milp(inst, [compile_dag(dag, inst)])
    assert milp.status == "optimal" and milp.objective_s == pytest.approx(0.0612, abs=1e-7)
    assert check_plan(inst, [dag], state.assignment()).drain_j["E"] == pytest.approx(129_600)


def test_worked_example_with_a_30_wh_battery_forces_option_b() -> None:
    inst, dag = worked(30)
    state = State(inst)
    assert topset_place(state, dag).ok
    assert state.assignment()["g"]["a"] == "C" and state.total() == pytest.approx(0.065)
    assert brute_force(inst, [dag])[0] == pytest.approx(0.065)
    milp = solve_milp(inst, [compile_dag(dag, inst)])
    assert milp.objective_s == pytest.approx(0.065, abs=1e-7)
    assert list(milp.mapping["g"]) == [0, 1, 1]


def test_worked_example_interfered_latency_and_capacity_of_b() -> None:
    inst, dag = worked(40, "interfered")
    b = placed(inst, dag, [0, 1, 1])
    assert b.total() == pytest.approx(0.0658)  # 8 ms × 1.1 on C with m = 2
    assert b.capacity_ok(1) and b.utilisation(1) == pytest.approx(1.1 * (100 * 0.008 + 50 * 0.001))


@pytest.mark.parametrize("strategy", ["edge", "vertex+edge"])
def test_rebalance_from_b_moves_a_to_the_edge(strategy: str) -> None:
    inst, dag = worked(40)
    state = placed(inst, dag, [0, 1, 1])
    result = rebalance(state, strategy)
    assert result.moves == [("g", "a", "C", "E")]
    assert result.gain_s == pytest.approx(0.0038) and state.total() == pytest.approx(0.0612)


def test_vertex_rebalance_only_moves_to_a_faster_resource() -> None:
    """§4.3: the query "is migrated to a resource which has a higher compute capacity". From B
    the only better place for a is E, where it computes slower (9 > 8 ms): no vertex move.
    With a computing in 7 ms on E the same move is a vertex move."""
    inst, dag = worked(40)
    state = placed(inst, dag, [0, 1, 1])
    assert rebalance(state, "vertex").moves == [] and state.total() == pytest.approx(0.065)
    service = inst.service_s.copy()
    service[1, 0] = 0.007  # a on E
    faster = Instance(inst.resources, inst.kinds, service, inst.energy_j, inst.latency_s,
                      inst.bandwidth_Bps, inst.options)
    state = placed(faster, dag, [0, 1, 1])
    assert rebalance(state, "vertex").moves == [("g", "a", "C", "E")]
    assert state.total() == pytest.approx(0.002 + 0.007 + 0.0502)


# --- independent checker ------------------------------------------------------------------------
def test_checker_catches_pinning_capacity_and_energy_violations() -> None:
    inst, dag = worked(40)
    assert check_plan(inst, [dag], {"g": {"s": "E", "a": "E", "k": "C"}}).ok
    pin = check_plan(inst, [dag], {"g": {"s": "C", "a": "E", "k": "E"}}).violations
    assert any("E4: source g:s on C" in v for v in pin)
    assert any("E4: sink g:k on edge device E" in v for v in pin)
    # capacity: a second copy of the DAG on E makes Σλ = 18 ms at 100 ev/s with π(2) = 0.1
    dag2 = dataclasses.replace(dag, name="h")
    two = {"g": {"s": "E", "a": "E", "k": "C"}, "h": {"s": "E", "a": "E", "k": "C"}}
    cap = check_plan(inst, [dag, dag2], two).violations
    assert any(v.startswith("E6: on E") for v in cap)
    # energy: 30 Wh cannot carry a on E for 12 h
    inst30, _ = worked(30)
    energy = check_plan(inst30, [dag], {"g": {"s": "E", "a": "E", "k": "C"}}).violations
    assert energy and energy[0].startswith("E7: E drains 129600 J")
    # a pin outside the allowed set, an unmapped vertex, an unknown resource
    pinned = dataclasses.replace(dag, vertices=(dataclasses.replace(dag.vertices[0]),
                                                dataclasses.replace(dag.vertices[1], pin=("C",)),
                                                dag.vertices[2]))
    assert any("outside its pin" in v for v in
               check_plan(inst, [pinned], {"g": {"s": "E", "a": "E", "k": "C"}}).violations)
    assert any("not mapped" in v for v in check_plan(inst, [dag], {"g": {"s": "E"}}).violations)
    assert any("unknown resource" in v for v in
               check_plan(inst, [dag], {"g": {"s": "E", "a": "X", "k": "C"}}).violations)


def test_checker_flags_a_wrong_claimed_makespan() -> None:
    inst, dag = worked(40)
    report = check_plan(inst, [dag], {"g": {"s": "E", "a": "E", "k": "C"}},
                        claimed_s={"g": 0.05})
    assert any("claimed makespan" in v for v in report.violations)


def test_state_capacity_check_agrees_with_the_checker() -> None:
    inst, dag = worked(40)
    state = State(inst)
    for name in ("g", "h"):
        state.register(dataclasses.replace(dag, name=name))
        state.place_all(name, [0, 0, 1])
    assert state.violations() == ["E6 capacity on E", "E7 battery on E"]
    report = check_plan(inst, [dataclasses.replace(dag, name=n) for n in ("g", "h")],
                        state.assignment())
    assert [v[:2] for v in report.violations] == ["E6", "E7"]


# --- small random instances: MILP = brute force ≤ heuristics -----------------------------------
def tiny_instance(seed: int, options: Options | None = None, n_edge: int = 2, n_cloud: int = 1,
                  sizes: tuple[int, ...] = (5,)) -> tuple[Instance, list[Dag]]:
    options = options or Options()
    rng = np.random.default_rng(seed)
    inst = make_setup(n_edge, n_cloud, seed=seed, options=options)
    # tighten batteries so that E7 sometimes binds: room for 150-600 ev/s of ε = 1e-5 J... ×50
    energy = inst.energy_j * 50
    res = tuple(dataclasses.replace(r, battery_j=r.idle_w * r.recharge_s
                                    + r.recharge_s * float(rng.uniform(0.05, 0.3)))
                if r.tier == "edge" else r for r in inst.resources)
    inst = Instance(res, inst.kinds, inst.service_s * 4, energy, inst.latency_s,
                    inst.bandwidth_Bps, options)
    dags = []
    for i, size in enumerate(sizes):
        base = random_dag(f"d{i}", size, rng, input_rate=float(rng.uniform(100, 400)))
        dags.append(base)
    return inst, dags


def sequential_topset(inst: Instance, dags: list[Dag], penalty: bool = False) -> State | None:
    state = State(inst)
    for d in dags:
        if not topset_place(state, d, penalty=penalty).ok:
            return None
    return state


CASES = [(seed, opt) for seed in range(8) for opt in (
    Options(), Options(capacity_mode="utilisation"), Options(latency_mode="interfered"))]


@pytest.mark.parametrize(("seed", "options"), CASES[:12])
def test_milp_equals_brute_force_on_tiny_instances(seed: int, options: Options) -> None:
    sizes = (4,) if seed % 2 else (6,)
    inst, dags = tiny_instance(seed, options, sizes=sizes)
    brute = brute_force(inst, dags)
    milp = solve_milp(inst, [compile_dag(d, inst) for d in dags])
    if brute is None:
        assert milp.status == "infeasible"
        return
    assert milp.status == "optimal"
    assert milp.objective_s == pytest.approx(brute[0], rel=1e-6, abs=1e-9)
    state = State(inst)
    for d in dags:
        state.register(d)
        state.place_all(d.name, milp.mapping[d.name])
    report = check_plan(inst, dags, state.assignment())
    assert report.ok, report.violations
    assert report.total_s == pytest.approx(brute[0], rel=1e-6)


@pytest.mark.parametrize("seed", range(6))
def test_heuristics_are_never_below_the_milp_optimum(seed: int) -> None:
    inst, dags = tiny_instance(seed, n_edge=4, n_cloud=2, sizes=(5, 4))
    milp = solve_milp(inst, [compile_dag(d, inst) for d in dags])
    if milp.status == "infeasible":  # then no heuristic may claim a valid plan either
        for penalty in (False, True):
            state = sequential_topset(inst, dags, penalty)
            assert state is None or not check_plan(inst, dags, state.assignment()).ok
        return
    assert milp.status == "optimal"
    opt = milp.objective_s
    for penalty in (False, True):
        state = sequential_topset(inst, dags, penalty)
        if state is None:
            continue
        assert state.total() >= opt - 1e-9
        rebalance(state, "vertex+edge")
        assert state.total() >= opt - 1e-9
        assert check_plan(inst, dags, state.assignment()).ok
    gag, _ = gag_replan(inst, [compile_dag(d, inst) for d in dags], FAST_GA)
    if gag is not None:
        assert gag.total() >= opt - 1e-9


# --- heuristics on the paper's workload give checker-valid plans -------------------------------
@pytest.fixture(scope="module")
def mini() -> tuple[Instance, list]:
    inst = make_setup(16, 2, seed=5)
    pool = dag_pool(5, sizes=(4, 5, 6, 7, 8, 9, 10, 12), check=inst)
    trace = poisson_trace(pool, inst, initial=5, intervals=14, seed=5, mean_size=7)
    return inst, trace.events


@pytest.mark.parametrize(("method", "strategy"), [
    ("topset", "none"), ("topset-p", "none"), ("topset", "vertex"), ("topset", "edge"),
    ("topset-p", "vertex+edge"), ("gai", "none"), ("gai", "edge"), ("gag", "none")])
def test_every_method_gives_checker_valid_plans_and_loop_invariants(mini, method, strategy):
    inst, events = mini
    ctl = Controller(inst, method, strategy, ga=FAST_GA, seed=1)
    dags: dict[str, Dag] = {}
    for event in events:
        before = {d: mu.copy() for d, mu in ctl.state.mapping.items()}
        rec = ctl.step(event)
        if event.kind == "add" and rec.ok:
            dags[event.name] = event.dag
        dags.pop(event.name, None) if event.kind == "remove" else None
        active = [dags[d] for d in ctl.state.dags]
        claimed = {d: ctl.state.makespan(d) for d in ctl.state.dags}
        report = check_plan(inst, active, ctl.state.assignment(), claimed_s=claimed)
        assert report.ok, (rec, report.violations)
        assert rec.makespan_sum_s == pytest.approx(report.total_s, rel=1e-9)
        assert rec.makespan_sum_s <= rec.makespan_before_rebalance_s + 1e-9
        if strategy == "none" and method != "gag":
            assert rec.migrations == 0  # TopSet / GAI never move placed queries
        limit = (2 if strategy == "vertex+edge" else 1) * rec.active_dags
        assert rec.rebalance_moves <= limit
        for d, old in before.items():  # sources never move
            if d in ctl.state.mapping:
                src = ctl.state.dags[d].is_source
                assert (ctl.state.mapping[d][src] == old[src]).all()
        assert math.isfinite(rec.stabilisation_s) and rec.stabilisation_s >= 0
        if rec.migrations:
            assert rec.stabilisation_s > 0


def test_departure_moves_nothing_and_same_seed_gives_same_plan(mini) -> None:
    inst, events = mini
    runs = []
    for _ in range(2):
        ctl = Controller(inst, "gai", "vertex+edge", ga=FAST_GA, seed=9)
        for e in events:
            ctl.step(e)
        runs.append(ctl.state.assignment())
    assert runs[0] == runs[1]
    ctl = Controller(inst, "topset")
    for e in events:
        if e.kind == "remove":
            before = {d: mu.copy() for d, mu in ctl.state.mapping.items() if d != e.name}
            ctl.step(e)
            assert all((ctl.state.mapping[d] == mu).all() for d, mu in before.items())
        else:
            ctl.step(e)


def test_a_battery_that_runs_down_evicts_queries_and_stays_valid(mini) -> None:
    inst, events = mini
    ctl = Controller(inst, "topset-p", "vertex+edge")
    dags = {}
    for e in events:
        ctl.step(e)
        if e.kind == "add":
            dags[e.name] = e.dag
    busiest = int(np.argmax(np.where(inst.is_edge, ctl.state.m, -1)))
    name = inst.resources[busiest].name
    assert ctl.state.m[busiest] > 0
    idle = inst.resources[busiest].idle_drain_j
    rec = ctl.battery(name, idle + 1.0)  # 1 J above the idle drain: nothing fits
    assert rec.extra["evicted"] >= 1 and ctl.state.m[busiest] == 0
    active = [dags[d] for d in ctl.state.dags]
    assert check_plan(ctl.inst, active, ctl.state.assignment()).ok


def test_ga_finds_the_worked_optimum_and_stops_early() -> None:
    inst, dag = worked(40)
    state = State(inst)
    res, ga = gai_place(state, dag, GaParams(population=20, generations=500, seed=1))
    assert res.ok and state.total() == pytest.approx(0.0612)
    assert ga.stopped == "no improvement" and ga.generations < 500
    inst30, dag30 = worked(30)
    new, _ = gag_replan(inst30, [compile_dag(dag30, inst30)], GaParams(population=20, seed=2))
    assert new is not None and new.total() == pytest.approx(0.065)


# --- generator ------------------------------------------------------------------------------------
def test_generator_dags_follow_the_papers_shape() -> None:
    rng = np.random.default_rng(0)
    for size in (4, 5, 12, 25, 50):
        for _ in range(5):
            dag = random_dag("d", size, rng)
            inst = make_setup(4, 2, seed=0)
            info = compile_dag(dag, inst)
            assert info.n == size
            assert 1 <= info.is_source.sum() <= 4 and 1 <= info.is_sink.sum() <= 3
            assert max(len(c) for c in info.children) <= 5
            assert all(info.parents[v] for v in range(size) if not info.is_source[v])
            assert all(info.children[v] for v in range(size) if not info.is_sink[v])
    small = make_setup(*SETUPS["small"])
    assert (small.is_edge.sum(), (~small.is_edge).sum()) == (96, 4)
    assert SETUPS["large"] == (960, 40)
    assert small.empty_edges() == []


def test_traces_are_seeded_and_follow_the_random_walk_band() -> None:
    inst = make_setup(20, 2, seed=1)
    pool = dag_pool(1, sizes=(4, 5, 6, 8, 10, 12), check=inst)
    a = rw_trace(pool, inst, utilisation=2, band=0.5, intervals=60, seed=4)
    b = rw_trace(pool, inst, utilisation=2, band=0.5, intervals=60, seed=4)
    assert [e.name for e in a.events] == [e.name for e in b.events]
    active = a.active_after()
    assert max(active) / inst.n_resources < 2.5 + 12 / inst.n_resources
    assert any(e.kind == "remove" for e in a.events)
    for e in a.events:
        if e.kind == "add":  # sources pinned to one edge device each
            info = compile_dag(e.dag, inst)
            assert all(len(info.allowed[v]) == 1 for v in np.flatnonzero(info.is_source))


# --- adapter, registry, pipeline -----------------------------------------------------------------
@pytest.fixture
def app() -> AppConfig:
    return load_config(CONFIG)


def fitted(config: AppConfig, **changes) -> FittedModel:
    ops = {}
    for o in config.operators:
        sim = config.simulation
        rate = 100.0
        ops[o.name] = OperatorModel(
            operator=o.name, query=o.query, arrival_rate_mean=rate, arrival_rate_p95=rate,
            arrival_rate_max=rate, service_mean_s=sim.service[o.name].mean_ms / 1e3,
            service_m2_s2=0.0, service_scv=0.0, selectivity=sim.selectivity.get(o.name, 1.0),
            utilisation=0.1, calibration="busy_time", samples=10)
    queries = {q.name: QueryModel(query=q.name, arrival_rate_mean=100, arrival_rate_p95=100,
                                  arrival_rate_max=100, service_mean_s=0.001,
                                  service_m2_s2=0.0, events=1000) for q in config.queries}
    base = dict(
        model_id="m", app=config.app, window_start="2026-01-01T00:00:00+00:00",
        window_end="2026-01-01T00:10:00+00:00", rate_statistic="mean", operators=ops,
        queries=queries,
        deployment=Deployment(placement=dict(config.deployment),
                              nodes={n.name: NodeState(type=n.type) for n in config.nodes}),
    )
    base.update(changes)
    return FittedModel(**base)


def with_params(config: AppConfig, **changes) -> AppConfig:
    params = {**config.method.params, **changes}
    return config.model_copy(update={"method": config.method.model_copy(update={"params": params})})


def test_methods_are_registered_and_plan_the_example(app: AppConfig) -> None:
    assert {"topset", "topset-p", "gai", "gag", "edgecloud-milp"} <= set(METHODS)
    model = fitted(app)
    for name in ("topset", "topset-p", "gai", "gag"):
        cfg = app.model_copy(update={"method": app.method.model_copy(update={"name": name})})
        cfg = with_params(cfg, ga={"population": 30, "generations": 60})
        d = run_method(model, cfg)
        assert d.feasible, d.solver.message
        assert set(d.placement) == {o.name for o in app.operators}
        assert set(d.predicted.response_time_ms) == {"traffic", "air", "power"}
        assert d.predicted.extra["min_battery_margin_wh"] > 0
        for q in app.queries:  # E4: sources on their gateway Pi, sinks on a VM
            for s in q.sources:
                assert d.placement[s][0].node == app.deployment[s][0][0]
            for k in q.sinks:
                assert d.placement[k][0].node.startswith("vm-")


def test_arrivals_mode_keeps_valid_placements(app: AppConfig) -> None:
    cfg = with_params(app, replan="arrivals", rebalance="none")
    d = plan_topset(fitted(cfg), cfg)
    assert d.predicted.extra["kept_dags"] == 3 and d.predicted.extra["migrations"] == 0
    assert {op: [(r.node, r.replicas) for r in e] for op, e in d.placement.items()} == {
        op: [tuple(x) for x in e] for op, e in cfg.deployment.items()}


def test_fitted_interference_costs_and_links_take_precedence(app: AppConfig) -> None:
    params = parse_params(app.method.params)
    model = fitted(
        app,
        nodes={"pi-1": NodeModel(node="pi-1", cpu_util_mean=0.2, interference_slope=0.3,
                                 idle_power_w=1.5, battery_wh=20.0)},
        placement_costs={"air_pattern": PlacementCosts(
            service_mean_s_by_type={"pi": 0.004, "vm": 0.0011},
            energy_j_per_event_by_type={"pi": 2e-5}, event_bytes=123)},
        links=[LinkModel(src="pi-1", dst="vm-1", latency_ms=80.0, bandwidth_mbps=10.0)],
    )
    built = build_instance(app, params, model)
    inst = built.inst
    p1, p2, v1 = inst.index["pi-1"], inst.index["pi-2"], inst.index["vm-1"]
    assert inst.resources[p1].interference == 0.3 and inst.resources[p2].interference == 0.05
    assert inst.resources[p1].idle_w == 1.5 and inst.resources[p1].battery_j == 20 * 3600
    k = inst.kind_index["air_pattern"]
    assert inst.service_s[k, p1] == 0.004 and inst.service_s[k, v1] == 0.0011
    assert inst.energy_j[k, p1] == 2e-5
    assert inst.latency_s[p1, v1] == inst.latency_s[v1, p1] == 0.080
    # without per-type costs, λ = fitted b de-interfered on its host (vm-1 hosts 14 busy
    # operators: π = 0.02·13) and scaled by speed
    j = inst.kind_index["air_average"]
    b = 0.3e-3 / (1 + 0.02 * 13)
    assert inst.service_s[j, v1] == pytest.approx(b)
    assert inst.service_s[j, p2] == pytest.approx(b / 0.3333)
    air = next(d for d in built.dags if d.name == "air")
    assert next(v for v in air.vertices if v.name == "air_pattern").event_bytes == 123
    # without a fitted model: method.params and the simulation
    plain = build_instance(app, params, None).inst
    assert plain.resources[p1].interference == 0.05
    assert plain.service_s[k, v1] == pytest.approx(0.6e-3)


def test_pipeline_publishes_a_feasible_plan_and_never_an_infeasible_one(app, settings) -> None:
    from datetime import UTC, datetime, timedelta

    from streamplan.publish import current_plan
    from streamplan.stages import Interval, run_plan, run_publish

    end = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
    interval = Interval(end - timedelta(minutes=10), end)
    plan = run_plan(settings, app, fitted(app), interval)
    assert plan.feasible and plan.method == "topset-p" and plan.mlflow_run_id
    assert run_publish(settings, plan).became_current
    # an empty battery on the air sensor's gateway: infeasible, current.json unchanged
    bad = with_params(app, node_types={"pi": {"battery_wh": 0}})
    later = interval.next()
    failed = run_plan(settings, bad, fitted(bad), later)
    assert failed.solver.status == "infeasible"
    assert "empty battery" in failed.solver.message and "pi-1" in failed.solver.message
    assert not run_publish(settings, failed).became_current
    assert current_plan(settings.publish_dir, app.app).plan_id == plan.plan_id
    # every row of one operator quarantined: no plan that would drop it, current.json unchanged
    model = fitted(app)
    gone = model.model_copy(update={"operators": {
        k: v for k, v in model.operators.items() if k != "air_pattern"}})
    blind = run_plan(settings, app, gone, later.next())
    assert blind.solver.status == "error" and "['air_pattern']" in blind.solver.message
    assert not run_publish(settings, blind).became_current
    assert current_plan(settings.publish_dir, app.app).plan_id == plan.plan_id


# --- bad input ----------------------------------------------------------------------------------
def test_a_cycle_is_an_error_naming_it(app: AppConfig) -> None:
    cyc = app.model_copy(update={"edges": [*app.edges, ("air_pattern", "air_filter")]})
    d = plan_topset(fitted(cyc), cyc)
    assert d.solver.status == "error" and not d.feasible
    assert "cycle" in d.solver.message and "air_filter" in d.solver.message
    inst, dag = worked()
    with pytest.raises(GraphError, match="cycle"):
        compile_dag(dataclasses.replace(dag, edges=(*dag.edges, ("k", "a"))), inst)


def test_a_vertex_that_fits_nowhere_is_infeasible_with_the_reason(app: AppConfig) -> None:
    cfg = with_params(app, operators={"power_sequence": {"service_ms": 50.0}})
    d = plan_topset_p(fitted(cfg, operators={
        k: v for k, v in fitted(cfg).operators.items() if k != "power_sequence"}), cfg)
    assert d.solver.status == "infeasible"
    assert "vertex power_sequence of dag power fits nowhere" in d.solver.message
    assert "exclusive capacity" in d.solver.message
    inst, dag = worked()
    heavy = dataclasses.replace(dag, input_rate=1000)
    state = State(inst)
    res = topset_place(state, heavy)
    assert not res.ok and "vertex a of dag g fits nowhere" in res.reason and not state.dags


def test_an_empty_battery_is_infeasible(app: AppConfig) -> None:
    model = fitted(app, nodes={"pi-3": NodeModel(node="pi-3", cpu_util_mean=0.0,
                                                 battery_wh=0.0)})
    d = plan_gai(model, with_params(app, ga={"population": 20, "generations": 20}))
    assert d.solver.status == "infeasible"
    assert "edge device pi-3 has an empty battery" in d.solver.message
    with pytest.raises(EdgeCloudInputError, match="battery_j must be >= 0, got -1"):
        Resource("x", "edge", battery_j=-1)


def test_zero_bandwidth_is_an_error_naming_the_link(app: AppConfig) -> None:
    with pytest.raises(ConfigError, match=r"method.params.links.edge-cloud.bandwidth_mbps.*"
                                          r"greater than 0 \(value: 0\)"):
        parse_params({"links": {"edge-cloud": {"latency_ms": 5, "bandwidth_mbps": 0}}})
    d = plan_topset(fitted(app, links=[LinkModel(src="pi-2", dst="vm-2", latency_ms=5,
                                                 bandwidth_mbps=0.0)]), app)
    assert d.solver.status == "error"
    assert "links[0] (pi-2 -> vm-2) bandwidth_mbps must be > 0, got 0.0" in d.solver.message
    inst, _ = worked()
    bw = inst.bandwidth_Bps.copy()
    bw[0, 1] = 0.0
    with pytest.raises(EdgeCloudInputError, match="bandwidth from E to C must be > 0, got 0.0"):
        Instance(inst.resources, inst.kinds, inst.service_s, inst.energy_j, inst.latency_s, bw)


@pytest.mark.parametrize(("params", "field", "value"), [
    ({"rebalance": "diagonal"}, "rebalance", "'diagonal'"),
    ({"latency_mode": "slow"}, "latency_mode", "'slow'"),
    ({"ga": {"population": 1}}, "ga.population", "1"),
    ({"node_types": {"pi": {"battery_wh": -5}}}, "node_types.pi.battery_wh", "-5"),
])
def test_bad_params_name_the_field_and_value(params, field, value) -> None:
    with pytest.raises(ConfigError, match=rf"method\.params\.{re_escape(field)}.*value: "
                                          rf"{re_escape(value)}"):
        parse_params(params)


def re_escape(s: str) -> str:
    import re

    return re.escape(s)


def test_bad_names_and_structures_are_config_errors(app: AppConfig) -> None:
    params = parse_params(app.method.params)
    with pytest.raises(ConfigError, match="unknown operator 'nope'"):
        build_instance(app, parse_params({"operators": {"nope": {"service_ms": 1}}}))
    with pytest.raises(ConfigError, match="unknown node type 'tpu'"):
        build_instance(app, parse_params({"node_types": {"tpu": {}}}))
    cross = app.model_copy(update={"edges": [*app.edges, ("air_filter", "power_batch")]})
    with pytest.raises(ConfigError, match=r"edges\[15\].*joins queries 'air' and 'power'"):
        build_instance(cross, params)
    inst, dag = worked()
    with pytest.raises(EdgeCloudInputError, match="selectivity must be finite and >= 0, got -1"):
        Vertex("v", "a", selectivity=-1)
    with pytest.raises(EdgeCloudInputError, match="unknown kind 'zz'"):
        compile_dag(dataclasses.replace(dag, vertices=(*dag.vertices[:2],
                                                       Vertex("k", "zz"))), inst)
    with pytest.raises(EdgeCloudInputError, match=r"pin \['C'\] leaves no resource"):
        compile_dag(dataclasses.replace(dag, vertices=(Vertex("s", "s", pin=("C",)),
                                                       *dag.vertices[1:])), inst)


def test_controller_rejects_unknown_method_and_rebalancing_gag() -> None:
    inst, _ = worked()
    with pytest.raises(ValueError, match="unknown 'ga'"):
        Controller(inst, "ga")
    with pytest.raises(ValueError, match="GAG re-places every DAG"):
        Controller(inst, "gag", "edge")


def test_level_sets_order_topset_visits() -> None:
    inst, dag = worked()
    info = compile_dag(dag, inst)
    assert [list(s) for s in info.levels] == [[0], [1], [2]]
    assert list(itertools.chain(*info.levels)) == [0, 1, 2]
