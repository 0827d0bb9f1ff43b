"""Seed 002 (BTU-aware provisioning): policy rules on tiny cases, release only near the BTU
end, the step MILP against brute force, heuristic ≥ optimum, cost accounting, a short
replay, the registry adapter and bad input."""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest

from optimizers.btu import (
    BtuInputError,
    BtuParams,
    Cluster,
    Host,
    Observation,
    OperatorType,
    StepHost,
    StepInstance,
    VmType,
    brute_force,
    btu_step,
    build_model,
    leasing,
    paid_btus,
    plan_btu,
    plan_btu_threshold,
    replay,
    solve_step,
    step_cost,
    threshold_step,
    uptrigger,
)
from optimizers.btu.milp import instance_from_cluster, solution_from_cluster
from optimizers.btu.mmc import mean_wait
from optimizers.btu.policy import best_host, down_utilities, release_step, upscale, utility
from optimizers.btu.replay import ExactSettings
from optimizers.btu.sim import SimOperator, SimSource, StreamSim
from optimizers.btu.workload import (
    PATTERNS,
    Pattern,
    manufacturing_sim,
    manufacturing_types,
    paper_vm,
    per_machine_rates,
)
from optimizers.registry import run_method
from streamplan.config import AppConfig, ConfigError, load_config
from streamplan.fitted import Deployment, FittedModel, NodeState, OperatorModel, QueryModel
from streamplan.plan import Plan, PlanInputs
from streamplan.publish import current_plan, publish
from streamplan.settings import REPO_ROOT

CONFIG = REPO_ROOT / "configs" / "manufacturing_btu.yaml"
VM = VmType("m", cpu=4096, mem=7168, price=1.0, btu_s=600)
P = BtuParams()


def small_types() -> dict[str, OperatorType]:
    """Two operator types; five of either fill a VM's memory (1400 MB each)."""
    return {
        "a": OperatorType("a", slo_ms=100, cpu=500, mem=1400, hop_ms=80),
        "b": OperatorType("b", slo_ms=200, cpu=300, mem=1400, hop_ms=160),
    }


def idle(types, queue: float = 0.0, d: float = 50.0) -> dict[str, Observation]:
    return {o: Observation(d, queue, (d,)) for o in types}


# --- Alg. 1–3 on the digest's numbers (§10) ------------------------------------------------
def test_alg1_regression_order_is_pinned_oldest_first() -> None:
    hist = (600.0, 650.0, 700.0, 740.0)
    assert uptrigger(Observation(740, 80, hist), 750, P)  # pred 790 > 750 and queue > 50
    assert not uptrigger(Observation(740, 30, hist), 750, P)  # no backlog: transient
    # the paper's literal newest-first order would predict 555 and not trigger
    assert not uptrigger(Observation(740, 80, tuple(reversed(hist))), 750, P)
    assert uptrigger(Observation(800, 80, ()), 750, P)  # late now, no history needed


def test_alg2_cached_host_wins_and_misfit_is_excluded() -> None:
    types = {"O1": OperatorType("O1", 1500, cpu=660, mem=452)}
    vm = VmType("m", 4096, 7168, 1.0, 600)
    cluster = Cluster(types, vm)
    # hosts A (free 2000/3000, uncached), B (free 3000/1500, cached), C (free 500/6000)
    filler = {"A": (2096, 4168), "B": (1096, 5668), "C": (3596, 1168)}
    for name, (cpu, mem) in filler.items():
        t = OperatorType(f"x{name}", 100, cpu=cpu, mem=mem)
        types[t.name] = t
        host = Host(name, vm, 0.0, 0.0)
        host.add(t.name)
        cluster.hosts[name] = host
    cluster.hosts["B"].images.add("O1")
    assert best_host(cluster, "O1", P).name == "B"
    cluster.hosts["B"].images.discard("O1")
    assert best_host(cluster, "O1", P).name == "A"
    assert best_host(cluster, "O1", P, exclude=["A", "B"]) is None  # C: 500/660 < 1


def test_alg3_values() -> None:
    u = utility(6, 1, 6, d_ms=540, slo_ms=600, s_o=3, s_total=12, queue=0, params=P)
    assert u == pytest.approx(100.84991)
    u = utility(6, 1, 6, d_ms=540, slo_ms=600, s_o=3, s_total=12, queue=20, params=P)
    assert u == pytest.approx(0.84991)
    u = utility(3, 1, 6, d_ms=1200, slo_ms=600, s_o=6, s_total=12, queue=300, params=P)
    assert u == pytest.approx(-1.1002)
    assert utility(1, 1, 6, d_ms=0, slo_ms=600, s_o=0, s_total=0, queue=0, params=P) == -1.0


