"""Response-time models (issue 10): QNA against closed forms, flow formulas on known cases,
ciw against the project simulator, and bad input."""

from __future__ import annotations

import math

import pytest

from optimizers.binpack import plan_binpack
from optimizers.binpack_milp import plan_binpack_milp
from optimizers.prediction import MODELS, Op, Query, Scenario, ScenarioError, get_model
from optimizers.prediction.catalogue import scenario_classes
from optimizers.prediction.ciw_model import ciw_response_times
from optimizers.prediction.flows import departure_scv, gg1_wait, split_scv, superpose_scv
from optimizers.prediction.jobs import outcomes
from optimizers.prediction.measure import measure
from streamplan.config import AppConfig, MethodSpec
from streamplan.fitted import Deployment, FittedModel, NodeState, OperatorModel, QueryModel

QNA = MODELS["qna_decomposition"]
MG1 = MODELS["mg1_single_server"]


def station(rate: float, mean_ms: float, scv: float) -> Scenario:
    return Scenario("one", (Op("a", "q", ("n1",), mean_ms, scv=scv),), (),
                    (Query("q", rate, ("a",), ("a",)),))


def tandem(rate: float, specs: list[tuple[float, float, float]]) -> Scenario:
    """Operators o0..ok on nodes n0..nk in a chain; spec = (mean_ms, scv, selectivity)."""
    ops = tuple(Op(f"o{i}", "q", (f"n{i}",), m, scv=c, selectivity=s)
                for i, (m, c, s) in enumerate(specs))
    edges = tuple((f"o{i}", f"o{i + 1}") for i in range(len(specs) - 1))
    return Scenario("tandem", ops, edges, (Query("q", rate, ("o0",), (f"o{len(specs) - 1}",)),))


@pytest.mark.parametrize("scv", [0.0, 0.25, 1.0, 4.0])
@pytest.mark.parametrize("rho", [0.1, 0.5, 0.9])
def test_qna_one_station_is_pollaczek_khinchine(scv: float, rho: float) -> None:
    b = 0.002
    lam = rho / b
    # P-K: W = b + λ(1 + c²)b² / (2(1 − ρ)); for c² = 1 the M/M/1 value b / (1 − ρ).
    pk = b + lam * (1 + scv) * b * b / (2 * (1 - rho))
    assert QNA.predict(station(lam, 2.0, scv)).rt_ms["q"] == pytest.approx(pk * 1000, rel=1e-9)
    if scv == 1.0:
        assert pk == pytest.approx(b / (1 - rho), rel=1e-12)


def test_qna_multiclass_matches_seed000_on_one_node() -> None:
    """Digest check C1: EPN1 (200/s, 2 ms) and EPN2 (100/s, 3 ms) exponential on one node."""
    s = Scenario("c1", (Op("a", "EPN1", ("n",), 2.0), Op("b", "EPN2", ("n",), 3.0)), (),
                 (Query("EPN1", 200, ("a",), ("a",)), Query("EPN2", 100, ("b",), ("b",))))
    for model in (QNA, MG1):
        rt = model.predict(s).rt_ms
        assert rt["EPN1"] == pytest.approx(7.6667, abs=1e-4)
        assert rt["EPN2"] == pytest.approx(8.6667, abs=1e-4)


def test_exponential_tandem_is_a_jackson_network() -> None:
    """Burke/Jackson: M/M/1 stations in tandem with Bernoulli routing are independent M/M/1s."""
    lam = 200.0
    s = tandem(lam, [(2.0, 1.0, 0.5), (3.0, 1.0, 1.0)])
    w1 = 0.002 / (1 - lam * 0.002)
    w2 = 0.003 / (1 - 0.5 * lam * 0.003)
    assert QNA.predict(s).rt_ms["q"] == pytest.approx(1000 * (w1 + 0.5 * w2), rel=1e-9)


