"""``simulate``: one interval of the simulated world, returned as telemetry."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from streamplan.config import AppConfig
from streamplan.simulation.edgecloud import link_records
from streamplan.simulation.flow import generate_records, schedule
from streamplan.simulation.sampling import poisson_arrivals
from streamplan.simulation.telemetry import Windows, build_records
from streamplan.simulation.topology import build_topology


@dataclass
class SimulationResult:
    """Telemetry records and per-query response times of one simulated interval."""

    records: list[dict]  # telemetry contract records, sorted by (ts, kind, ids)
    response_times_ms: dict[str, np.ndarray]  # per query, per completed input event

    def mean_rt_ms(self) -> dict[str, float]:
        """Mean response time per query in ms (NaN for a query with no completed event)."""
        return {q: float(rt.mean()) if rt.size else float("nan")
                for q, rt in self.response_times_ms.items()}


def simulate(
    config: AppConfig,
    placement: dict[str, list[tuple[str, int]]],
    node_types: dict[str, str],
    start: datetime,
    duration_s: float,
    *,
    workload_offset_s: float = 0.0,
    seed: int | None = None,
) -> SimulationResult:
    """Simulate ``duration_s`` seconds of the application under ``placement``.

    placement: operator -> [(node, replicas)]; node_types: node -> node type name (from
    config.node_types). start: tz-aware UTC start of the simulated interval. The workload
    phases' start_s are measured from the beginning of the workload timeline; the simulated
    interval covers timeline [workload_offset_s, workload_offset_s + duration_s]. seed
    defaults to config.simulation.seed and is mixed with the offset (in ms), so the result
    is deterministic and consecutive intervals differ. The system starts empty.
    """
    if start.tzinfo is None or start.utcoffset() is None:
        raise ValueError(f"start must be timezone-aware (UTC), got {start!r}")
    if duration_s <= 0 or workload_offset_s < 0:
        raise ValueError(
            f"need duration_s > 0 and workload_offset_s >= 0, got {duration_s}, {workload_offset_s}"
        )
    topo = build_topology(config, placement, node_types)
    sim = config.simulation
    assert sim is not None  # checked by build_topology
    base_seed = sim.seed if seed is None else seed
    rng = np.random.default_rng([base_seed, round(workload_offset_s * 1000)])
    arrivals = [
        poisson_arrivals(sim.workload, q, workload_offset_s, duration_s, rng) for q in topo.queries
    ]
    event_time = np.concatenate([np.empty(0), *arrivals])
    event_query = np.repeat(np.arange(len(arrivals)), [len(a) for a in arrivals])
    trace = schedule(topo, generate_records(topo, event_query, rng), event_query, event_time)
    windows = Windows(config.window_s, duration_s)
    links = None
    if sim.links:  # its own stream, so the records above do not depend on it
        link_rng = np.random.default_rng([base_seed, round(workload_offset_s * 1000), 1])
        links = link_records(topo, sim.links, windows.n, link_rng)
    records = build_records(
        config.app, topo, trace, event_time, placement, start.astimezone(timezone.utc), windows,
        node_specs=sim.node_types, links=links, event_bytes=sim.event_bytes,
    )
    rt_ms = (trace.event_done - event_time) * 1000.0
    done = trace.event_done < duration_s
    response_times = {q: rt_ms[done & (event_query == i)] for i, q in enumerate(topo.queries)}
    return SimulationResult(records=records, response_times_ms=response_times)
