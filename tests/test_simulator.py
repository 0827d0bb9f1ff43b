"""Telemetry simulator: exact FCFS stations against closed forms, and the telemetry contract."""

from __future__ import annotations

import json
import math
import re
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from streamplan.config import AppConfig, ServiceSpec, load_config
from streamplan.settings import REPO_ROOT
from streamplan.simulation import (
    SimulationResult,
    fcfs_departures,
    fcfs_multi_departures,
    simulate,
    write_ndjson,
)
from streamplan.simulation.queueing import event_driven_departures, network_departures
from streamplan.simulation.sampling import service_times

START = datetime(2026, 1, 1, tzinfo=timezone.utc)
VM1 = {"vm-1": "small"}
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
OPERATOR_FIELDS = ("operator", "instance", "node", "records_in", "records_out", "busy_ms",
                   "service_ms_sum", "service_ms_sqsum", "queue_len")
QUERY_FIELDS = ("query", "events", "rt_ms_sum", "rt_ms_sqsum", "rt_p50_ms", "rt_p95_ms",
                "rt_p99_ms")


# --- single stations ------------------------------------------------------------------------
def test_fcfs_departures_hand_example() -> None:
    # D = max(A, D_prev) + S: 0+2, max(1,2)+2, max(2,4)+1, max(10,5)+1
    d = fcfs_departures(np.array([0.0, 1.0, 2.0, 10.0]), np.array([2.0, 2.0, 1.0, 1.0]))
    np.testing.assert_allclose(d, [2.0, 4.0, 5.0, 11.0])


def test_fcfs_departures_matches_naive_loop() -> None:
    rng = np.random.default_rng(1)
    arrivals = np.cumsum(rng.exponential(1.0, 20_000))
    services = rng.exponential(0.9, 20_000)
    naive, last = [], -math.inf
    for a, s in zip(arrivals.tolist(), services.tolist()):
        last = max(a, last) + s
        naive.append(last)
    np.testing.assert_allclose(fcfs_departures(arrivals, services), naive, rtol=1e-12, atol=1e-9)


def test_fcfs_multi_hand_example_and_single_server() -> None:
    # Two servers: job 0 holds one until 3, jobs 1-3 share the other: 0+1, 1+1, 2+1.
    d = fcfs_multi_departures(np.array([0.0, 0.0, 0.0, 1.0]), np.array([3.0, 1.0, 1.0, 1.0]), 2)
    np.testing.assert_allclose(d, [3.0, 1.0, 2.0, 3.0])
    rng = np.random.default_rng(2)
    a, s = np.cumsum(rng.exponential(1.0, 1000)), rng.exponential(0.5, 1000)
    np.testing.assert_allclose(fcfs_multi_departures(a, s, 1), fcfs_departures(a, s))