# --- upscaling procedure (Fig. 4) ------------------------------------------------------------
def full_cluster() -> Cluster:
    """One VM holding 2 a + 3 b: memory full (5 × 1400 = 7000 of 7168)."""
    types = small_types()
    cluster = Cluster(types, VM)
    h = Host("vm-1", VM, 0.0, 0.0)
    h.add("a", 2)
    h.add("b", 3)
    cluster.hosts["vm-1"] = h
    return cluster


def test_upscale_places_on_a_free_host_with_start_latency() -> None:
    cluster = full_cluster()
    cluster.hosts["vm-1"].remove("b")
    acts = upscale(cluster, "a", 60.0, idle(cluster.types), P)
    assert [a.kind for a in acts] == ["up"]
    assert acts[0].ready_at == 60.0 + P.instance_start_cached_s  # image a is cached
    assert cluster.count("a") == 3


def test_upscale_frees_room_from_a_type_with_positive_utility() -> None:
    cluster = full_cluster()
    obs = {"a": Observation(300, 400, (300,)), "b": Observation(150, 0, (150,))}
    acts = upscale(cluster, "a", 60.0, obs, P)
    assert [a.kind for a in acts] == ["down", "up"]
    assert acts[0].op == "b" and cluster.counts() == {"a": 3, "b": 2}
    assert not cluster.released and len(cluster.hosts) == 1


def test_upscale_leases_when_no_type_can_give_way() -> None:
    cluster = full_cluster()
    obs = {"a": Observation(300, 400, (300,)), "b": Observation(600, 400, (600,))}
    acts = upscale(cluster, "a", 60.0, obs, P)
    assert [a.kind for a in acts] == ["lease", "up"]
    new = acts[0].host
    assert acts[1].ready_at == 60.0 + P.vm_start_s + P.instance_start_uncached_s
    assert cluster.hosts[new].leased_at == 60.0
    no_room = BtuParams(free_room=False)
    cluster = full_cluster()
    obs["b"] = Observation(150, 0, (150,))
    assert [a.kind for a in upscale(cluster, "a", 60.0, obs, no_room)] == ["lease", "up"]


# --- host release (Fig. 5): only near the BTU end --------------------------------------------
def two_host_cluster(leased_second: float) -> Cluster:
    types = small_types()
    cluster = Cluster(types, VM)
    h1 = Host("vm-1", VM, 0.0, 0.0)
    h1.add("a", 1)
    h1.add("b", 1)
    h2 = Host("vm-2", VM, leased_second, leased_second)
    h2.add("a", 1)
    h2.add("b", 1)
    cluster.hosts.update({"vm-1": h1, "vm-2": h2})
    return cluster


@pytest.mark.parametrize(
    ("now", "released"),
    [(300.0, False), (480.0, False), (540.0, False), (560.0, True), (600.0, True), (660.0, False)],
)
def test_release_only_inside_the_window_before_the_btu_end(now: float, released: bool) -> None:
    # vm-2 leased at 0 with BTU 600 s: window = max(5 %·600, 60) = 60 s, i.e. [540, 600]
    # exclusive of 540 (time left 60 is not < 60); at 660 the next BTU (ends 1200) is paid
    cluster = two_host_cluster(0.0)
    cluster.hosts["vm-1"].leased_at = 100.0  # keep vm-1 out of its window
    acts = btu_step(cluster, now, idle(cluster.types), P)
    assert ("vm-2" in cluster.released) is released
    if released:
        # idle types with 2 instances have U > 0: one of each removed (cap max(1, 0.2·2)),
        # never the last, so vm-1 keeps one a and one b and nothing had to move
        assert cluster.counts() == {"a": 1, "b": 1}
        assert [a.kind for a in acts].count("release") == 1


