"""Seed 004 costs fitted from telemetry: the simulator's edge + cloud world (interference,
idle power, energy per event, battery, links) is recovered by ingest → validate → fit, and
the edge + cloud adapter then plans with the fitted numbers instead of the config's."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from optimizers.edgecloud.adapter import build_instance
from optimizers.edgecloud.params import parse_params
from pipelines.fit import fit_model
from streamplan import stages
from streamplan.config import AppConfig, load_config
from streamplan.settings import REPO_ROOT
from streamplan.simulation import simulate, write_ndjson

START = datetime(2026, 1, 1, tzinfo=UTC)
INTERVAL = stages.Interval(START, START + timedelta(seconds=600))
# The simulated world; method.params (what the planner assumes) says pi slope 0.05, vm 0.02,
# κ 1.25 W, ε 1e-5 J and edge-cloud links of 60 ms / 20 Mbps: all different on purpose.
PI = {"interference_slope": 0.08, "idle_power_w": 2.0, "energy_j_per_event": 4e-4,
      "battery_wh": 30.0}
VM = {"interference_slope": 0.03}
LINKS = {"edge-edge": {"latency_ms": 3.0, "bandwidth_mbps": 80.0, "jitter": 0.1},
         "edge-cloud": {"latency_ms": 45.0, "bandwidth_mbps": 25.0, "jitter": 0.1},
         "cloud-cloud": {"latency_ms": 0.5, "bandwidth_mbps": 1000.0, "jitter": 0.1}}
EVENT_BYTES = {"traffic_join": 512.0, "air_pattern": 200.0}  # the planner's config says 300
HOSTS = {
    "pi-1": ["traffic_src_a", "traffic_filter_a", "air_src", "air_filter", "power_src",
             "power_batch"],
    "pi-2": ["traffic_src_b", "traffic_filter_b", "traffic_join", "air_average"],
    "vm-1": ["traffic_window", "traffic_alert", "air_pattern", "air_alert"],
    "vm-2": ["power_spike", "power_sequence", "power_dashboard", "power_billing"],
}
# Queries switch on and off, so the number m of busy operators on a node changes over time
# (pi-1: 2, 4, 6, 4; pi-2: 3, 4, 4, 1; vm-1: 2, 4, 4, 2; vm-2: 0, 0, 4, 4).
WORKLOAD = [
    {"start_s": 0, "rates": {"traffic": 200}},
    {"start_s": 150, "rates": {"traffic": 200, "air": 100}},
    {"start_s": 300, "rates": {"traffic": 200, "air": 100, "power": 50}},
    {"start_s": 450, "rates": {"air": 150, "power": 100}},
]


@pytest.fixture
def world() -> AppConfig:
    """configs/edgecloud_small.yaml on three Pis (pi-3 idle) and two VMs, operators spread."""
    raw = load_config(REPO_ROOT / "configs" / "edgecloud_small.yaml").model_dump(mode="python")
    raw["nodes"] = [{"name": n, "type": n[:2]} for n in ("pi-1", "pi-2", "pi-3", "vm-1", "vm-2")]
    raw["deployment"] = {op: [(node, 1)] for node, ops in HOSTS.items() for op in ops}
    raw["simulation"].update(workload=WORKLOAD, node_types={"pi": PI, "vm": VM}, links=LINKS,
                             event_bytes=EVENT_BYTES)
    return AppConfig.model_validate(raw)


def _land(settings, config: AppConfig, interval: stages.Interval = INTERVAL,
          drop: tuple[str, ...] = (), extra: tuple[dict, ...] = ()) -> list[dict]:
    """Simulate the interval into the landing dir (without the ``drop`` node fields, with the
    ``extra`` records)."""
    types = {n.name: n.type for n in config.nodes}
    duration = (interval.end - interval.start).total_seconds()
    result = simulate(config, dict(config.deployment), types, interval.start, duration)
    records = [{k: v for k, v in r.items() if r["kind"] != "node" or k not in drop}
               for r in result.records] + list(extra)
    write_ndjson(records, stages.landing_dir(settings, config.app) / "sim.ndjson")
    return records


def _fit(spark, settings, config: AppConfig, interval: stages.Interval = INTERVAL,
         quarantined: int = 0):
    stages.run_ingest(spark, settings, config, interval)
    report = stages.run_validate(spark, settings, config, interval)
    assert report.quarantined == quarantined, report.rules
    return fit_model(spark, settings.lake, config, interval.start, interval.end), report


def test_simulated_edge_telemetry_follows_the_world(world: AppConfig) -> None:
    types = {n.name: n.type for n in world.nodes}
    records = simulate(world, dict(world.deployment), types, INTERVAL.start, 600.0).records
    pi1 = [r for r in records if r["kind"] == "node" and r["node"] == "pi-1"]
    drained = sum(r["power_w"] * r["window_s"] for r in pi1) / 3600
    assert pi1[-1]["battery_wh"] == pytest.approx(30.0 - drained)
    assert all(a["battery_wh"] > b["battery_wh"] for a, b in zip(pi1, pi1[1:]))
    idle = [r for r in records if r["kind"] == "node" and r["node"] == "pi-3"]
    assert {r["power_w"] for r in idle} == {2.0} and {r["cpu_util"] for r in idle} == {0.0}
    vm = [r for r in records if r["kind"] == "node" and r["node"] == "vm-1"]
    assert all("battery_wh" not in r for r in vm)
    links = [r for r in records if r["kind"] == "link"]
    assert len(links) == 60 * 5 * 4  # every ordered pair of distinct nodes, every window
    lk = [r for r in links if (r["src"], r["dst"]) == ("pi-1", "vm-1")]
    assert all(40.5 <= r["latency_ms"] <= 49.5 for r in lk)
    assert json.dumps(records)


def test_fit_recovers_interference_power_battery_and_links(spark, settings, world) -> None:
    records = _land(settings, world)
    model, _ = _fit(spark, settings, world)
    nodes = model.nodes
    # interference slope: least squares of (cpu_util/D − 1) on (m − 1), within 15%
    assert nodes["pi-1"].interference_slope == pytest.approx(0.08, rel=0.15)
    assert nodes["pi-2"].interference_slope == pytest.approx(0.08, rel=0.15)
    assert nodes["vm-1"].interference_slope == pytest.approx(0.03, rel=0.15)
    assert nodes["vm-2"].interference_slope is None, "one value of m only"
    assert nodes["pi-3"].interference_slope is None, "nothing runs there"
    # κ and ε by NNLS of power_w on the operators' input rates, within 10%
    for n in ("pi-1", "pi-2", "pi-3"):
        assert nodes[n].idle_power_w == pytest.approx(2.0, rel=0.10), n
    for op in HOSTS["pi-1"] + HOSTS["pi-2"]:
        assert model.placement_costs[op].energy_j_per_event_by_type["pi"] == pytest.approx(
            4e-4, rel=0.10), op
    # battery: the last reading
    last = [r for r in records if r["kind"] == "node" and r["node"] == "pi-1"][-1]
    assert nodes["pi-1"].battery_wh == pytest.approx(last["battery_wh"])
    assert 29.0 < nodes["pi-1"].battery_wh < 30.0
    assert nodes["vm-1"].battery_wh is None
    # exclusive service time per node type: the true mean / node speed, within 10%
    join = model.placement_costs["traffic_join"].service_mean_s_by_type
    assert join == {"pi": pytest.approx(0.4e-3 / 0.3333, rel=0.10)}
    # output event size: Σ bytes_out / Σ records_out, exact (bytes are records x size)
    assert {op: c.event_bytes for op, c in model.placement_costs.items()
            if c.event_bytes is not None} == EVENT_BYTES
    # links: mean of the readings, within 5% (jitter ±10% averages out over 60 windows)
    links = {(lk.src, lk.dst): lk for lk in model.links}
    assert len(links) == 5 * 4
    assert links[("pi-1", "vm-1")].latency_ms == pytest.approx(45.0, rel=0.05)
    assert links[("pi-1", "vm-1")].bandwidth_mbps == pytest.approx(25.0, rel=0.05)
    assert links[("pi-1", "pi-2")].latency_ms == pytest.approx(3.0, rel=0.05)

    # the adapter plans with the fitted numbers, not method.params
    built = build_instance(world, parse_params(world.method.params), model)
    inst = built.inst
    traffic = next(d for d in built.dags if d.name == "traffic")
    assert next(v for v in traffic.vertices if v.name == "traffic_join").event_bytes == 512.0
    p1, p2, v1 = inst.index["pi-1"], inst.index["pi-2"], inst.index["vm-1"]
    assert inst.resources[p1].interference == nodes["pi-1"].interference_slope
    assert inst.resources[p1].idle_w == nodes["pi-1"].idle_power_w
    assert inst.resources[p1].battery_j == nodes["pi-1"].battery_wh * 3600
    k = inst.kind_index["traffic_join"]
    assert inst.service_s[k, p2] == join["pi"]
    assert inst.service_s[k, v1] == pytest.approx(join["pi"] * 0.3333)  # scaled by speed
    assert inst.energy_j[k, p2] == model.placement_costs["traffic_join"] \
        .energy_j_per_event_by_type["pi"]
    assert inst.latency_s[p1, v1] == pytest.approx(links[("pi-1", "vm-1")].latency_ms / 1e3)
    assert inst.bandwidth_Bps[p1, v1] == pytest.approx(25e6 / 8, rel=0.05)


def test_without_power_telemetry_the_adapter_uses_the_config(spark, settings, world) -> None:
    interval = stages.Interval(START, START + timedelta(seconds=300))  # traffic, then + air
    dead = {"kind": "link", "ts": "2026-01-01T00:00:05Z", "window_s": 10.0, "app": world.app,
            "src": "pi-1", "dst": "vm-1", "latency_ms": 45.0, "bandwidth_mbps": 0.0}
    _land(settings, world, interval, drop=("power_w", "battery_wh"), extra=(dead,))
    model, report = _fit(spark, settings, world, interval, quarantined=1)
    assert any("bandwidth_mbps" in rule for rule in report.rules), report.rules
    assert min(lk.bandwidth_mbps for lk in model.links) > 0
    for node in model.nodes.values():
        assert node.power_w_mean is None and node.idle_power_w is None
        assert node.battery_wh is None
    assert all(not c.energy_j_per_event_by_type for c in model.placement_costs.values())
    assert model.nodes["pi-1"].interference_slope == pytest.approx(0.08, rel=0.15)
    inst = build_instance(world, parse_params(world.method.params), model).inst
    p1 = inst.index["pi-1"]
    assert inst.resources[p1].idle_w == 1.25 and inst.resources[p1].battery_j == 50 * 3600
    assert inst.energy_j[inst.kind_index["traffic_join"], inst.index["pi-2"]] == 1e-5
