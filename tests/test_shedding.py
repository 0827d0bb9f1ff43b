"""Seed 001 load shedding: digest examples, HiGHS cross-check, baselines, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import linprog

from optimizers.shedding.adapter import SheddingParams, instance_from_model, plan_shedding
from optimizers.shedding.fluid import p_star, processing_load, propagate, sojourn
from optimizers.shedding.instance import Instance, Operator, Pattern, Sink
from optimizers.shedding.lp import build_model, solve
from optimizers.shedding.planner import fill_budget, plan
from optimizers.shedding.simulate import lindley_sojourn, simulate_sojourn
from optimizers.shedding_workload import (
    borg_trace,
    example_g,
    fig1_instance,
    random_instance,
    segment_mixes,
)
from streamplan.config import AppConfig
from streamplan.fitted import FittedModel
from streamplan.plan import Decision

FORMS = ("aggregated", "full")


def _w2(rates: dict[str, float] | None = None) -> Operator:
    """ω2 of digest example G: SEQ(0;0;1) at 1 ms and AND(1,2,3) at 2 ms."""
    return Operator(
        "w2",
        [Pattern.of("g21", "Q21", "seq", {"0": 0.5, "1": 1.0}, 0.001),
         Pattern.of("g22", "Q22", "and", {"1": 1.0, "2": 1.0, "3": 1.0}, 0.002)],
        rates or {"0": 400.0, "1": 200.0, "2": 200.0, "3": 200.0},
    )


def _example_or(semantics: str) -> Instance:
    """Digest example OR: ω5 = OR(Q21, Q22) → one sink."""
    w5 = Operator("w5", [Pattern.of("g5", "S", "or", {"Q21": 1.0, "Q22": 1.0}, 1e-6)])
    return Instance([_w2(), w5], [("w2", "w5")], [Sink("sink", "w5")], 0.004, semantics)


# --- digest §10 worked examples ------------------------------------------------------------


@pytest.mark.parametrize("form", FORMS)
def test_example_g_global_and_local(form: str) -> None:
    inst = example_g()
    g = plan(inst, "global", formulation=form)
    loc = plan(inst, "local", formulation=form)
    assert g.state.weighted_output(inst) == pytest.approx(158.3333333, rel=1e-6)
    assert loc.state.weighted_output(inst) == pytest.approx(83.3333333, rel=1e-6)
    assert g.rounds[0].result.objective == pytest.approx(158.3333333, rel=1e-6)
    drops = g.drops(inst)["w2"]
    assert drops["g21"] == pytest.approx({"0": 0.75, "1": 0.75})
    assert drops["g22"] == pytest.approx(dict.fromkeys("123", 0.4583333333))
    assert loc.drops(inst)["w2"]["g22"] == pytest.approx(dict.fromkeys("123", 5 / 6))
    w2 = inst.op_index["w2"]
    assert g.state.p[w2] == pytest.approx(0.0008) and g.state.sojourn[w2] == pytest.approx(0.004)
    loss = 1 - loc.state.weighted_output(inst) / g.state.weighted_output(inst)
    assert loss == pytest.approx(0.4737, abs=1e-4)
    assert set(g.drops(inst)) == {"w2"}  # no drop outside ω*


def test_example_g_balanced_has_no_loss() -> None:
    inst = example_g(balanced=True)
    out = [plan(inst, m).state.weighted_output(inst) for m in ("global", "local")]
    assert out == pytest.approx([233.3333333, 233.3333333], rel=1e-6)


@pytest.mark.parametrize("form", FORMS)
def test_example_or_max_is_a_milp_and_sum_differs(form: str) -> None:
    inst = _example_or("max")
    res = plan(inst, "global", formulation=form)
    assert res.rounds[0].result.n_binaries == 2
    assert res.rounds[0].result.objective == pytest.approx(200.0, rel=1e-6)
    assert res.state.y[inst.op_index["w2"]][0] == pytest.approx(200.0, rel=1e-6)
    summed = _example_or("sum")
    assert plan(summed, "global", formulation=form).rounds[0].result.objective == (
        pytest.approx(233.3333333, rel=1e-6))


def test_no_overload_means_no_shedding() -> None:
    light = {"0": 100.0, "1": 50.0, "2": 50.0, "3": 50.0}  # ρ = 0.45, B = 1.6 ms < 4 ms
    inst = Instance([_w2(light)], [], [Sink("a", "w2")], 0.004)
    for mode in ("global", "local"):
        res = plan(inst, mode)
        assert res.rounds == [] and res.drops(inst) == {} and res.status == "optimal"
        assert all(np.all(r == 1.0) for rs in res.keep for r in rs)


def test_builder_names_and_sizes_without_solving() -> None:
    inst = example_g()
    w2 = inst.op_index["w2"]
    full, vf = build_model(inst, w2, formulation="full")
    agg, va = build_model(inst, w2, formulation="aggregated")
    names = {v.name for v in full.getVars()}
    assert {"r[w2,g21]_0", "r[w2,g22]_2", "y[w2,g21]", "y[w3,g31]", "y[w4,g41]"} <= names
    # full: 5 selectivity rows + budget + 2 successor rows (one variable input each)
    assert full.getNConss() == 8 and agg.getNConss() == 3
    assert agg.getNVars() == 4 and vf.budget == pytest.approx(va.budget) == pytest.approx(0.8)
    local, _ = build_model(inst, w2, objective="local", formulation="full")
    assert not any(v.name.startswith("y[w3") for v in local.getVars())


# --- independent HiGHS solve ------------------------------------------------------------------


def _highs_objective(inst: Instance, objective: str) -> float:
    """The paper's LP for a one-bottleneck ``random_instance`` written from scratch for HiGHS.

    Columns: r_{γ,T} for every input of every pattern at w0, then y_γ, then one y per join.
    """
    w0 = inst.operators[0]
    lam = w0.source_rates
    total = sum(lam.values())
    ps = inst.bound(0) / (1 + total * inst.bound(0))  # Eq. (2)
    n_r = sum(len(g.inputs) for g in w0.patterns)
    n_g = len(w0.patterns)
    joins = inst.operators[1:]
    n = n_r + n_g + (len(joins) if objective == "global" else 0)
    rows, rhs = [], []
    budget = np.zeros(n)
    col = 0
    for gi, g in enumerate(w0.patterns):
        for t, s, pt in zip(g.inputs, g.selectivity, g.ptime_s, strict=True):
            row = np.zeros(n)
            row[n_r + gi], row[col] = 1.0, -s * lam[t]  # y ≤ σ λ r
            rows.append(row)
            rhs.append(0.0)
            budget[col] = lam[t] * pt
            col += 1
    rows.append(budget)
    rhs.append(total * ps)
    bounds = [(0, 1)] * n_r + [(0, g.f / ps) for g in w0.patterns]
    c = np.zeros(n)
    if objective == "local":
        c[n_r:n_r + n_g] = -1.0
    else:
        weight = {s.operator: s.weight for s in inst.sinks}
        outputs = [g.output for g in w0.patterns]
        for j, op in enumerate(joins):
            h = op.patterns[0]  # AND(Q{q}, P{q}): Q{q} from w0, partner P{q} from a source
            gi = outputs.index(h.inputs[0])
            row = np.zeros(n)
            row[n_r + n_g + j], row[n_r + gi] = 1.0, -h.selectivity[0]
            rows.append(row)
            rhs.append(0.0)
            partner = h.selectivity[1] * op.source_rates[h.inputs[1]]
            bounds.append((0, min(partner, h.f / float(h.ptime_s[0]))))  # Eq. (14), μ = 1/ptime
            c[n_r + n_g + j] = -weight[op.name]
    res = linprog(c, A_ub=np.array(rows), b_ub=np.array(rhs), bounds=bounds, method="highs")
    assert res.status == 0, res.message
    return -res.fun


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("objective", ["global", "local"])
def test_lp_optimum_matches_highs(seed: int, objective: str) -> None:
    inst = random_instance(30, 6, share=0.4, rate_sigma=0.2, seed=seed)
    expected = _highs_objective(inst, objective)
    for form in FORMS:
        model, _ = build_model(inst, 0, objective=objective, formulation=form)
        res = solve(model)
        assert res.status == "optimal"
        assert res.objective == pytest.approx(expected, rel=1e-6)


# --- invariants and baselines --------------------------------------------------------------


@pytest.mark.parametrize("seed", range(3))
def test_global_beats_local_beats_none_under_the_bound(seed: int) -> None:
    inst = random_instance(40, 12, share=0.3, n_bottlenecks=2, n_operators=3, rate_sigma=0.2,
                           seed=seed)
    res = {m: plan(inst, m) for m in ("global", "local", "none")}
    out = {m: r.state.weighted_output(inst) for m, r in res.items()}
    for m in ("global", "local"):
        assert res[m].status == "optimal" and res[m].state.violations(inst) == []
        assert len(res[m].rounds) == 2  # both bottlenecks, in topological order (A9)
    assert res["none"].state.violations(inst) and res["none"].status == "degraded"
    # no shedding keeps no bound, so its output under the bound is nil
    assert out["global"] >= out["local"] * (1 - 1e-9) >= 0.0


@pytest.mark.parametrize("form", FORMS)
def test_plan_invariants(form: str) -> None:
    inst = random_instance(25, 8, share=0.5, rate_sigma=0.2, seed=5)
    res = plan(inst, "global", formulation=form)
    (rnd,) = res.rounds
    b = inst.op_index[rnd.bottleneck]
    for g, r in zip(inst.operators[b].patterns, res.keep[b], strict=True):
        assert r.shape == (len(g.inputs),) and np.all((r >= 0) & (r <= 1))
    lam = res.state.lam[b]
    assert processing_load(inst, b, lam, res.keep[b]) <= lam.sum() * rnd.p_star_s * (1 + 1e-9)
    assert res.state.sojourn[b] <= inst.bound(b) * (1 + 1e-9)
    # forward propagation of the published shares reproduces the solver's objective
    assert res.state.weighted_output(inst) == pytest.approx(rnd.result.objective, rel=1e-6)
    # local's shares are feasible for the global LP, so global ≥ local (invariant 4)
    local = plan(inst, "local", formulation=form)
    assert rnd.result.objective >= local.state.weighted_output(inst) * (1 - 1e-9)


def test_raising_the_bound_never_lowers_the_objective() -> None:
    base = random_instance(20, 6, share=0.5, rate_sigma=0.2, seed=2)
    values = []
    for factor in (1.0, 1.5, 3.0):
        ops = [Operator(o.name, o.patterns, o.source_rates,
                        None if o.latency_bound_s is None else o.latency_bound_s * factor)
               for o in base.operators]
        inst = Instance(ops, base.edges, base.sinks, base.latency_bound_s * factor)
        values.append(plan(inst, "global").state.weighted_output(inst))
    assert values == sorted(values)


def test_fill_budget_spends_leftover_on_cheapest_events() -> None:
    inst = Instance([_w2()], [], [Sink("a", "w2")], 0.004)
    lam = propagate(inst).lam[0]
    zero = [np.zeros(2), np.zeros(3)]
    keep = fill_budget(inst, 0, lam, zero, 0.5)
    # ptime 1 ms (γ21) first: 400·0.001 + 200·0.001 = 0.6 > 0.5, so γ21 gets 0.5 in order
    assert processing_load(inst, 0, lam, keep) == pytest.approx(0.5)
    assert np.all(keep[1] == 0) and keep[0].max() == 1.0
    over = fill_budget(inst, 0, lam, [np.ones(2), np.ones(3)], 0.9)
    assert processing_load(inst, 0, lam, over) == pytest.approx(0.9)


# --- queue simulation ----------------------------------------------------------------------


def test_lindley_matches_mm1_closed_form() -> None:
    rng = np.random.default_rng(3)
    lam, p = 500.0, 0.001  # ρ = 0.5, B = 2 ms
    arrivals = np.cumsum(rng.exponential(1 / lam, 300_000))
    soj = lindley_sojourn(arrivals, rng.exponential(p, 300_000))
    assert soj[30_000:].mean() == pytest.approx(sojourn(p, lam), rel=0.05)


def test_simulated_latency_meets_bound_within_tolerance() -> None:
    inst = example_g()
    w2 = inst.op_index["w2"]
    for mode in ("global", "local"):
        keep = plan(inst, mode).keep
        assert simulate_sojourn(inst, keep, w2, n_events=200_000) <= 1.1 * 0.004
    none = plan(inst, "none").keep
    assert simulate_sojourn(inst, none, w2, n_events=200_000) > 10 * 0.004


# --- workloads -----------------------------------------------------------------------------


def test_fig1_borg_mixes_make_global_strictly_better() -> None:
    mixes = segment_mixes(borg_trace("Borg-A/1"))
    other = segment_mixes(borg_trace("Borg-A/2"))
    assert mixes.shape[1] == 4 and np.allclose(mixes.sum(axis=1), 1.0)
    gains = []
    for m1, m2 in zip(mixes, other, strict=True):
        inst = fig1_instance(m1, m2)
        g, loc = (plan(inst, m).state.weighted_output(inst) for m in ("global", "local"))
        assert g >= loc * (1 - 1e-9)
        gains.append(g - loc)
    assert max(gains) > 0
    balanced = fig1_instance([1, 1, 1, 1], [1, 1, 1, 1])
    g, loc = (plan(balanced, m).state.weighted_output(balanced) for m in ("global", "local"))
    assert g == pytest.approx(loc, rel=1e-9)


# --- bad input -----------------------------------------------------------------------------


def _one(pattern: Pattern, rates: dict[str, float], bound: float = 0.01) -> Instance:
    return Instance([Operator("w", [pattern], rates)], [], [Sink("s", "w")], bound)


def test_bad_input_names_field_and_value() -> None:
    ok = Pattern.of("g", "Q", "and", {"A": 1.0, "B": 0.5}, 0.001)
    with pytest.raises(ValueError, match=r"source_rates\['A'\].*got -5"):
        _one(ok, {"A": -5.0, "B": 1.0})
    with pytest.raises(ValueError, match=r"selectivity\['B'\].*\[0\.0, 1\.0\], got 1\.5"):
        Pattern.of("g", "Q", "and", {"A": 1.0, "B": 1.5}, 0.001)
    with pytest.raises(ValueError, match=r"selectivity\['A'\].*got nan"):
        Pattern.of("g", "Q", "and", {"A": math.nan}, 0.001)
    with pytest.raises(ValueError, match=r"unknown event type 'B'"):
        _one(ok, {"A": 1.0})
    with pytest.raises(ValueError, match=r"event type 'C' is consumed by no pattern"):
        _one(ok, {"A": 1.0, "B": 1.0, "C": 2.0})
    with pytest.raises(ValueError, match=r"ptime_s\['A'\] must be finite"):  # zero capacity
        Pattern.of("g", "Q", "and", {"A": 1.0}, math.inf)
    with pytest.raises(ValueError, match=r"latency_bound_s must be finite.*got 0"):
        _one(ok, {"A": 1.0, "B": 1.0}, bound=0.0)
    two = Operator("w", [ok, Pattern.of("h", "R", "or", {"A": 1.0}, 0.001)], {"A": 1, "B": 1})
    with pytest.raises(ValueError, match=r"output type 'R' is consumed by no operator or sink"):
        Instance([two], [], [Sink("s", "w", types=("Q",))], 0.01)
    with pytest.raises(ValueError, match=r"sinks: at least one sink"):
        Instance([two], [], [], 0.01)
    with pytest.raises(ValueError, match=r"kind must be one of"):
        Pattern.of("g", "Q", "xor", {"A": 1.0}, 0.001)  # type: ignore[arg-type]


# --- adapter: fitted model + config -> Decision -------------------------------------------

_OPS = ["src1", "src2", "w1", "w2", "w3", "w4"]
_PATTERNS = {
    "w1": [{"name": "g11", "output": "Q11", "kind": "seq", "inputs": {"0": 2, "1": 1}},
           {"name": "g12", "output": "Q12", "kind": "and", "inputs": {"1": 1, "2": 1, "3": 1}}],
    "w2": [{"name": "g21", "output": "Q21", "kind": "seq", "inputs": {"0": 2, "1": 1}},
           {"name": "g22", "output": "Q22", "kind": "and", "inputs": {"1": 1, "2": 1, "3": 1},
            "relative_cost": 2}],
    "w3": [{"name": "g31", "output": "S1", "kind": "and", "inputs": {"Q11": 1, "Q21": 1}}],
    "w4": [{"name": "g41", "output": "S2", "kind": "and", "inputs": {"Q12": 1, "Q22": 1}}],
}


def _fig1_app(params: dict, w2_sel: dict[str, float] | None = None) -> tuple[AppConfig,
                                                                              FittedModel]:
    """Example G as an app: sources forward types 0–3, ω2 overloaded at μ = 1/1.8 ms."""
    place = {o: [["n2" if o == "w2" else "n1", 1]] for o in _OPS}
    cfg = AppConfig.model_validate({
        "app": "fig1",
        "operators": [{"name": o, "query": "s2" if o == "w4" else "s1"} for o in _OPS],
        "edges": [["src1", "w1"], ["src2", "w2"], ["w1", "w3"], ["w2", "w3"], ["w1", "w4"],
                  ["w2", "w4"]],
        "queries": [
            {"name": "s1", "sources": ["src1", "src2"], "sinks": ["w3"], "target_rt_ms": 4.0},
            {"name": "s2", "sources": ["src1", "src2"], "sinks": ["w4"], "target_rt_ms": 4.0},
        ],
        "node_types": [{"name": "small"}],
        "nodes": [{"name": "n1", "type": "small"}, {"name": "n2", "type": "small"}],
        "deployment": place,
        "method": {"name": "shedding", "params": params},
    })

    def om(name: str, rate: float, b: float, sel: dict[str, float]) -> dict:
        return {"operator": name, "query": "s2" if name == "w4" else "s1",
                "arrival_rate_mean": rate, "arrival_rate_p95": rate, "arrival_rate_max": rate,
                "service_mean_s": b, "service_m2_s2": 2 * b * b, "service_scv": 1.0,
                "selectivity": float(np.nansum(list(sel.values()))), "selectivity_by_type": sel,
                "utilisation": min(1.0, rate * b), "calibration": "busy_time", "samples": 30}

    mu2 = 1 / 0.0018  # ω2 processes only μ of its 1000 e/s
    fitted = FittedModel.model_validate({
        "model_id": "m1", "app": "fig1", "window_start": "2024-01-01T00:00:00Z",
        "window_end": "2024-01-01T01:00:00Z", "rate_statistic": "mean",
        "operators": {
            "src1": om("src1", 1000, 1e-6, {"0": .1, "1": .3, "2": .3, "3": .3}),
            "src2": om("src2", 1000, 1e-6, {"0": .4, "1": .2, "2": .2, "3": .2}),
            "w1": om("w1", 1000, 1e-6, {"Q11": .05, "Q12": .3}),
            "w2": om("w2", mu2, 0.0018, w2_sel or {"Q21": .2, "Q22": .2}),
            "w3": om("w3", 50 + .2 * mu2, 1e-6, {"S1": 50 / (50 + .2 * mu2)}),
            "w4": om("w4", 300 + .2 * mu2, 1e-6, {"S2": .2 * mu2 / (300 + .2 * mu2)}),
        },
        "queries": {},
        "deployment": {"placement": place,
                       "nodes": {"n1": {"type": "small"}, "n2": {"type": "small"}}},
    })
    return cfg, fitted


def test_adapter_reproduces_example_g_from_telemetry() -> None:
    outputs = {}
    for mode in ("global", "local", "none"):
        cfg, fitted = _fig1_app({"latency_bound_ms": 4.0, "patterns": _PATTERNS, "mode": mode})
        d = plan_shedding(fitted, cfg)
        Decision.model_validate(d.model_dump())
        assert d.placement["w2"][0].node == "n2" and set(d.nodes.values()) == {"keep"}
        outputs[mode] = d.predicted.extra["weighted_output"]
        if mode == "global":
            assert d.shedding["w2"]["g21:0"] == pytest.approx(0.75)
            assert d.shedding["w2"]["g22:3"] == pytest.approx(0.4583333333)
            assert d.solver.status == "optimal" and d.feasible and not d.violations
            assert d.predicted.response_time_ms["s1"] == pytest.approx(4.0, rel=1e-2)
        if mode == "none":
            assert d.shedding == {} and d.solver.status == "degraded" and d.violations
            assert "s1" not in d.predicted.response_time_ms
    assert outputs["global"] == pytest.approx(158.3333333, rel=1e-6)
    assert outputs["local"] == pytest.approx(83.3333333, rel=1e-6)


def test_adapter_fits_match_factor_and_ptime() -> None:
    cfg, fitted = _fig1_app({"latency_bound_ms": 4.0, "patterns": _PATTERNS},
                            w2_sel={"Q21": .1, "Q22": .2})
    inst = instance_from_model(fitted, cfg, SheddingParams.from_config(cfg))
    g21, g22 = inst.operators[inst.op_index["w2"]].patterns
    assert g21.selectivity == pytest.approx([0.25, 0.5])  # s = 0.1 / min(0.4/2, 0.2) = 0.5
    assert g21.ptime_s == pytest.approx([0.001, 0.001]) and g22.ptime_s[0] == pytest.approx(0.002)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"mode": "greedy"}, r"method\.params\.mode"),
        ({"latency_bound_ms": 0}, r"method\.params\.latency_bound_ms"),
        ({"weights": {"nope": 1.0}}, r"weights: unknown query 'nope'"),
        ({"patterns": {"w9": []}}, r"patterns: unknown operator 'w9'"),
        ({"patterns": {"w2": [{"name": "g", "output": "Q", "kind": "and",
                               "inputs": {"0": 0}}]}}, r"method\.params\.patterns\.w2\.0"),
    ],
)
def test_bad_params_name_the_field(params: dict, match: str) -> None:
    cfg, fitted = _fig1_app(params)
    with pytest.raises(ValueError, match=match):
        plan_shedding(fitted, cfg)


def test_adapter_rejects_bad_telemetry() -> None:
    cfg, fitted = _fig1_app({"patterns": _PATTERNS}, w2_sel={"Q21": math.nan, "Q22": .2})
    with pytest.raises(ValueError, match=r"selectivity_by_type\['Q21'\].*got nan"):
        plan_shedding(fitted, cfg)
    bad = {**_PATTERNS, "w2": [{"name": "g", "output": "Q21", "kind": "and",
                                "inputs": {"7": 1}}]}
    cfg, fitted = _fig1_app({"patterns": bad})
    with pytest.raises(ValueError, match=r"unknown event type '7'"):
        plan_shedding(fitted, cfg)


def test_p_star_inverts_the_sojourn() -> None:
    assert sojourn(p_star(0.004, 1000.0), 1000.0) == pytest.approx(0.004)
