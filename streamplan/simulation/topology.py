"""The simulated system: operators in topological order, their instances, nodes and queries."""

from __future__ import annotations

from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter

import numpy as np

from streamplan.config import AppConfig, NodeType, ServiceSpec


@dataclass(frozen=True)
class Topology:
    """Index-based view of an application under one placement (operators in topological order)."""

    ops: list[str]
    preds: list[list[int]]
    inst_node: list[np.ndarray]  # per operator: node index of each instance (replica)
    inst_offset: np.ndarray  # per operator: global index of its instance 0
    nodes: list[str]
    types: list[NodeType]
    queries: list[str]
    sources: list[list[int]]  # per query: source operators
    is_sink: np.ndarray  # bool [query, operator]
    services: list[ServiceSpec]
    selectivity: np.ndarray
    event_types: list[str]  # every type named in ``simulation.output_types``, sorted
    output_mix: list[np.ndarray | None]  # per operator: share of each event type, or None

    @property
    def n_instances(self) -> int:
        return int(self.inst_offset[-1] + len(self.inst_node[-1]))

    def instances(self) -> list[tuple[int, int, int]]:
        """(operator, replica index, node) of every global instance, in global order."""
        return [
            (o, r, int(n)) for o, nodes in enumerate(self.inst_node) for r, n in enumerate(nodes)
        ]


def build_topology(
    config: AppConfig, placement: dict[str, list[tuple[str, int]]], node_types: dict[str, str]
) -> Topology:
    """Validate the placement against the configuration and index everything."""
    if config.simulation is None:
        raise ValueError(f"app {config.app!r} has no 'simulation' section")
    ops = _operator_order(config)
    pos = {o: i for i, o in enumerate(ops)}
    nodes = list(node_types)
    types = _node_types(config, node_types)
    inst_node = _instances(ops, placement, {n: i for i, n in enumerate(nodes)})
    queries = [q.name for q in config.queries]
    is_sink = np.zeros((len(queries), len(ops)), dtype=bool)
    for qi, q in enumerate(config.queries):
        is_sink[qi, [pos[o] for o in q.sinks]] = True
    preds: list[list[int]] = [[] for _ in ops]
    for a, b in config.edges:
        preds[pos[b]].append(pos[a])
    sim = config.simulation
    return Topology(
        ops=ops,
        preds=preds,
        inst_node=inst_node,
        inst_offset=np.cumsum([0] + [len(i) for i in inst_node[:-1]]),
        nodes=nodes,
        types=types,
        queries=queries,
        sources=[[pos[o] for o in q.sources] for q in config.queries],
        is_sink=is_sink,
        services=[sim.service[o] for o in ops],
        selectivity=np.array([sim.selectivity.get(o, 1.0) for o in ops]),
        event_types=(etypes := sorted({t for mix in sim.output_types.values() for t in mix})),
        output_mix=[
            np.array([sim.output_types[o].get(t, 0.0) for t in etypes])
            if o in sim.output_types else None
            for o in ops
        ],
    )


def _operator_order(config: AppConfig) -> list[str]:
    graph: dict[str, list[str]] = {o.name: [] for o in config.operators}
    for a, b in config.edges:
        graph[b].append(a)
    try:
        return list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        cycle = exc.args[1]
        raise ValueError(f"operator graph of app {config.app!r} has a cycle: {cycle}") from exc


def _node_types(config: AppConfig, node_types: dict[str, str]) -> list[NodeType]:
    by_name = {t.name: t for t in config.node_types}
    unknown = {n: t for n, t in node_types.items() if t not in by_name}
    if unknown:
        raise ValueError(f"node_types: unknown node types {unknown} (known: {sorted(by_name)})")
    return [by_name[t] for t in node_types.values()]


def _instances(
    ops: list[str], placement: dict[str, list[tuple[str, int]]], node_index: dict[str, int]
) -> list[np.ndarray]:
    missing, extra = set(ops) - set(placement), set(placement) - set(ops)
    if missing or extra:
        raise ValueError(
            f"placement must cover exactly the operators: missing {sorted(missing)}, "
            f"unknown {sorted(extra)}"
        )
    out = []
    for op in ops:
        entries = placement[op]
        for node, replicas in entries:
            if node not in node_index:
                raise ValueError(f"placement[{op}]: node {node!r} is not in node_types")
            if replicas < 1:
                raise ValueError(f"placement[{op}]: replicas must be >= 1, got {replicas}")
        if not entries:
            raise ValueError(f"placement[{op}] is empty")
        out.append(np.repeat([node_index[n] for n, _ in entries], [r for _, r in entries]))
    return out