def test_release_migrates_or_renews() -> None:
    cluster = two_host_cluster(0.0)
    cluster.hosts["vm-1"].leased_at = 100.0
    busy = {"a": Observation(500, 100, (500,)), "b": Observation(500, 100, (500,))}
    acts = release_step(cluster, 590.0, busy, P)  # U < 0: nothing marked, both must move
    assert [a.kind for a in acts].count("migrate") == 2 and "vm-2" in cluster.released
    assert cluster.hosts["vm-1"].instances == {"a": 2, "b": 2}
    # now fill vm-1 so a migration cannot fit: the VM is kept for another BTU
    cluster = two_host_cluster(0.0)
    cluster.hosts["vm-1"].leased_at = 100.0
    cluster.hosts["vm-1"].add("a", 3)
    acts = release_step(cluster, 590.0, busy, P)
    assert [a.kind for a in acts] == ["renew"] and "vm-2" in cluster.hosts


def test_release_cap_is_twenty_percent_per_type() -> None:
    types = {"a": OperatorType("a", 100, cpu=10, mem=100, hop_ms=50)}
    vm = VmType("m", 4096, 7168, 1.0, 600)
    cluster = Cluster(types, vm)
    for k, n in ((1, 10), (2, 5)):
        h = Host(f"vm-{k}", vm, 100.0 * (k == 1), 0.0)
        h.add("a", n)
        cluster.hosts[h.name] = h
    acts = release_step(cluster, 590.0, idle(types), P)  # o_# = 15: cap floor(3) = 3
    assert [a.kind for a in acts].count("down") == 3
    assert [a.kind for a in acts].count("migrate") == 2
    assert cluster.count("a") == 12 and "vm-2" in cluster.released


# --- threshold baseline ------------------------------------------------------------------------
def test_threshold_rules() -> None:
    types = small_types()
    cluster = Cluster(types, VM)
    h = Host("vm-1", VM, 0.0, 0.0)
    h.add("a", 1)
    h.add("b", 2)
    cluster.hosts["vm-1"] = h
    obs = {"a": Observation(500, 300, ()), "b": Observation(100, 0, ())}
    acts = threshold_step(cluster, 60.0, obs, P)
    assert cluster.counts() == {"a": 3, "b": 1}  # > 250: +2; < 1: −1
    obs = {"a": Observation(500, 60, ()), "b": Observation(100, 0, ())}
    threshold_step(cluster, 120.0, obs, P)
    assert cluster.counts() == {"a": 4, "b": 1}  # > 50: +1; b never below 1
    assert [a.kind for a in acts].count("up") == 2


def test_threshold_releases_an_empty_vm_at_once() -> None:
    cluster = two_host_cluster(0.0)
    # b is idle on both hosts; the b instance removed is the one on the host with most free
    # memory; a's queue empties too, so vm-2 empties and is released at t = 120 (not at 600)
    cluster.hosts["vm-2"].remove("a")
    cluster.hosts["vm-1"].add("a")
    acts = threshold_step(cluster, 120.0, idle(cluster.types), P)
    assert "vm-2" in cluster.released and cluster.released["vm-2"][1] == 120.0
    assert [a.kind for a in acts][-1] == "release"


# --- cost accounting --------------------------------------------------------------------------
def test_paid_btus_and_digest_short_scenario() -> None:
    assert paid_btus(0, 1800, 600) == 3 and paid_btus(120, 300, 600) == 1
    thr = leasing([(0, 1800), (120, 300), (420, 540)], 600, 1.0)
    btu = leasing([(0, 1800), (120, 720)], 600, 1.0)
    assert thr.cost + 1.0 == 6.0 and btu.cost + 0.5 == 4.5
    assert thr.early_releases == 2 and btu.early_releases == 0
    assert thr.prolongations == 2 and btu.prolongations == 2
    assert leasing([(0, 1800), (120, 720)], 3600, 6.0).cost + 0.5 == 12.5


# --- step MILP ------------------------------------------------------------------------------
def random_step(seed: int) -> StepInstance:
    rng = random.Random(seed)
    types = {
        "a": OperatorType("a", 100, cpu=rng.choice([300, 500, 900]), mem=rng.choice([1, 2, 3])),
        "b": OperatorType("b", 100, cpu=rng.choice([300, 600]), mem=rng.choice([1, 2])),
    }
    vm = VmType("m", cpu=1200, mem=4, price=1.0, btu_s=600)
    hosts = []
    for k in range(rng.choice([1, 2])):
        x0 = {"a": rng.randint(0, 1), "b": rng.randint(0, 1)}
        hosts.append(StepHost(f"h{k}", 1200, 4, 1.0, 600, rng.choice([10.0, 30.0, 300.0]),
                              x0, frozenset(o for o, n in x0.items() if n)))
    return StepInstance(
        types=types,
        hosts=tuple(hosts),
        vm=vm,
        n_candidates=rng.choice([1, 2]),
        demand={"a": rng.randint(1, 4), "b": rng.randint(1, 3)},
        delay_per_missing={"a": rng.choice([500.0, 5000.0, 20000.0]), "b": 3000.0},
        penalty=0.0001,
        horizon_s=60.0,
        removal_cap_share=rng.choice([None, 0.2]),
    )