def test_flow_formulas_on_known_cases() -> None:
    # Departures: Burke (M/M/1 out is Poisson); ρ → 0 keeps the arrivals; ρ → 1 copies service.
    assert departure_scv(0.6, 1.0, 1.0) == pytest.approx(1.0)
    assert departure_scv(0.0, 0.3, 4.0) == pytest.approx(0.3)
    assert departure_scv(1.0, 0.3, 4.0) == pytest.approx(4.0)
    assert departure_scv(0.5, 2.0, 0.0) == pytest.approx(1.5)
    # Bernoulli thinning keeps a Poisson flow Poisson and pushes any flow towards it.
    assert split_scv(0.3, 1.0) == pytest.approx(1.0)
    assert split_scv(0.5, 0.0) == pytest.approx(0.5)
    assert superpose_scv([2.0, 2.0], [1.0, 1.0]) == pytest.approx(1.0)
    assert superpose_scv([0.0], [5.0]) == 1.0
    # Kingman for c_a² ≥ 1: W_q = b·ρ/(1−ρ)·(c_a² + c_s²)/2; a D/D/1 queue never waits.
    assert gg1_wait(0.8, 1.0, 2.0, 0.5) == pytest.approx(0.8 / 0.2 * 1.25)
    assert gg1_wait(0.8, 1.0, 0.0, 0.0) == 0.0
    # KLB shrinks the wait for smooth arrivals: below Kingman, above zero.
    klb = gg1_wait(0.5, 1.0, 0.25, 1.0)
    assert 0 < klb < 0.5 / 0.5 * 1.25 / 2


def test_outcomes_are_a_distribution_matching_flow_balance() -> None:
    for scenarios in scenario_classes().values():
        for s in scenarios:
            visits = s.visits()
            for q in s.queries:
                outs = outcomes(s, q.name)
                assert sum(o.prob for o in outs) == pytest.approx(1.0)
                work = sum(o.prob * j.mean_s for o in outs for j in o.jobs)
                expected = sum(visits[o.name] * o.mean_s for o in s.ops if o.query == q.name)
                assert work == pytest.approx(expected)


def test_windowed_job_moments_include_the_window_mixture() -> None:
    """One VM: job = Op1 + Bernoulli(p)·(Op2 + Op3); its second moment is exact, while seed
    000's Σ v·Var drops the mixture term p(1−p)(b2 + b3)²."""
    p, b1, b2, b3 = 0.25, 1.0, 4.0, 2.0
    s = Scenario("w", (Op("a", "q", ("n",), b1, selectivity=p), Op("b", "q", ("n",), b2, scv=0),
                       Op("c", "q", ("n",), b3, scv=0)),
                 (("a", "b"), ("b", "c")), (Query("q", 50.0, ("a",), ("c",)),))
    m2 = 2 * b1**2 + 2 * b1 * p * (b2 + b3) + p * (b2 + b3) ** 2  # E[(S1 + B·(b2+b3))²], ms²
    mean = b1 + p * (b2 + b3)
    lam = 0.05  # per ms
    pk = mean + lam * m2 / (2 * (1 - lam * mean))
    assert QNA.predict(s).rt_ms["q"] == pytest.approx(pk, rel=1e-9)
    assert MG1.predict(s).rt_ms["q"] < pk


def test_ciw_and_project_simulator_agree_on_mm1() -> None:
    s = station(250.0, 2.0, 1.0)  # ρ = 0.5, W = 4 ms
    sim = measure(s, "project", 20000, [1, 2, 3])
    ref = measure(s, "ciw", 20000, [1, 2, 3])
    assert abs(sim.mean_ms["q"] - ref.mean_ms["q"]) <= sim.ci_ms["q"] + ref.ci_ms["q"]
    for m in (sim, ref):
        assert abs(m.mean_ms["q"] - 4.0) <= 2 * m.ci_ms["q"]
        assert 0 < m.ci_ms["q"] < 0.4


