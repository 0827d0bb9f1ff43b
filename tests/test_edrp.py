"""EDRP / rEDRP (seed 003): formulas, model size, optima checked by hand and by brute force."""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
import re
from collections.abc import Mapping

import pytest

from optimizers.edrp import (
    WEIGHT_PRESETS,
    Bounds,
    DataStore,
    EdrpInputError,
    EdrpInputs,
    Limits,
    Multiset,
    Node,
    Operator,
    Stream,
    Weights,
    build_model,
    config_inputs,
    evaluate,
    parse_params,
    plan,
    plan_edrp,
    plan_redrp,
    violations,
    warm_start,
)
from optimizers.edrp.metrics import downtime
from optimizers.edrp.multisets import action, all_multisets, as_multiset, one_move
from optimizers.edrp.space import build_space
from streamplan.config import AppConfig, ConfigError, load_config
from streamplan.fitted import Deployment, FittedModel, NodeState, OperatorModel, QueryModel
from streamplan.plan import Decision
from streamplan.settings import REPO_ROOT

DEBS = REPO_ROOT / "configs" / "debs2015_edrp.yaml"
LIMITS = Limits(time_limit_s=30)
RATE_BPS = 100e6


# --- the digest's worked example (§10) -----------------------------------------------------
def worked(weights: tuple[float, float, float], current: Mapping[str, Multiset] | None = None):
    """A (source, pinned to n1, 8 tuples/s) → B on nodes n1, n2; U_0,B = {n1}."""
    code = 0.1 * RATE_BPS / 8  # I_C / r = 0.1 s
    ops = (
        Operator("A", 10.0, 8.0, 1, ("n1",), code_bytes=code),
        Operator("B", 10.0, 8.0, 2, code_bytes=code),
    )
    return EdrpInputs(
        operators=ops,
        streams=(Stream("A", "B", 8.0),),
        nodes=(Node("n1", 2.0), Node("n2", 2.0)),
        links=(("n1", "n2", 0.1),),
        weights=Weights(*weights),
        bounds=Bounds(2.0, 4.0, 2.0),
        link_cost=0.05,
        datastore=DataStore(0.0, RATE_BPS),
        current={"A": ("n1",), "B": ("n1",)} if current is None else current,
    )


def b_of(decision: Decision) -> Multiset:
    return as_multiset((r.node, r.replicas) for r in decision.placement["B"])


@pytest.mark.parametrize(
    ("b", "r", "c", "t_d"),
    [
        (("n1",), 1.0, 2.0, 0.0),
        (("n2",), 1.1, 2.4, 0.85),
        (("n1", "n2"), 0.5 + 0.1 + 1 / 6, 3.2, 0.85),
        (("n2", "n2"), 0.5 + 0.1 + 1 / 6, 3.4, 0.85),
    ],
)
def test_worked_example_metrics_by_hand(b, r, c, t_d) -> None:
    inputs = worked((0.5, 0.5, 0.0))
    ev = evaluate(inputs, {"A": ("n1",), "B": b})
    assert (ev.response_s, ev.cost, ev.downtime_s) == pytest.approx((r, c, t_d))
    assert violations(inputs, {"A": ("n1",), "B": b}) == []


def test_worked_example_colocation_breaks_capacity() -> None:
    broken = violations(worked((0.5, 0.5, 0.0)), {"A": ("n1",), "B": ("n1", "n1")})
    assert broken == ["node n1: 3 resources used > capacity 2"]


@pytest.mark.parametrize(
    ("weights", "best", "objective"),
    [
        ((0.8, 0.2, 0.0), ("n1", "n2"), 7 / 15),
        ((0.4, 0.1, 0.5), ("n1",), 0.25),  # downtime suppresses the scale-out
        ((0.5, 0.5, 0.0), ("n1",), 0.5),
    ],
)
@pytest.mark.parametrize("restricted", [False, True])
def test_worked_example_optima(weights, best, objective, restricted) -> None:
    d = plan(worked(weights), restricted=restricted, limits=LIMITS)
    assert d.solver.status == "optimal"
    assert b_of(d) == best
    assert d.solver.objective == pytest.approx(objective)
    assert d.predicted.extra["objective_F"] == pytest.approx(objective)