@pytest.mark.parametrize("seed", range(12))
def test_step_milp_matches_brute_force(seed: int) -> None:
    inst = random_step(seed)
    try:
        best, _ = brute_force(inst)
    except BtuInputError:
        assert solve_step(inst).status == "infeasible"
        return
    res = solve_step(inst)
    assert res.status == "optimal"
    assert res.objective == pytest.approx(best, abs=1e-6)
    assert step_cost(inst, res.solution)["total"] == pytest.approx(res.objective, abs=1e-6)


def test_step_milp_prefers_paid_time_over_new_leases() -> None:
    types = {"a": OperatorType("a", 100, cpu=100, mem=1)}
    vm = VmType("m", cpu=1000, mem=2, price=5.0, btu_s=600)
    paid = StepHost("paid", 1000, 2, 5.0, 600, paid_left_s=300.0, x0={"a": 1})
    ending = StepHost("ending", 1000, 2, 5.0, 600, paid_left_s=20.0, x0={"a": 1})
    inst = StepInstance(types, (paid, ending), vm, 1, {"a": 2}, {"a": 10.0}, 0.0001, 60.0)
    res = solve_step(inst)
    # two instances fit on the paid VM: keep it (free), do not renew "ending", lease nothing
    assert res.solution.x == {("a", "paid"): 2}
    assert res.solution.renew == frozenset() and res.solution.leased == 0
    assert res.objective < 0.01


def test_builder_names_without_solving() -> None:
    m, v = build_model(random_step(3))
    names = {var.name for var in m.getVars()}
    assert {"x[a,h0]", "x[b,new-1]", "s[a]", "z[new-1]"} <= names
    assert set(v.shortfall) == {"a", "b"}


def test_heuristic_cost_is_at_least_the_optimum_on_tiny_cases() -> None:
    for seed in range(6):
        rng = random.Random(seed)
        for step in (btu_step, threshold_step):
            cluster = full_cluster()
            cluster.hosts["vm-1"].leased_at = rng.choice([0.0, -540.0, -590.0])
            obs = {"a": Observation(rng.choice([50, 300]), rng.choice([0, 60, 300]), ()),
                   "b": Observation(rng.choice([50, 300]), rng.choice([0, 60, 300]), ())}
            need = {"a": rng.randint(1, 6), "b": rng.randint(1, 6)}
            inst = instance_from_cluster(cluster, 0.0, demand_by_op=need,
                                         delay_per_missing={"a": 2000.0, "b": 2000.0},
                                         penalty=0.0001, horizon_s=60.0, n_candidates=3)
            step(cluster, 0.0, obs, P)
            heur = step_cost(inst, solution_from_cluster(inst, cluster))["total"]
            assert heur >= solve_step(inst).objective - 1e-9


# --- simulator ---------------------------------------------------------------------------------
def test_simulator_matches_mmc_waiting_time() -> None:
    lam, b, c = 25.0, 0.1, 3  # ρ = 0.833
    ops = [SimOperator("x", b, hop_s=0.0, slo_s=10.0)]
    sim = StreamSim(ops, [SimSource("s", "x", lam)], seed=3)
    for _ in range(c):
        sim.add_server("x", 0.0)
    total_sojourn = started = 0.0
    for k in range(1, 1201):
        st = sim.run(15.0 * k, 1.0)["x"]
        if k > 40:
            total_sojourn += st.sojourn_ms_sum / 1000.0
            started += st.started
    wait = total_sojourn / started - b
    assert wait == pytest.approx(mean_wait(c, lam, 1 / b), rel=0.1)