@pytest.mark.parametrize("name", ["single_scv4", "shared_vm_2", "chain3", "diamond"])
def test_ciw_and_project_simulator_agree_on_classes_1_to_3(name: str) -> None:
    s = next(x for xs in scenario_classes().values() for x in xs if x.name == name)
    s = s.at_utilisation(0.5)
    sim = measure(s, "project", 8000, [1, 2, 3])
    ref = measure(s, "ciw", 8000, [1, 2, 3])
    for q in s.queries:
        assert abs(sim.mean_ms[q.name] - ref.mean_ms[q.name]) <= (
            sim.ci_ms[q.name] + ref.ci_ms[q.name]
        ), q.name


def test_unstable_scenario_predicts_inf_with_reason() -> None:
    s = station(600.0, 2.0, 1.0)  # ρ = 1.2
    for model in (QNA, MG1):
        p = model.predict(s)
        assert p.rt_ms["q"] == math.inf and "rho=1.2" in p.unstable["q"]
    with pytest.raises(ScenarioError, match=r"node 'n1' has rho=1.2"):
        ciw_response_times(s, 10.0, 1)
    with pytest.raises(ScenarioError, match=r"node 'n1' has rho=1.2"):
        measure(s, "project", 100, [1, 2])


def test_bad_input_names_field_and_value() -> None:
    with pytest.raises(ScenarioError, match=r"rho must be in \(0, 1\).*got 1.0"):
        station(10.0, 2.0, 1.0).at_utilisation(1.0)
    with pytest.raises(ValueError, match=r"query\[q\]\.rate .*got -5"):
        Query("q", -5.0, ("a",), ("a",))
    with pytest.raises(ValueError, match=r"op\[a\]\.mean_ms .*got -1"):
        Op("a", "q", ("n",), -1.0)
    with pytest.raises(ValueError, match=r"op\[a\]\.selectivity .*got 1.5"):
        Op("a", "q", ("n",), 1.0, selectivity=1.5)
    with pytest.raises(ValueError, match=r"method\.params\.rt_model: unknown model 'nope'"):
        get_model("nope")
    with pytest.raises(ValueError, match=r"seeds: need at least 2"):
        measure(station(10.0, 2.0, 1.0), "ciw", 100, [1])


def test_ciw_rejects_a_fork_across_nodes() -> None:
    ops = (Op("a", "q", ("n1",), 1.0), Op("b", "q", ("n2",), 1.0), Op("c", "q", ("n3",), 1.0))
    s = Scenario("fork", ops, (("a", "b"), ("a", "c")), (Query("q", 10.0, ("a",), ("b", "c")),))
    with pytest.raises(ScenarioError, match="forks the event across nodes"):
        ciw_response_times(s, 5.0, 1)


# --- the configured model inside the binpack planner ------------------------------------------
WINDOW_OPS = {"window": (0.2e-3, 1.0, 1 / 32), "features": (3.2e-3, 0.25, 1.0),
              "match": (2.0e-3, 1.0, 1.0)}


def windowed_fit(config: AppConfig, rates: dict[str, float]) -> FittedModel:
    """Demo queries with seed 000's windowed operators (Op1 fires one window per 32 events);
    the query model is fitted as pipelines/fit.py does (b = Σ v b, M_2 = b² + Σ v Var)."""
    operators, queries = {}, {}
    for q, r in rates.items():
        v, b, var = 1.0, 0.0, 0.0
        for suffix, (mean, scv, sel) in WINDOW_OPS.items():
            op = f"{q}_{suffix}"
            operators[op] = OperatorModel(
                operator=op, query=q, arrival_rate_mean=r * v, arrival_rate_p95=r * v,
                arrival_rate_max=r * v, service_mean_s=mean, service_m2_s2=(1 + scv) * mean**2,
                service_scv=scv, selectivity=sel, utilisation=r * v * mean,
                calibration="direct", samples=10)
            b, var, v = b + v * mean, var + v * scv * mean**2, v * sel
        queries[q] = QueryModel(query=q, arrival_rate_mean=r, arrival_rate_p95=r,
                                arrival_rate_max=r, service_mean_s=b, service_m2_s2=b * b + var,
                                events=int(r * 600))
    placement = {op: list(e) for op, e in config.deployment.items()}
    return FittedModel(
        model_id="m", app=config.app, window_start="2026-01-01T00:00:00Z",
        window_end="2026-01-01T01:00:00Z", operators=operators, queries=queries,
        deployment=Deployment(placement=placement, nodes={"vm-1": NodeState(type="small")}),
    )