def test_worked_example_model_size_and_names_before_pruning() -> None:
    """13 variables, 16 constraints (digest §10); every variable and constraint is named."""
    model, handles = build_model(worked((0.8, 0.2, 0.0)), prune=False)
    assert (handles.n_vars, handles.n_conss) == (13, 16)
    names = {v.name for v in model.getVars()}
    assert {"r", "t_D", "x[A|n1]", "x[B|n1+n2]", "y[A>B|n1|n2+n2]"} <= names
    conss = {c.name for c in model.getConss()}
    assert {"path[A>B]", "downtime[B]", "R_max", "C_max", "TD_max", "capacity[n2]"} <= conss
    assert {"assign[A]", "out[A>B|n1]", "in[A>B|n1+n1]"} <= conss


def test_warm_start_accepts_only_complete_candidate_deployments() -> None:
    model, handles = build_model(worked((0.8, 0.2, 0.0)))
    assert not warm_start(model, handles, {"A": ("n1",), "zz": ("n1",)})
    assert not warm_start(model, handles, {"A": ("n1",), "B": ("n1", "n1", "n2")})
    assert warm_start(model, handles, {"A": ("n1",), "B": ("n2",)})


def test_redrp_keeps_the_one_move_neighbourhood() -> None:
    space = build_space(worked((0.8, 0.2, 0.0)), restricted=True)
    assert set(space.choices["B"]) == {("n1",), ("n2",), ("n1", "n2"), ("n1", "n1")}


# --- formulas ------------------------------------------------------------------------------
def test_downtime_constants_of_the_paper() -> None:
    """Digest §10 'paper-constants check' (Table II values, stateless operator)."""
    op = Operator("p", 233.0, 100.0, 2)
    nodes = {u: Node(u) for u in "uvw"}
    store = DataStore()

    def t_d(before: Multiset, after: Multiset) -> float:
        return downtime(op, before, after, nodes, store, 0.25)

    assert t_d(("u",), ("v",)) == pytest.approx(0.25 + (0.010 + 307200 * 8 / 1e8) + 0.010 + 0.5)
    assert t_d(("u",), ("v",)) == pytest.approx(0.7946, abs=1e-4)
    assert t_d(("u", "v"), ("v", "v")) == pytest.approx(0.770)
    assert t_d(("u", "v"), ("v",)) == pytest.approx(0.270)
    assert t_d(("u",), ("u", "u")) == pytest.approx(0.250)
    assert t_d(("u", "v"), ("u", "v")) == 0.0
    assert t_d(("v", "u"), ("u", "v")) == 0.0  # same multiset, any order


def test_migrating_state_adds_upload_and_download() -> None:
    """Eq. (27): max{code download, state upload} + state download + spawn (1 MB state)."""
    heavy = Operator("b", 10.0, 1.0, 2, state_bytes=1e6)
    code = 0.010 + 307200 * 8 / 1e8
    state = 0.010 + 8e6 / 1e8
    expected = 0.25 + max(code, state) + state + 0.5
    nodes = {u: Node(u) for u in "uv"}
    assert downtime(heavy, ("u",), ("v",), nodes, DataStore(), 0.25) == pytest.approx(expected)


def test_multiset_counts() -> None:
    for n, k in [(3, 1), (4, 2), (5, 3)]:
        assert len(all_multisets([f"n{i}" for i in range(n)], k)) == math.comb(n + k, k) - 1


@pytest.mark.parametrize("u0", [("a",), ("a", "b"), ("b", "b"), ("a", "c", "c")])
def test_one_move_equals_the_papers_conditions(u0: Multiset) -> None:
    nodes, k = ["a", "b", "c", "d"], 3

    def diff(v: Multiset) -> list[int]:
        return [u0.count(x) - v.count(x) for x in nodes]

    expected = [
        v
        for v in all_multisets(nodes, k)
        if all(abs(d) <= 1 for d in diff(v))
        and sum(map(abs, diff(v))) <= 2
        and abs(len(v) - len(u0)) <= 1
    ]
    assert one_move(u0, nodes, k) == sorted(expected)
    if len(u0) == 1:
        assert len(one_move(u0, nodes, k)) == 2 * len(nodes)


def test_actions() -> None:
    assert [action(None, ("a",)), action(("a",), ("b",)), action(("a", "b"), ("b",))] == [
        "deploy",
        "migrate",
        "scale-in",
    ]