def test_simulator_routes_by_table2_ratios() -> None:
    ops, sources = manufacturing_sim()
    sim = StreamSim(ops, sources, seed=1)
    for o in ops:
        for _ in range(40):
            sim.add_server(o.name, 0.0)
    arrivals = dict.fromkeys(per_machine_rates(), 0)
    for k in range(1, 41):
        for o, st in sim.run(15.0 * k, 4.0).items():
            arrivals[o] += st.arrivals
    rates = per_machine_rates()
    for o in ("O1", "O2", "O6", "O7"):
        assert arrivals[o] / 600.0 == pytest.approx(4 * rates[o], rel=0.05)


# --- a short replay (the full-day runs are in benchmarks/test_seed002.py) -----------------------
@pytest.fixture(scope="module")
def short_runs():
    types, spec = manufacturing_types(), manufacturing_sim()
    pattern = Pattern("short", (2, 5, 5, 2), 300.0)
    out = {}
    for policy in ("btu", "threshold"):
        out[policy] = replay(policy, pattern, types, paper_vm(600), spec, seed=2,
                             exact=ExactSettings(every=5, time_limit_s=5.0))
    return out


def test_short_replay_invariants(short_runs) -> None:
    for policy, run in short_runs.items():
        s = run.summary(600, 1.0, 0.0001)
        t = s["total_cost"]
        assert t["rt"] >= t["nrt"] >= t["relaxed"] >= s["resource_cost"] > 0
        for lv in ("rt", "nrt", "relaxed"):
            assert (t[lv] - s["resource_cost"]) / 0.0001 == pytest.approx(s["delayed"][lv])
        assert s["resource_cost"] >= 0.1 * s["leasing"]["vm_minutes"] - 1e-9
        assert s["items"] > 100_000
        assert run.timeline and all(row["instances"] >= 9 for row in run.timeline)
        for gap in run.step_gaps:
            assert gap["gap_abs"] >= -1e-6 or not gap["optimal"], (policy, gap)


def test_short_replay_btu_releases_only_near_btu_ends(short_runs) -> None:
    run = short_runs["btu"]
    window = P.release_window_s(600)
    for (start, end), alive in zip(run.lifetimes, run.still_running, strict=True):
        if not alive:
            left = start + paid_btus(start, end, 600) * 600 - end
            assert 0 <= left < window
    thr = short_runs["threshold"]
    assert len(thr.lifetimes) >= len(run.lifetimes)


def test_threshold_is_priced_three_ways_from_one_run(short_runs) -> None:
    thr = short_runs["threshold"]
    penalties = {b: thr.summary(b, p, 0.0001)["penalty"]["nrt"]
                 for b, p in ((600, 1.0), (1800, 3.0), (3600, 6.0))}
    assert len({round(v, 9) for v in penalties.values()}) == 1


# --- the registry adapter ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def manufacturing() -> AppConfig:
    return load_config(CONFIG)


def fitted_for(config: AppConfig, machines: float, *, leased_at: str = "2026-01-01T00:00:00Z",
               extra_ops: tuple[str, ...] = ()) -> FittedModel:
    """A fitted model of the manufacturing app at ``machines`` machines (b = o_slo/κ)."""
    rates = per_machine_rates()
    ops = {}
    for name in [*(o.name for o in config.operators), *extra_ops]:
        slo = config.method.params["operators"].get(name, {"slo_ms": 500})["slo_ms"]
        lam, b = rates.get(name, 1.0) * machines, slo / 5 / 1000
        ops[name] = OperatorModel(
            operator=name, query="manufacturing", arrival_rate_mean=lam, arrival_rate_p95=lam,
            arrival_rate_max=lam, service_mean_s=b, service_m2_s2=2 * b * b, service_scv=1.0,
            selectivity=1.0, utilisation=0.5, calibration="direct", samples=10,
        )
    query = QueryModel(query="manufacturing", arrival_rate_mean=1.0, arrival_rate_p95=1.0,
                       arrival_rate_max=1.0, service_mean_s=0.1, service_m2_s2=0.02, events=10)
    return FittedModel(
        model_id="m-btu",
        app=config.app,
        window_start="2026-01-01T00:00:00Z",
        window_end="2026-01-01T00:09:30Z",
        operators=ops,
        queries={"manufacturing": query},
        deployment=Deployment(
            placement=config.deployment,
            nodes={"vm-1": NodeState(type="vm-4c-7g", leased_at=leased_at, billing_unit_s=600)},
        ),
    )