def _mean_wait(rho: float, spec: ServiceSpec, n: int, seed: int, servers: int = 1) -> float:
    """Mean time in queue of a Poisson-fed FCFS station at load rho, first 10% discarded."""
    rng = np.random.default_rng(seed)
    lam = rho * servers / (spec.mean_ms / 1000.0)
    arrivals = np.cumsum(rng.exponential(1.0 / lam, n))
    services = service_times(spec, n, rng)
    wait = fcfs_multi_departures(arrivals, services, servers) - arrivals - services
    return float(wait[n // 10 :].mean())


def _pollaczek_khinchine_wq(rho: float, mean_s: float, scv: float) -> float:
    # Pollaczek-Khinchine mean-value formula Wq = lambda E[S^2] / (2 (1 - rho)), E[S^2] =
    # b^2 (1 + c_s^2) (Kleinrock, Queueing Systems Vol. 1, ch. 5; Harchol-Balter,
    # Performance Modeling and Design of Computer Systems, ch. 23). M/M/1: rho b / (1 - rho).
    lam = rho / mean_s
    return lam * mean_s**2 * (1 + scv) / (2 * (1 - rho))


@pytest.mark.parametrize(("rho", "tol"), [(0.5, 0.03), (0.9, 0.08)])
@pytest.mark.parametrize(
    ("spec", "n"),
    [
        (ServiceSpec(dist="exponential", mean_ms=1.0), 2_000_000),
        (ServiceSpec(dist="deterministic", mean_ms=1.0), 2_000_000),
        # scv 4 has a heavy tail: more events for the same precision.
        (ServiceSpec(dist="lognormal", mean_ms=1.0, scv=4.0), 6_000_000),
    ],
    ids=["M/M/1", "M/D/1", "M/LN/1"],
)
def test_single_server_wait_matches_closed_form(
    spec: ServiceSpec, n: int, rho: float, tol: float
) -> None:
    scv = {"exponential": 1.0, "deterministic": 0.0}.get(spec.dist, spec.scv)
    expected = _pollaczek_khinchine_wq(rho, spec.mean_ms / 1000.0, scv)
    assert _mean_wait(rho, spec, n, seed=11) == pytest.approx(expected, rel=tol)


def _erlang_c_wq(servers: int, rho: float, mean_s: float) -> float:
    # Erlang C: P(wait) = (a^c/c!) / ((1-rho) sum_{k<c} a^k/k! + a^c/c!), a = lambda b,
    # Wq = P(wait) b / (c (1 - rho)) (Kleinrock, Queueing Systems Vol. 1, sec. 3.5 (M/M/m);
    # Harchol-Balter, Performance Modeling and Design of Computer Systems, ch. 14).
    a = rho * servers
    top = a**servers / math.factorial(servers)
    p_wait = top / ((1 - rho) * sum(a**k / math.factorial(k) for k in range(servers)) + top)
    return p_wait * mean_s / (servers * (1 - rho))


@pytest.mark.parametrize(("rho", "tol"), [(0.5, 0.03), (0.9, 0.08)])
def test_two_core_station_matches_erlang_c(rho: float, tol: float) -> None:
    spec = ServiceSpec(dist="exponential", mean_ms=1.0)
    wait = _mean_wait(rho, spec, 1_000_000, seed=5, servers=2)
    assert wait == pytest.approx(_erlang_c_wq(2, rho, 1e-3), rel=tol)


def test_lindley_path_speed() -> None:
    rng = np.random.default_rng(3)
    n = 2_000_000
    a, s = np.cumsum(rng.exponential(1.0, n)), rng.exponential(0.8, n)
    t0 = time.perf_counter()
    fcfs_departures(a, s)
    assert time.perf_counter() - t0 < 1.0  # >= 2e6 events/s even on a busy machine


def test_event_loop_equals_topological_solution() -> None:
    """Three nodes in a chain (node 1 has two cores): both network solvers agree exactly."""
    rng = np.random.default_rng(4)
    n = 3000
    roots = np.arange(n)
    mids = n + np.arange(n)
    leaves = 2 * n + np.flatnonzero(rng.random(n) < 0.5)
    parent = np.r_[np.full(n, -1), roots, mids[leaves - 2 * n]]
    node = np.r_[np.zeros(n, int), np.ones(n, int), np.full(len(leaves), 2)]
    arrival = np.r_[np.cumsum(rng.exponential(1.0, n)), np.zeros(n + len(leaves))]
    service = rng.exponential(0.6, len(parent))
    args = (arrival, parent, node, service, [1, 2, 1])
    np.testing.assert_allclose(network_departures(*args), event_driven_departures(*args))


# --- simulate() on the demo application -------------------------------------------------------
def _with(config: AppConfig, **changes: object) -> AppConfig:
    """A validated copy of the configuration with top-level or simulation fields replaced."""
    raw = config.model_dump(mode="json")
    sim = changes.pop("simulation", {})
    raw.update(changes)
    raw["simulation"].update(sim)
    return AppConfig.model_validate(raw)


def _sum(records: list[dict], kind: str, key: str, value: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for r in records:
        if r["kind"] == kind:
            out[r[key]] = out.get(r[key], 0) + r[value]
    return out


@pytest.fixture(scope="module")
def demo_config() -> AppConfig:
    """configs/demo.yaml, module-scoped (overrides conftest's) to share one demo run."""
    return load_config(REPO_ROOT / "configs" / "demo.yaml")


@pytest.fixture(scope="module")
def demo_run(demo_config: AppConfig) -> SimulationResult:
    return simulate(demo_config, demo_config.deployment, VM1, START, 600.0)


def test_records_follow_the_contract(demo_run: SimulationResult) -> None:
    records = demo_run.records
    windows = 60
    assert len(records) == windows * (1 + 1 + 9 + 3)
    for r in records:
        assert {"kind", "ts", "window_s", "app"} <= r.keys()
        assert TS.match(r["ts"]) and r["window_s"] == 10.0 and r["app"] == "kitchen"
    assert records[0]["ts"] == "2026-01-01T00:00:10Z"
    assert records[-1]["ts"] == "2026-01-01T00:10:00Z"
    keys = [(r["ts"], r["kind"], r.get("operator") or r.get("query") or r.get("node") or "",
             r.get("instance", 0)) for r in records]
    assert keys == sorted(keys)
    for r in (r for r in records if r["kind"] == "operator"):
        assert set(OPERATOR_FIELDS) <= r.keys()
        assert all(r[f] >= 0 for f in OPERATOR_FIELDS[3:])
        assert isinstance(r["records_in"], int) and isinstance(r["queue_len"], int)
    for r in (r for r in records if r["kind"] == "query"):
        assert set(QUERY_FIELDS) <= r.keys() and r["events"] > 0
        assert 0 < r["rt_p50_ms"] <= r["rt_p95_ms"] <= r["rt_p99_ms"]
    for r in (r for r in records if r["kind"] == "node"):
        assert 0 <= r["cpu_util"] <= 1 and r["power_w"] >= 10 and 0 < r["mem_util"] < 1
    deployment = next(r for r in records if r["kind"] == "deployment")
    assert deployment["placement"]["spoon_match"] == [["vm-1", 1]]
    assert deployment["nodes"] == {"vm-1": {"type": "small", "leased_at": None,
                                            "billing_unit_s": 3600}}
    json.dumps(records)  # plain JSON types only


def test_conservation_selectivity_and_service(
    demo_run: SimulationResult, demo_config: AppConfig
) -> None:
    records_in = _sum(demo_run.records, "operator", "operator", "records_in")
    records_out = _sum(demo_run.records, "operator", "operator", "records_out")
    busy = _sum(demo_run.records, "operator", "operator", "busy_ms")
    for a, b in demo_config.edges:
        assert records_out[a] == pytest.approx(records_in[b], rel=0.002)
    sim = demo_config.simulation
    assert sim is not None
    for op, n_in in records_in.items():
        sel = sim.selectivity.get(op, 1.0)
        assert records_out[op] / n_in == pytest.approx(sel, abs=0.005)
        assert busy[op] / n_in == pytest.approx(sim.service[op].mean_ms, rel=0.02)
    # Input rate: 120 s at 20 ev/s then 480 s at 300 ev/s for spoon.
    assert records_in["spoon_window"] == pytest.approx(120 * 20 + 480 * 300, rel=0.01)


def test_node_utilisation_matches_offered_load(demo_run: SimulationResult) -> None:
    util = [r["cpu_util"] for r in demo_run.records if r["kind"] == "node"]
    # Busy phase: (300 + 250 + 200) ev/s x 1.0 ms per event = 0.75; quiet phase 0.045.
    assert np.mean(util[15:]) == pytest.approx(0.75, rel=0.03)
    assert np.mean(util[:12]) == pytest.approx(0.045, rel=0.15)


def test_same_seed_same_records_and_offsets_differ(demo_config: AppConfig) -> None:
    def run(**kw: float) -> SimulationResult:
        return simulate(demo_config, demo_config.deployment, VM1, START, 30.0, **kw)

    assert run(workload_offset_s=100.0).records == run(workload_offset_s=100.0).records
    assert run(workload_offset_s=100.0).records != run(workload_offset_s=130.0).records
    assert run(seed=1).records != run(seed=2).records


def test_rt_of_one_query_matches_super_operator(demo_config: AppConfig) -> None:
    """One 3-operator chain with exponential services on one core is an M/G/1 queue whose
    service is the sum of the three (seed 000's EPN super-operator). Short windows give
    many queue-length samples."""
    config = _with(demo_config, window_s=0.1,
                   simulation={"workload": [{"start_s": 0, "rates": {"spoon": 600}}]})
    result = simulate(config, config.deployment, VM1, START, 400.0)
    means = [0.2e-3, 0.5e-3, 0.3e-3]
    b = sum(means)
    m2 = sum(m * m for m in means) + b * b  # E[S^2] = Var + b^2, independent exponentials
    lam = 600.0
    # Pollaczek-Khinchine sojourn time T = lambda M2 / (2 (1 - rho)) + b (see above).
    wait_s = lam * m2 / (2 * (1 - lam * b))
    assert result.mean_rt_ms()["spoon"] == pytest.approx(1000 * (wait_s + b), rel=0.02)
    # Waiting jobs hold one spoon_window record each: Little's law Lq = lambda Wq.
    queue = [r["queue_len"] for r in result.records
             if r["kind"] == "operator" and r["operator"].startswith("spoon")]
    assert sum(queue) / 4000 == pytest.approx(lam * wait_s, rel=0.1)
    assert math.isnan(result.mean_rt_ms()["knife"])
    idle = [r for r in result.records if r["kind"] == "query" and r["query"] == "knife"]
    assert all(r["events"] == 0 and r["rt_p95_ms"] is None and r["rt_ms_sum"] == 0 for r in idle)


def test_tandem_over_two_nodes_matches_burke(demo_config: AppConfig) -> None:
    """spoon_window alone on vm-1 (M/M/1), features+match on vm-2: by Burke's theorem vm-2
    sees Poisson arrivals, so it is M/G/1 with the sum of two exponential services."""
    config = _with(demo_config, simulation={"workload": [{"start_s": 0, "rates": {"spoon": 500}}]})
    placement = dict(config.deployment) | {
        "spoon_features": [("vm-2", 1)], "spoon_match": [("vm-2", 1)]
    }
    result = simulate(config, placement, {"vm-1": "small", "vm-2": "small"}, START, 600.0)
    lam, b1, parts = 500.0, 0.2e-3, [0.5e-3, 0.3e-3]
    b2 = sum(parts)
    m2 = sum(m * m for m in parts) + b2 * b2
    # M/M/1 sojourn b/(1 - rho) plus the Pollaczek-Khinchine sojourn of the second station.
    expected_ms = 1000 * (b1 / (1 - lam * b1) + lam * m2 / (2 * (1 - lam * b2)) + b2)
    assert result.mean_rt_ms()["spoon"] == pytest.approx(expected_ms, rel=0.02)
    util = _sum(result.records, "node", "node", "cpu_util")
    assert util["vm-1"] / 60 == pytest.approx(lam * b1, rel=0.05)
    assert util["vm-2"] / 60 == pytest.approx(lam * b2, rel=0.05)
    nodes = {r["operator"]: r["node"] for r in result.records if r["kind"] == "operator"}
    assert nodes["spoon_window"] == "vm-1" and nodes["spoon_match"] == "vm-2"


def test_replicas_across_nodes_split_load(demo_config: AppConfig) -> None:
    """Replicas of consecutive operators on two nodes make the node graph cyclic (event loop)."""
    placement = dict(demo_config.deployment) | {
        op: [("vm-1", 1), ("vm-2", 1)] for op in ("spoon_window", "spoon_features", "spoon_match")
    }
    result = simulate(demo_config, placement, {"vm-1": "small", "vm-2": "small"}, START, 60.0,
                      workload_offset_s=200.0)
    per_instance: dict[tuple[str, int], int] = {}
    for r in result.records:
        if r["kind"] == "operator":
            key = (r["operator"], r["instance"])
            per_instance[key] = per_instance.get(key, 0) + r["records_in"]
    total = per_instance[("spoon_features", 0)] + per_instance[("spoon_features", 1)]
    assert total == pytest.approx(300 * 60, rel=0.02)
    assert per_instance[("spoon_features", 1)] / total == pytest.approx(0.5, abs=0.02)
    assert min(result.response_times_ms["spoon"]) > 0


def test_speed_and_cores_of_node_type(demo_config: AppConfig) -> None:
    types = [t.model_dump() for t in demo_config.node_types]
    types.append({**types[0], "name": "big", "cores": 2, "speed": 2.0})
    config = _with(demo_config, node_types=types)
    result = simulate(config, config.deployment, {"vm-1": "big"}, START, 60.0,
                      workload_offset_s=200.0)
    busy = _sum(result.records, "operator", "operator", "busy_ms")
    n_in = _sum(result.records, "operator", "operator", "records_in")
    assert busy["spoon_features"] / n_in["spoon_features"] == pytest.approx(0.25, rel=0.03)
    util = np.mean([r["cpu_util"] for r in result.records if r["kind"] == "node"])
    assert util == pytest.approx(0.75 / 2 / 2, rel=0.05)  # half the work, on two cores


def test_demo_size_simulation_is_fast(demo_config: AppConfig) -> None:
    config = _with(demo_config, simulation={
        "workload": [{"start_s": 0, "rates": {"spoon": 250, "knife": 250, "fork": 250}}]})
    t0 = time.perf_counter()
    simulate(config, config.deployment, VM1, START, 600.0)
    assert time.perf_counter() - t0 < 5.0


def test_typed_counts_split_the_counters_by_the_output_mix(demo_config: AppConfig) -> None:
    """simulation.output_types: records_out_by_type sums to records_out; a successor's
    records_in_by_type counts what its predecessor emitted of each type."""
    mix = {"spoon_window": {"A": 0.25, "B": 0.75}}
    result = simulate(_with(demo_config, simulation={"output_types": mix}),
                      demo_config.deployment, VM1, START, 600.0)
    ops = [r for r in result.records if r["kind"] == "operator"]
    window = [r for r in ops if r["operator"] == "spoon_window"]
    nxt = [r for r in ops if "records_in_by_type" in r]
    assert {r["operator"] for r in nxt} == {"spoon_features"}
    assert all(sum(r["records_out_by_type"].values()) == r["records_out"] for r in window)
    out = {t: sum(r["records_out_by_type"][t] for r in window) for t in ("A", "B")}
    assert out["A"] / (out["A"] + out["B"]) == pytest.approx(0.25, abs=0.02)
    received = {t: sum(r["records_in_by_type"][t] for r in nxt) for t in ("A", "B")}
    assert sum(received.values()) == sum(r["records_in"] for r in nxt)
    assert received["A"] <= out["A"] and received["A"] >= 0.95 * out["A"], "in flight at the end"
    assert all("records_out_by_type" not in r for r in ops if r["operator"] != "spoon_window")


def test_invalid_inputs_are_named(demo_config: AppConfig) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        simulate(demo_config, demo_config.deployment, VM1, datetime(2026, 1, 1), 10.0)
    with pytest.raises(ValueError, match="missing \\['spoon_match'\\]"):
        placement = {k: v for k, v in demo_config.deployment.items() if k != "spoon_match"}
        simulate(demo_config, placement, VM1, START, 10.0)
    with pytest.raises(ValueError, match="'vm-9' is not in node_types"):
        simulate(demo_config, demo_config.deployment | {"spoon_match": [("vm-9", 1)]}, VM1,
                 START, 10.0)
    with pytest.raises(ValueError, match="unknown node types"):
        simulate(demo_config, demo_config.deployment, {"vm-1": "huge"}, START, 10.0)


def test_write_ndjson_is_atomic_and_round_trips(demo_run: SimulationResult, tmp_path: Path) -> None:
    path = write_ndjson(demo_run.records[:20], tmp_path / "out" / "telemetry.ndjson")
    lines = path.read_text().splitlines()
    assert [json.loads(line) for line in lines] == demo_run.records[:20]
    assert sorted(p.name for p in path.parent.iterdir()) == ["telemetry.ndjson"]


def test_interval_without_events_and_partial_last_window(demo_config: AppConfig) -> None:
    config = _with(demo_config, simulation={"workload": [{"start_s": 50, "rates": {"spoon": 100}}]})
    result = simulate(config, config.deployment, VM1, START, 25.0)
    assert [r["ts"] for r in result.records if r["kind"] == "node"] == [
        "2026-01-01T00:00:10Z", "2026-01-01T00:00:20Z", "2026-01-01T00:00:25Z"]
    assert result.records[-1]["window_s"] == 5.0
    assert all(r["records_in"] == 0 for r in result.records if r["kind"] == "operator")
    assert all(math.isnan(v) for v in result.mean_rt_ms().values())