# --- model size ----------------------------------------------------------------------------
def table4_inputs(n: int) -> EdrpInputs:
    """DEBS operators on the Table IV DAG (digest §6, 10 edges), n nodes, k = 2, low rates."""
    names = ["src", "parser", "filter", "route", "met", "count", "prank", "grank"]
    edges = [
        ("src", "parser"), ("parser", "filter"), ("filter", "route"), ("route", "count"),
        ("filter", "met"), ("met", "count"), ("count", "prank"), ("prank", "grank"),
        ("route", "met"), ("met", "prank"),
    ]  # fmt: skip
    nodes = [f"n{i}" for i in range(n)]
    k = {"src": 1, "met": 1, "grank": 1}
    pins = {"src": (nodes[0],), "grank": (nodes[-1],)}
    ops = tuple(
        Operator(i, 1000.0, 1.0, k.get(i, 2), pins.get(i)) for i in names
    )
    return EdrpInputs(
        operators=ops,
        streams=tuple(Stream(a, b, 1.0) for a, b in edges),
        nodes=tuple(Node(u) for u in nodes),
        links=tuple((a, b, 0.01) for a, b in zip(nodes, nodes[1:], strict=False)),
        weights=Weights(0.5, 0.5, 0.0),
        bounds=Bounds(1.0, 100.0, 10.0),
    )


def test_model_counts_follow_the_formulas() -> None:
    """Digest §4 'Size': Σa_i + Σa_i·a_j + 2 variables; |Π| + 2|V_dsp| + 3 + |V_res| +
    Σ(a_i + a_j) constraints."""
    inputs = table4_inputs(3)
    model, h = build_model(inputs, prune=False)
    a = {i: len(c) for i, c in h.space.choices.items()}
    edges = [(s.src, s.dst) for s in inputs.streams]
    assert h.n_vars == sum(a.values()) + sum(a[i] * a[j] for i, j in edges) + 2
    assert h.n_conss == len(h.space.paths) + 2 * len(a) + 3 + 3 + sum(
        a[i] + a[j] for i, j in edges
    )
    assert h.n_vars == model.getNVars(False) and h.n_conss == model.getNConss(False)


@pytest.mark.parametrize(("n", "expected"), [(8, 9472), (12, 37366)])
def test_variable_count_matches_table_iv(n: int, expected: int) -> None:
    """4a² + 4an + 7a + n + 4 with a = C(n+2, 2) − 1: Table IV's 9.4k and 37.3k (k = 2)."""
    space = build_space(table4_inputs(n), prune=False)
    count = sum(map(len, space.choices.values())) + sum(map(len, space.links.values())) + 2
    a = math.comb(n + 2, 2) - 1
    assert count == 4 * a * a + 4 * a * n + 7 * a + n + 4 == expected


# --- optima against brute force -------------------------------------------------------------
def random_instance(seed: int, weights: tuple[float, float, float] | None = None) -> EdrpInputs:
    """3 nodes, a diamond of 4 operators (source pinned), k = 2, random rates and delays."""
    rng = random.Random(seed)
    nodes = ("u", "v", "w")
    rate = rng.uniform(5, 9)
    ops = (
        Operator("s", 20.0, rate, 1, ("u",), state_bytes=100.0),
        Operator("a", rng.uniform(6, 12), rate, 2, state_bytes=rng.choice([0.0, 5e5])),
        Operator("b", rng.uniform(6, 12), rate, 2),
        Operator("j", rng.uniform(15, 25), 2 * rate, 2, state_bytes=1e5),
    )
    streams = tuple(Stream(x, y, rate) for x, y in [("s", "a"), ("s", "b"), ("a", "j"), ("b", "j")])
    links = tuple((x, y, rng.uniform(0.01, 0.2)) for x, y in itertools.combinations(nodes, 2))
    current = {"s": ("u",), "a": (rng.choice(nodes),), "b": ("v",), "j": ("w",)}
    if weights is None:
        raw = [rng.random() for _ in range(3)]
        weights = tuple(x / sum(raw) for x in raw)
    return EdrpInputs(
        operators=ops,
        streams=streams,
        nodes=tuple(Node(u, capacity=rng.choice([2.0, 3.0])) for u in nodes),
        links=links,
        weights=Weights(*weights),
        bounds=Bounds(3.0, 12.0, 3.0),
        link_cost=0.02,
        current=current,
    )


def brute_force(inputs: EdrpInputs, restricted: bool = False) -> float | None:
    """min F over every feasible deployment (None if there is none)."""
    per_op = []
    for op in inputs.operators:
        allowed = list(op.nodes or [n.name for n in inputs.nodes])
        if restricted:
            per_op.append(one_move(inputs.current[op.name], allowed, op.max_replicas))
        else:
            per_op.append(all_multisets(allowed, op.max_replicas))
    names = [o.name for o in inputs.operators]
    best = None
    for combo in itertools.product(*per_op):
        deployment = dict(zip(names, combo, strict=True))
        if not violations(inputs, deployment):
            f = evaluate(inputs, deployment).objective
            best = f if best is None else min(best, f)
    return best