def with_method(config: AppConfig, name: str | None = None, **params) -> AppConfig:
    method = config.method.model_copy(update={
        "name": name or config.method.name,
        "params": {**config.method.params, **params},
    })
    return config.model_copy(update={"method": method})


@pytest.mark.parametrize("method", ["btu", "btu-threshold"])
def test_registry_plans_the_manufacturing_app(manufacturing: AppConfig, method: str) -> None:
    config = with_method(manufacturing, method)
    decision = run_method(fitted_for(config, 4.0), config)
    assert decision.feasible and decision.solver.status == "heuristic"
    nodes = set(decision.nodes)
    for node in nodes:
        for key in ("btu.leased_at_s", "btu.start_s", "btu.end_s", "btu.paid_left_s"):
            assert f"{key}[{node}]" in decision.predicted.extra
    extra = decision.predicted.extra
    assert extra["btu.end_s[vm-1]"] - extra["btu.start_s[vm-1]"] == 600
    assert extra["btu.paid_left_s[vm-1]"] == 30.0  # leased 00:00, now 00:09:30
    assert decision.solver.extra["cost.leasing_per_hour"] >= 6.0
    assert decision.solver.extra["step.gap_abs"] >= -1e-6
    assert set(decision.placement) == {o.name for o in config.operators}
    plan = Plan.from_decision(
        decision, app=config.app, method=method,
        inputs=PlanInputs(fitted_model_id="m-btu", config_hash=config.config_hash(),
                          interval_start="2026-01-01T00:00:00Z",
                          interval_end="2026-01-01T00:09:30Z"),
    )
    assert Plan.model_validate_json(plan.to_json()).predicted.extra == extra


def test_btu_keeps_an_empty_paid_vm_until_its_window(manufacturing: AppConfig) -> None:
    config = with_method(manufacturing, "btu")
    model = fitted_for(config, 1.0)
    nodes = dict(model.deployment.nodes)
    nodes["vm-2"] = NodeState(type="vm-4c-7g", leased_at="2026-01-01T00:05:00Z",
                              billing_unit_s=600)
    early = model.model_copy(update={"deployment": Deployment(placement=config.deployment,
                                                              nodes=nodes)})
    decision = plan_btu(early, config)  # vm-2 has 330 s of paid time left: kept
    assert decision.nodes["vm-2"] == "keep"
    late = early.model_copy(update={"window_end": "2026-01-01T00:14:30Z"})
    decision = plan_btu(late, config)  # 30 s left: released at its BTU end
    assert decision.nodes["vm-2"] == "release"
    assert decision.predicted.extra["btu.release_at_s[vm-2]"] == pytest.approx(
        decision.predicted.extra["btu.end_s[vm-2]"])
    thr = plan_btu_threshold(early, with_method(manufacturing, "btu-threshold"))
    assert thr.nodes["vm-2"] == "release"  # the baseline releases an empty VM at once


# --- bad input ---------------------------------------------------------------------------------
def test_bad_typed_inputs_name_field_and_value() -> None:
    with pytest.raises(BtuInputError, match=r"operators\[x\]\.cpu must be finite and > 0, got -1"):
        OperatorType("x", 100, cpu=-1, mem=10)
    with pytest.raises(BtuInputError, match=r"vm_types\[m\]\.price must be .* got -2"):
        VmType("m", 10, 10, -2, 600)
    with pytest.raises(BtuInputError, match=r"vm_types\[m\]\.price \(cost per BTU\) is missing"):
        VmType("m", 10, 10, None, 600)
    with pytest.raises(BtuInputError, match=r"cycle_s must be <= the BTU \(600 s\), got 900"):
        replay("btu", Pattern("p", (1,), 60.0), manufacturing_types(), paper_vm(600),
               manufacturing_sim(), BtuParams(cycle_s=900, monitor_s=15))
    with pytest.raises(BtuInputError, match=r"demand\[a\] must be finite and >= 0, got -1"):
        StepInstance({"a": small_types()["a"]}, (), VM, 1, {"a": -1}, {"a": 1.0}, 0.0, 60.0)


def test_observations_for_unknown_operators_are_refused() -> None:
    cluster = full_cluster()
    obs = {**idle(cluster.types), "zz": Observation(1, 1)}
    with pytest.raises(BtuInputError, match=r"operators \['zz'\] are not in the topology"):
        btu_step(cluster, 60.0, obs, P)
    with pytest.raises(BtuInputError, match=r"observation\.queue must be finite and >= 0"):
        Observation(1.0, -3.0)


