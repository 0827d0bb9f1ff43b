"""Edge + cloud telemetry (seed 004): interference in node utilisation, power, battery, links.

Used only when ``simulation.node_types`` or ``simulation.links`` is set. Operators keep
reporting their exclusive busy time; the interference overhead shows in the node's
``cpu_util`` only (record latencies stay exclusive, the digest's E2 / A1 "exclusive" mode).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamplan.config import SimLinkSpec
from streamplan.simulation.topology import Topology

_TIER_ORDER = ("edge", "cloud")


def node_load(topo: Topology, records_in: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[node, window] number m of busy co-located operators (operators with records in the
    window) and records processed, from the [instance, window] ``records_in`` counters."""
    n_ops, n_nodes, n_win = len(topo.ops), len(topo.nodes), records_in.shape[1]
    inst_op = np.repeat(np.arange(n_ops), [len(i) for i in topo.inst_node])
    inst_node = np.concatenate(topo.inst_node)
    per_op = np.zeros((n_nodes * n_ops, n_win))
    np.add.at(per_op, inst_node * n_ops + inst_op, records_in)
    per_op = per_op.reshape(n_nodes, n_ops, n_win)
    return (per_op > 0).sum(axis=1), per_op.sum(axis=1)


def interfered_util(util: np.ndarray, busy_ops: np.ndarray, slope: float) -> np.ndarray:
    """Node utilisation under co-location: exclusive busy time x (1 + pi(m)) with
    pi(m) = slope * (m - 1) (digest 004 E6 and A1: effective λ = λ(1 + π(m)); §6 linear π).
    Clipped at 1 (a saturated node)."""
    return np.minimum(util * (1.0 + slope * np.maximum(busy_ops - 1, 0)), 1.0)


def power_w(
    idle_w: float, energy_j: float, records: np.ndarray, lengths: np.ndarray
) -> np.ndarray:
    """Node power P = κ + ε·ω, ω the records processed per second (digest 004 E7 in the SI
    form of A7: P_base + Σ_i ω_i e_i)."""
    return idle_w + energy_j * records / lengths


def battery_wh(start_wh: float, power: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Charge left at each window end: start − ∫P dt (E7's drain), in Wh, never below 0."""
    return np.maximum(start_wh - np.cumsum(power * lengths) / 3600.0, 0.0)


def link_records(
    topo: Topology, links: dict[str, SimLinkSpec], n_windows: int, rng: np.random.Generator
) -> list[list[dict[str, Any]]]:
    """[window] link records of every ordered pair of distinct nodes whose tier pair is in
    ``links``, sorted by (src, dst); each reading is the tier figure x (1 + jitter·U(−1, 1))."""
    names = sorted(range(len(topo.nodes)), key=lambda n: topo.nodes[n])
    pairs = []
    for a in names:
        for b in names:
            tiers = sorted((topo.types[a].tier, topo.types[b].tier), key=_TIER_ORDER.index)
            spec = links.get("-".join(tiers))
            if a != b and spec is not None:
                pairs.append((topo.nodes[a], topo.nodes[b], spec))
    noise = rng.uniform(-1.0, 1.0, (n_windows, len(pairs), 2))
    return [
        [
            {"src": src, "dst": dst,
             "latency_ms": spec.latency_ms * (1.0 + spec.jitter * noise[k, i, 0]),
             "bandwidth_mbps": spec.bandwidth_mbps * (1.0 + spec.jitter * noise[k, i, 1])}
            for i, (src, dst, spec) in enumerate(pairs)
        ]
        for k in range(n_windows)
    ]