@pytest.mark.parametrize("seed", range(4))
def test_scip_optimum_equals_brute_force_and_passes_the_checker(seed: int) -> None:
    inputs = random_instance(seed)
    d = plan(inputs, limits=LIMITS)
    expected = brute_force(inputs)
    if expected is None:
        assert d.solver.status == "infeasible"
        return
    assert d.solver.status == "optimal"
    assert d.solver.objective == pytest.approx(expected, abs=1e-7)
    deployment = {op: as_multiset((r.node, r.replicas) for r in e) for op, e in d.placement.items()}
    assert violations(inputs, deployment) == []  # capacities, pins, k, stability, bounds
    assert evaluate(inputs, deployment).objective == pytest.approx(d.solver.objective, abs=1e-7)


@pytest.mark.parametrize("seed", range(4))
def test_redrp_is_never_better_than_edrp(seed: int) -> None:
    inputs = random_instance(seed)
    full, restricted = plan(inputs, limits=LIMITS), plan(inputs, restricted=True, limits=LIMITS)
    assert restricted.solver.message.startswith("redrp")
    if restricted.feasible:
        assert full.feasible
        assert restricted.solver.objective >= full.solver.objective - 1e-9
        assert restricted.solver.objective == pytest.approx(
            brute_force(inputs, restricted=True), abs=1e-7
        )
        for op, entries in restricted.placement.items():
            after = as_multiset((r.node, r.replicas) for r in entries)
            assert after in one_move(inputs.current[op], ["u", "v", "w"], 2)


# --- weights ----------------------------------------------------------------------------------
def test_more_response_weight_buys_lower_response_time_at_higher_cost() -> None:
    results = []
    for w_r in (0.1, 0.3, 0.5, 0.7, 0.9):
        d = plan(random_instance(1, (w_r, 1 - w_r, 0.0)), limits=LIMITS)
        results.append((d.predicted.extra["response_time_ms"], d.predicted.cost_per_hour))
    rts, costs = zip(*results, strict=True)
    assert all(a >= b - 1e-9 for a, b in itertools.pairwise(rts))
    assert all(a <= b + 1e-9 for a, b in itertools.pairwise(costs))
    assert rts[0] > rts[-1] and costs[0] < costs[-1]


def test_downtime_weight_keeps_the_current_deployment() -> None:
    """With w_d = 0 the plan ignores U_0; with w_d > 0 and the w_d = 0 optimum as U_0, the same
    deployment comes back at zero downtime (digest §10 invariants)."""
    base = random_instance(2, (0.5, 0.5, 0.0))
    first = plan(base, limits=LIMITS)
    elsewhere = {"s": ("u",), "a": ("w",), "b": ("w",), "j": ("u",)}
    moved = plan(dataclasses.replace(base, current=elsewhere), limits=LIMITS)
    assert moved.solver.objective == pytest.approx(first.solver.objective)
    u0 = {op: as_multiset((r.node, r.replicas) for r in e) for op, e in first.placement.items()}
    balanced = dataclasses.replace(base, weights=Weights(0.3, 0.3, 0.4), current=u0)
    stay = plan(balanced, limits=LIMITS)
    assert stay.predicted.downtime_s == 0.0
    assert stay.solver.objective == pytest.approx(0.6 * first.solver.objective)


# --- infeasible and bad inputs -------------------------------------------------------------
def chain(**changes) -> EdrpInputs:
    """Two operators on two nodes; ``changes`` overrides EdrpInputs fields."""
    fields = dict(
        operators=(Operator("a", 10.0, 5.0, 2), Operator("b", 10.0, 5.0, 2)),
        streams=(Stream("a", "b", 5.0),),
        nodes=(Node("u"), Node("v")),
        links=(("u", "v", 0.01),),
        weights=Weights(0.5, 0.5, 0.0),
        bounds=Bounds(1.0, 10.0, 5.0),
    )
    return EdrpInputs(**{**fields, **changes})