def test_fitted_telemetry_for_unknown_operators_is_refused(manufacturing: AppConfig) -> None:
    model = fitted_for(manufacturing, 2.0, extra_ops=("O10",))
    with pytest.raises(BtuInputError, match=r"fitted\.operators: telemetry for operators "
                                            r"\['O10'\]"):
        plan_btu(model, manufacturing)


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        ({"btu_prices": {"vm-4c-7g": -1.0}},
         r"method\.params\.btu_prices\.vm-4c-7g': BTU price must be finite and >= 0, got -1"),
        ({"replan_interval_s": 900},
         r"method\.params\.replan_interval_s': 900 s is longer than the BTU"),
        ({"operators": {"O1": {"slo_ms": 1500, "cpu_shares": 660, "memory_mb": 452}}},
         r"method\.params\.operators': no resources/SLO for \['O2'"),
        ({"penalty_per_item": -1}, r"method\.params\.penalty_per_item'.*value: -1"),
    ],
)
def test_bad_method_params_name_field_and_value(
    manufacturing: AppConfig, change: dict, pattern: str
) -> None:
    config = with_method(manufacturing, **change)
    with pytest.raises(ConfigError, match=pattern):
        plan_btu(fitted_for(config, 2.0), config)


def test_missing_btu_price_is_refused(manufacturing: AppConfig) -> None:
    free = manufacturing.node_types[0].model_copy(update={"price_per_hour": 0.0})
    config = manufacturing.model_copy(update={"node_types": [free]})
    with pytest.raises(ConfigError, match=r"btu_prices\.vm-4c-7g': missing BTU price"):
        plan_btu(fitted_for(config, 2.0), config)
    raw = manufacturing.model_dump(mode="json")
    raw["node_types"][0]["price_per_hour"] = -6
    with pytest.raises(ValueError, match=r"price_per_hour"):
        AppConfig.model_validate(raw)


def test_missing_lease_start_is_an_error_when_asked(manufacturing: AppConfig) -> None:
    config = with_method(manufacturing, missing_lease="error")
    model = fitted_for(config, 2.0)
    nodes = {"vm-1": NodeState(type="vm-4c-7g")}
    model = model.model_copy(update={"deployment": Deployment(placement=config.deployment,
                                                              nodes=nodes)})
    with pytest.raises(BtuInputError, match=r"nodes\[vm-1\]\.leased_at is missing"):
        plan_btu(model, config)
    decision = plan_btu(model, manufacturing)  # default: assume the window start, say so
    assert any("leased_at unknown" in v for v in decision.violations)


def test_step_with_no_fitting_host_is_infeasible_and_keeps_the_live_plan(
    manufacturing: AppConfig, tmp_path: Path
) -> None:
    ok = plan_btu(fitted_for(manufacturing, 2.0), manufacturing)
    ops = dict(manufacturing.method.params["operators"])
    ops["O1"] = {**ops["O1"], "memory_mb": 9000}
    config = with_method(manufacturing, operators=ops)
    bad = plan_btu(fitted_for(config, 2.0), config)
    assert bad.solver.status == "infeasible" and not bad.feasible
    assert "operator 'O1' needs 660 CPU shares / 9000 MB" in bad.solver.message

    def as_plan(decision, end: str) -> Plan:
        return Plan.from_decision(
            decision, app=config.app, method="btu",
            inputs=PlanInputs(fitted_model_id="m", config_hash="h",
                              interval_start="2026-01-01T00:00:00Z", interval_end=end),
        )

    first = publish(as_plan(ok, "2026-01-01T00:01:00Z"), tmp_path)
    second = publish(as_plan(bad, "2026-01-01T00:02:00Z"), tmp_path)
    assert first.became_current and not second.became_current
    assert "no host fits" in second.reason
    assert current_plan(tmp_path, config.app).plan_id == as_plan(ok, "2026-01-01T00:01:00Z").plan_id


def test_example_config_validates(manufacturing: AppConfig) -> None:
    assert manufacturing.method.name == "btu"
    assert {o.name for o in manufacturing.operators} == set(per_machine_rates())
    assert math.isclose(manufacturing.node_types[0].price_per_hour * 600 / 3600, 1.0)
    assert isinstance(PATTERNS["stepwise"]().levels[0], int)
    assert np.isfinite(down_utilities(full_cluster(), idle(small_types()), P)["a"])


