"""The exact SCIP MILP of seed 000's placement (digest §9) and invariant 7."""

from __future__ import annotations

import math
import random

import pyscipopt
import pytest

from optimizers.binpack import BinpackParams, binpack
from optimizers.binpack_milp import (
    BinpackMilpParams,
    Candidate,
    build_model,
    milp_binpack,
    plan_binpack_milp,
)
from optimizers.instances import c5_hours, random_instance
from optimizers.queueing import (
    EpnLoad,
    node_load,
    relative_deviation,
    response_times,
    second_moment,
)
from streamplan.config import AppConfig, MethodSpec
from streamplan.fitted import Deployment, FittedModel, NodeState, QueryModel


def exp_load(name: str, rate: float, b: float, target: float) -> EpnLoad:
    return EpnLoad(name, rate, b, second_moment(b), target)


E1 = exp_load("EPN1", 200, 0.002, 0.008)
E2 = exp_load("EPN2", 100, 0.003, 0.0065)
E3 = exp_load("EPN3", 100, 0.002, 0.004)
C2_START = {"EPN1": "N1", "EPN2": "N1", "EPN3": "N2"}


def fitted(config: AppConfig, rates: dict[str, float], b_s: float = 0.001) -> FittedModel:
    """A hand-built fitted model on the config's initial deployment (exponential EPNs)."""
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
    return FittedModel(
        model_id="test-model",
        app=config.app,
        window_start="2026-01-01T00:00:00Z",
        window_end="2026-01-01T01:00:00Z",
        operators={},
        queries=queries,
        deployment=Deployment(
            placement={op: list(e) for op, e in config.deployment.items()},
            nodes={n.name: NodeState(type=n.type) for n in config.nodes},
        ),
    )


def assert_viable(loads: list[EpnLoad], assignment: dict[str, str], p: BinpackParams) -> None:
    """Invariant 2 within SCIP's feasibility tolerance."""
    for node in set(assignment.values()):
        classes = [e for e in loads if assignment[e.name] == node]
        assert node_load(classes) <= p.rho_th + 1e-6
        w = response_times(classes)
        for e in classes:
            assert relative_deviation(w[e.name], e.target_s) <= p.hw + 1e-5


# --- builder (no solve) ---------------------------------------------------------------------------
def test_build_model_names_and_symmetry() -> None:
    cands = [Candidate("N1"), Candidate("N2")] + [Candidate(f"h{s}", slot=s) for s in range(3)]
    model, v = build_model([E1, E2, E3], cands, C2_START, BinpackMilpParams())
    assert model.getStatus() == "unknown"
    assert model.getNVars() == 5 + 3 * 5
    assert v.y["N1"].name == "y(N1)" and v.x["EPN2", "h1"].name == "x(EPN2,h1)"
    # slot h may only host EPN i >= h (0-based, by name)
    assert v.x["EPN1", "h1"].getUbOriginal() == 0
    assert v.x["EPN2", "h1"].getUbOriginal() == 1
    assert v.x["EPN2", "h2"].getUbOriginal() == 0
    names = {c.name for c in model.getConss()}
    expected = {"assign(EPN1)", "capacity(N1)", "link(EPN2,N2)", "hw(EPN2,N2)", "hire_order(1)"}
    assert expected | {"lower_bound"} <= names
    assert not any(n.startswith("lw(") for n in names)


def test_build_model_fixes_impossible_pairs() -> None:
    heavy = exp_load("h", 450, 0.002, 0.004)  # ρ 0.9 on speed 1, 0.45 on speed 2
    cands = [Candidate("slow", speed=1.0), Candidate("fast", speed=2.0)]
    _, v = build_model([heavy], cands, {"h": "slow"}, BinpackMilpParams())
    assert v.x["h", "slow"].getUbOriginal() == 0
    assert v.x["h", "fast"].getUbOriginal() == 1


# --- digest checks ------------------------------------------------------------------------------
def test_c2_optimum() -> None:
    r = milp_binpack([E1, E2, E3], C2_START)
    assert r.stats.status == "optimal"
    assert r.nodes == ["N1", "N2"] and r.migrations == 1
    assert r.stats.objective == pytest.approx(2 + 1 / 4)  # nodes + ε·migrations, ε = 1/(q+1)
    assert r.stats.gap == pytest.approx(0.0)
    assert r.lower_bound == 2  # ⌈1.0 / 0.8⌉
    assert_viable([E1, E2, E3], r.assignment, BinpackParams())


def test_c5_milp_matches_pattern() -> None:
    assignment = {f"EPN{i}": "n1" for i in range(1, 6)}
    counts = []
    for loads in c5_hours():
        r = milp_binpack(loads, assignment, hire_name=lambda k: f"n{k + 1}")
        assert r.stats.status == "optimal"
        counts.append(len(r.nodes))
        assignment = binpack(loads, assignment, hire_name=lambda k: f"n{k + 1}").assignment
    assert counts == [1, 2, 3, 4, 5, 4, 4, 1, 1]