@pytest.mark.parametrize(
    ("changes", "status", "message"),
    [
        ({"nodes": (Node("u", 1.0), Node("v", 0.0))}, "infeasible", "capacity too small"),
        (
            {"operators": (Operator("a", 10.0, 25.0, 2), Operator("b", 10.0, 5.0, 2))},
            "infeasible",
            r"operator a \(dropped: .*unstable",
        ),
        (
            {
                "operators": (Operator("a", 10.0, 5.0, 2, ("v",)), Operator("b", 10.0, 5.0, 2)),
                "nodes": (Node("u"), Node("v", 0.0)),
            },
            "infeasible",
            r"operator a \(dropped: 2 over node capacity",  # pinned where it cannot fit
        ),
        ({"bounds": Bounds(0.05, 10.0, 5.0)}, "infeasible", "latency above R_max"),
        ({"bounds": Bounds(1.0, 1.5, 5.0)}, "infeasible", "SCIP proved the instance infeasible"),
        ({"links": ()}, "infeasible", r"disconnected: components \[\['u'\], \['v'\]\]"),
        ({"streams": (Stream("a", "b", 5.0), Stream("b", "a", 5.0))}, "error", "not a DAG"),
    ],
)
def test_bad_instances_answer_with_a_status_and_never_raise(changes, status, message) -> None:
    d = plan(chain(**changes), limits=LIMITS)
    assert d.solver.status == status and not d.feasible
    assert d.placement == {}
    assert re.search(message, d.solver.message), d.solver.message


def test_redrp_infeasible_when_one_move_is_not_enough() -> None:
    """a now needs 3 replicas (25 tuples/s, μ = 10): two scale-outs from U_0,a = {u}."""
    inputs = chain(
        operators=(Operator("a", 10.0, 25.0, 3), Operator("b", 10.0, 5.0, 1)),
        current={"a": ("u",), "b": ("v",)},
    )
    assert plan(inputs, restricted=True, limits=LIMITS).solver.status == "infeasible"
    assert plan(inputs, limits=LIMITS).solver.status == "optimal"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"current": {"zz": ("u",)}}, "current: unknown operator 'zz'"),
        ({"current": {"a": ("q",)}}, r"current\[a\]: unknown node 'q'"),
        ({"streams": (Stream("a", "x", 1.0),)}, "unknown operator 'x'"),
        ({"link_cost": -1.0}, "link_cost"),
    ],
)
def test_malformed_inputs_raise_naming_the_field(kwargs, match) -> None:
    with pytest.raises(EdrpInputError, match=match):
        chain(**kwargs)


def test_weights_must_sum_to_one() -> None:
    with pytest.raises(EdrpInputError, match="weights"):
        Weights(0.5, 0.5, 0.5)


# --- params and the config adapter ----------------------------------------------------------
@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"weights": {"r": 0.5, "c": 0.6, "d": 0.0}}, "method.params.weights"),
        ({"weights": "fastest"}, "method.params.weights"),
        ({"max_replicas": 0}, "method.params.max_replicas"),
        ({"bounds": {"r_max_ms": -1}}, "method.params.bounds.r_max_ms"),
        ({"network": {"links": [{"src": "a", "dst": "b"}]}}, "method.params.network.links.0"),
        ({"operators": {"x": {"pin": []}}}, "method.params.operators.x.pin"),
        ({"time_limit": 5}, "method.params.time_limit"),
    ],
)
def test_params_errors_name_the_field(params, field) -> None:
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        parse_params(params)


def test_weight_presets_are_table_iii() -> None:
    assert parse_params({"weights": "cost"}).weight_values() == Weights(0.0, 0.6, 0.4)
    assert set(WEIGHT_PRESETS) == {"baseline", "balanced", "response_time", "cost"}


@pytest.fixture(scope="module")
def debs() -> AppConfig:
    return load_config(DEBS)


def test_debs_config_builds_the_papers_instance(debs: AppConfig) -> None:
    inputs = config_inputs(debs, {"data_source": 100.0})
    ops = {o.name: o for o in inputs.operators}
    assert len(ops) == 8 and len(inputs.nodes) == 15 and len(inputs.streams) == 8
    assert ops["data_source"].nodes == ("new-york",) and ops["global_rank"].nodes == (
        "los-angeles",
    )
    assert {o.name for o in inputs.operators if o.max_replicas == 1} == {
        "data_source",
        "metronome",
        "global_rank",
    }
    assert ops["parser"].service_rate == pytest.approx(233.0, rel=1e-5)
    assert ops["partial_rank"].input_rate == pytest.approx(21 * (100 + 0.7), rel=1e-4)
    assert all(n.capacity == 2.0 and n.speed == 1.0 for n in inputs.nodes)
    assert inputs.bounds == Bounds(0.175, 30.0, 7.5)