# --- replay telemetry in the contract -----------------------------------------------------------
def test_replay_telemetry_follows_the_contract() -> None:
    from datetime import UTC, datetime

    from pyspark.sql.types import DoubleType, LongType, StringType

    from optimizers.btu.telemetry import telemetry_records
    from pipelines.tables import KIND_TO_TABLE

    run = replay("btu", Pattern("p", (3,), 180.0), manufacturing_types(), paper_vm(600),
                 manufacturing_sim(), seed=4, record_telemetry=True)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    records = telemetry_records(run, app="manufacturing-btu", start=start, node_type="vm-4c-7g")
    kinds = {r["kind"] for r in records}
    assert kinds == {"deployment", "operator", "node"}
    python_type = {LongType: int, DoubleType: float, StringType: str}
    for r in records:
        table = KIND_TO_TABLE[r["kind"]]
        schema = {f.name: f.dataType for f in table.json_schema.fields}
        assert set(r) <= set(schema), set(r) - set(schema)
        assert all(r.get(f) is not None for f in table.required)
        for name, value in r.items():
            expected = python_type.get(type(schema[name]))
            if r["kind"] == "deployment" and name in ("placement", "nodes"):
                assert isinstance(value, dict)  # objects in the raw line, JSON text in silver
            elif expected is not None and value is not None:
                assert isinstance(value, expected), (name, value)
    ops = [r for r in records if r["kind"] == "operator"]
    arrivals = sum(w["operators"]["O6"][0] for w in run.windows)
    assert sum(r["records_in"] for r in ops if r["operator"] == "O6") == arrivals
    assert all(r["busy_ms"] <= r["window_s"] * 1000 for r in ops)
    keys = {(r["ts"], r["operator"], r["instance"]) for r in ops}
    assert len(keys) == len(ops)  # the natural key is unique
    dep = next(r for r in records if r["kind"] == "deployment")
    assert dep["nodes"]["vm-1"] == {"type": "vm-4c-7g", "leased_at": "2026-01-01T00:00:00Z",
                                    "billing_unit_s": 600}


def test_replay_telemetry_is_ingested_fitted_and_planned_by_the_pipeline(spark, settings) -> None:
    """A short BTU replay's windows landed as NDJSON go through ingest → validate → fit on
    real Spark and Delta; the fitted model has the replay's arrivals and leased VMs, and the
    BTU policy plans from it."""
    from datetime import UTC, datetime, timedelta

    from optimizers.btu.telemetry import telemetry_records
    from streamplan import stages
    from streamplan.simulation.telemetry import write_ndjson

    config = load_config(CONFIG)
    run = replay("btu", Pattern("p", (3,), 180.0), manufacturing_types(), paper_vm(600),
                 manufacturing_sim(), seed=4, record_telemetry=True)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    records = telemetry_records(run, app=config.app, start=start, node_type="vm-4c-7g")
    write_ndjson(records, stages.landing_dir(settings, config.app) / "btu-replay.ndjson")
    interval = stages.Interval(start, start + timedelta(seconds=run.windows[-1]["t_s"] + 1))
    batch = stages.run_ingest(spark, settings, config, interval)
    report = stages.run_validate(spark, settings, config, interval)
    assert report.quarantined == 0, "VMs the replay leased are declared by its deployments"
    known = stages.known_nodes(settings, config, {"vm-2": "vm-4c-7g", "vm-9": "no-such-type"})
    assert "vm-2" in known and "vm-9" not in known
    assert batch.rows_landed == len(records)
    model = stages.run_fit(spark, settings, config, interval)
    assert set(model.operators) == {o.name for o in config.operators}
    span = sum(w["window_s"] for w in run.windows)
    arrivals = sum(w["operators"]["O6"][0] for w in run.windows)
    assert model.operators["O6"].arrival_rate_mean == pytest.approx(arrivals / span, rel=0.05)
    last = run.windows[-1]
    assert set(model.deployment.nodes) == set(last["leased_at"])
    assert all(n.leased_at and n.billing_unit_s == 600 for n in model.deployment.nodes.values())
    plan = stages.run_plan(settings, config, model, interval)
    assert plan.feasible and plan.method == "btu"
    assert set(plan.placement) == set(model.operators)