# --- invariant 7 ----------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(12))
def test_milp_never_worse_than_heuristic(seed: int) -> None:
    rng = random.Random(1000 + seed)
    loads, assignment = random_instance(rng, rng.randint(3, 8))
    heur = binpack(loads, assignment)
    r = milp_binpack(loads, assignment, BinpackMilpParams(time_limit_s=30))
    assert r.stats.status == "optimal"
    assert r.lower_bound <= len(r.nodes) <= len(heur.nodes)
    total = sum(e.rho for e in loads)
    assert len(r.nodes) >= max(1, math.ceil(total / 0.8 - 1e-9))
    assert_viable(loads, r.assignment, BinpackParams())


def test_warm_start_gives_an_incumbent() -> None:
    rng = random.Random(7)
    loads, assignment = random_instance(rng, 14)
    heur = binpack(loads, assignment)
    r = milp_binpack(loads, assignment, BinpackMilpParams(time_limit_s=0.05), start=heur.assignment)
    assert r.stats.status in ("optimal", "feasible")
    assert len(r.nodes) <= len(heur.nodes)


# --- variants and infeasibility -----------------------------------------------------------------
def test_price_objective_prefers_cheap_hire() -> None:
    e = exp_load("e", 100, 0.002, 0.004)
    args = ([e], {"e": "N1"})
    kw = {"prices": {"N1": 10.0}, "hire_price": 1.0}
    assert milp_binpack(*args, **kw).assignment == {"e": "N1"}  # nodes: stay, no migration
    priced = milp_binpack(*args, BinpackMilpParams(objective="price"), **kw)
    assert priced.assignment == {"e": "hire-1"}


def test_hard_lw_forbids_lonely_epns() -> None:
    # Alone δ = −0.40 < LW; a pair gives δ = +0.04; three exceed ρ_th.
    trio = [exp_load(f"e{i}", 300, 0.001, 0.0024) for i in range(3)]
    start = {e.name: "N1" for e in trio}
    soft = milp_binpack(trio, start)
    assert soft.stats.status == "optimal" and len(soft.nodes) == 2
    hard = milp_binpack(trio, start, BinpackMilpParams(enforce_lw=True))
    assert hard.stats.status == "infeasible" and hard.assignment is None
    pair = milp_binpack(trio[:2], {"e0": "N1", "e1": "N2"}, BinpackMilpParams(enforce_lw=True))
    assert pair.stats.status == "optimal" and len(pair.nodes) == 1


def test_unplaceable_epn_is_reported_before_solving() -> None:
    bad = exp_load("bad", 450, 0.002, 0.004)
    r = milp_binpack([bad, E1], {"bad": "N1", "EPN1": "N1"})
    assert r.stats.status == "infeasible" and r.stats.n_vars == 0
    assert "bad" in r.stats.message


def test_scip_proves_infeasibility() -> None:
    # Each fits alone only on the fast node, and not both together.
    hs = [exp_load(f"h{i}", 450, 0.002, 0.004) for i in range(2)]
    r = milp_binpack(hs, {"h0": "fast", "h1": "fast"}, speeds={"fast": 2.0})
    assert r.stats.status == "infeasible" and r.stats.n_vars > 0
    assert "infeasible" in r.stats.message


def test_milp_validates_the_instance() -> None:
    with pytest.raises(ValueError, match="EPN 'EPN2' has no node"):
        milp_binpack([E1, E2], {"EPN1": "N1"})


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"delta_source": "measured"}, "delta_source must be 'estimated'"),
        ({"objective": "energy"}, r"method\.params\.objective"),
        ({"time_limit_s": 0}, r"method\.params\.time_limit_s"),
    ],
)
def test_milp_params_errors(params: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        BinpackMilpParams.from_method_params(params)


# --- adapter --------------------------------------------------------------------------------------
def milp_config(config: AppConfig) -> AppConfig:
    params = {"hw": 0.2, "lw": -0.2, "rho_th": 0.8, "time_limit_s": 30}
    return config.model_copy(update={"method": MethodSpec(name="binpack-milp", params=params)})


def test_plan_binpack_milp_on_demo(demo_config: AppConfig) -> None:
    config = milp_config(demo_config)
    d = plan_binpack_milp(fitted(config, {"spoon": 300, "knife": 250, "fork": 200}), config)
    s = d.solver
    assert (s.name, s.status) == ("scip", "optimal")
    assert pyscipopt.__version__ in s.version
    assert s.extra["nodes"] == s.extra["heuristic_nodes"] == 2
    assert s.extra["lower_bound"] == 1 and s.extra["migrations"] == 1
    assert s.n_vars and s.n_conss and s.gap == pytest.approx(0.0)
    assert d.nodes["vm-1"] == "keep" and list(d.nodes.values()).count("hire") == 1
    assert d.predicted.cost_per_hour == pytest.approx(0.088)
    assert max(d.predicted.node_utilisation.values()) <= 0.8 + 1e-6
    assert all(w <= 2.0 * 1.2 + 1e-6 for w in d.predicted.response_time_ms.values())
    for q in config.queries:
        assert len({d.placement[op][0].node for op in config.query_operators(q.name)}) == 1


def test_plan_binpack_milp_infeasible_never_raises(demo_config: AppConfig) -> None:
    config = milp_config(demo_config)
    d = plan_binpack_milp(fitted(config, {"spoon": 300, "knife": 900, "fork": 200}), config)
    assert d.solver.status == "infeasible" and not d.feasible
    assert "knife" in d.solver.message
    assert d.placement == {} and d.nodes == {}