def test_bad_pin_in_config_names_the_field(debs: AppConfig) -> None:
    params = {**debs.method.params, "operators": {"parser": {"pin": ["atlantis"]}}}
    broken = debs.model_copy(update={"method": debs.method.model_copy(update={"params": params})})
    with pytest.raises(ConfigError, match=r"method\.params\.operators\.parser\.pin"):
        config_inputs(broken, {"data_source": 70.0})


def fitted_for(config: AppConfig, source_rate: float) -> FittedModel:
    """A fitted model consistent with the config's simulation section."""
    sim = config.simulation
    ops = {
        o.name: OperatorModel(
            operator=o.name,
            query=o.query,
            arrival_rate_mean=source_rate,
            arrival_rate_p95=source_rate,
            arrival_rate_max=source_rate,
            service_mean_s=sim.service[o.name].mean_ms / 1e3,
            service_m2_s2=2 * (sim.service[o.name].mean_ms / 1e3) ** 2,
            service_scv=1.0,
            selectivity=sim.selectivity.get(o.name, 1.0),
            utilisation=0.5,
            calibration="direct",
            samples=10,
        )
        for o in config.operators
    }
    queries = {
        q.name: QueryModel(
            query=q.name,
            arrival_rate_mean=source_rate,
            arrival_rate_p95=source_rate,
            arrival_rate_max=source_rate,
            service_mean_s=0.01,
            service_m2_s2=0.0002,
            events=1000,
        )
        for q in config.queries
    }
    used = {u for entries in config.deployment.values() for u, _ in entries}
    return FittedModel(
        model_id="m1",
        app=config.app,
        window_start="2025-01-01T00:00:00Z",
        window_end="2025-01-01T01:00:00Z",
        operators=ops,
        queries=queries,
        deployment=Deployment(
            placement=config.deployment,
            nodes={u: NodeState(type=config.node_type(u).name) for u in used},
        ),
    )


def small_debs(debs: AppConfig, n_nodes: int = 5) -> AppConfig:
    """The DEBS application on the first ``n_nodes`` nodes of the ANS chain (fast EDRP)."""
    keep = ["new-york", "washington", "st-louis", "dallas", "houston"][:n_nodes]
    params = dict(debs.method.params)
    params["operators"] = {
        **params["operators"],
        "global_rank": {**params["operators"]["global_rank"], "pin": [keep[-1]]},
    }
    params["network"] = {
        **params["network"],
        "links": [
            lk for lk in params["network"]["links"] if lk["src"] in keep and lk["dst"] in keep
        ],
    }
    deployment = {op: [(keep[min(i // 2, n_nodes - 1)], 1)] for i, op in enumerate(
        o.name for o in debs.operators
    )}
    deployment["global_rank"] = [(keep[-1], 1)]
    return debs.model_copy(
        update={
            "nodes": [n for n in debs.nodes if n.name in keep],
            "deployment": deployment,
            "method": debs.method.model_copy(update={"params": params}),
        }
    )


@pytest.mark.parametrize("method", [plan_edrp, plan_redrp])
def test_registry_entry_points_plan_from_the_fitted_model(debs: AppConfig, method) -> None:
    config = small_debs(debs)
    decision = method(fitted_for(config, 80.0), config)
    assert decision.solver.status == "optimal", decision.solver.message
    assert decision.solver.name == "scip" and decision.solver.version
    assert decision.solver.n_vars and decision.solver.n_conss and decision.solver.gap == 0
    assert decision.placement["data_source"][0].node == "new-york"
    assert decision.placement["global_rank"][0].node == "houston"
    assert 0 < decision.predicted.response_time_ms["top10_routes"] <= 175
    assert decision.predicted.cost_per_hour >= 8 and decision.predicted.downtime_s >= 0
    assert all(0 < u <= 1 for u in decision.predicted.node_utilisation.values())


def test_redrp_on_the_papers_network_from_the_configured_deployment(debs: AppConfig) -> None:
    decision = plan_redrp(fitted_for(debs, 70.0), debs)
    assert decision.feasible, decision.solver.message
    inputs = config_inputs(
        debs,
        {"data_source": 70.0},
        current={op: as_multiset(e) for op, e in debs.deployment.items()},
    )
    chosen = {
        op: as_multiset((r.node, r.replicas) for r in e) for op, e in decision.placement.items()
    }
    assert violations(inputs, chosen) == []
    assert set(decision.nodes.values()) <= {"keep", "hire", "release"}