def with_params(config: AppConfig, **params: object) -> AppConfig:
    return config.model_copy(update={"method": MethodSpec(name="binpack", params=params)})


def test_binpack_uses_the_configured_rt_model(demo_config: AppConfig) -> None:
    rates = {"spoon": 900.0, "knife": 700.0, "fork": 500.0}
    fit = windowed_fit(demo_config, rates)
    seed = plan_binpack(fit, demo_config)
    same = plan_binpack(fit, with_params(demo_config, rt_model="mg1_single_server"))
    assert (same.placement, same.nodes) == (seed.placement, seed.nodes)
    assert same.predicted.response_time_ms == pytest.approx(seed.predicted.response_time_ms)
    qna = plan_binpack(fit, with_params(demo_config, rt_model="qna_decomposition"))
    # Independent P-K per node with the exact per-event second moment E[(S1 + B·(S2+S3))²].
    (m1, c1, p), (m2, c2, _), (m3, c3, _) = WINDOW_OPS.values()
    b = m1 + p * (m2 + m3)
    tail2 = (1 + c2) * m2**2 + 2 * m2 * m3 + (1 + c3) * m3**2
    second = (1 + c1) * m1**2 + 2 * m1 * p * (m2 + m3) + p * tail2
    for node in qna.predicted.node_utilisation:
        hosted = [q for q in rates if qna.placement[f"{q}_window"][0].node == node]
        rho = sum(rates[q] * b for q in hosted)
        wq = sum(rates[q] * second for q in hosted) / (2 * (1 - rho))
        for q in hosted:
            assert qna.predicted.response_time_ms[q] == pytest.approx(1000 * (b + wq))
    # The seed's M_2 misses the window mixture: it keeps all three EPNs on one node, where
    # the exact moments put them above HW (1.2 × 2 ms); the QNA-configured plan spreads them.
    lam = sum(rates.values())
    exact_one_node = b + lam * second / (2 * (1 - lam * b))
    assert len({e[0].node for e in seed.placement.values()}) == 1
    assert 1000 * exact_one_node > 1.2 * 2.0 >= max(seed.predicted.response_time_ms.values())
    assert len({e[0].node for e in qna.placement.values()}) > 1
    with pytest.raises(ValueError, match=r"method\.params\.rt_model.*'nope'"):
        plan_binpack(fit, with_params(demo_config, rt_model="nope"))


def test_idle_query_predicts_its_bare_service_time() -> None:
    s = tandem(0.0, [(2.0, 1.0, 0.5), (3.0, 0.0, 1.0)])
    for model in (QNA, MG1):
        assert model.predict(s).rt_ms["q"] == pytest.approx(2.0 + 0.5 * 3.0)


def test_binpack_milp_uses_the_configured_rt_model(demo_config: AppConfig) -> None:
    """The exact MILP reads the same ``rt_model``: with QNA moments it must spread the
    windowed EPNs the seed's moments keep on one node, and agree with the heuristic."""
    fit = windowed_fit(demo_config, {"spoon": 900.0, "knife": 700.0, "fork": 500.0})

    def milp(**params: object):
        config = demo_config.model_copy(
            update={"method": MethodSpec(name="binpack-milp", params=params)})
        return plan_binpack_milp(fit, config)

    seed, qna = milp(), milp(rt_model="qna_decomposition")
    assert seed.solver.status == qna.solver.status == "optimal"
    assert len({e[0].node for e in seed.placement.values()}) == 1
    assert len({e[0].node for e in qna.placement.values()}) > 1
    heuristic = plan_binpack(fit, with_params(demo_config, rt_model="qna_decomposition"))
    used = [n for n, action in heuristic.nodes.items() if action != "release"]
    assert qna.solver.extra["nodes"] <= len(used), "the optimum never needs more nodes"
