"""Graph layer shared by placement methods: operator DAG and resource network (networkx).

The operator DAG carries the application's streams; its source→sink paths are what a
critical-path response time maximises over (seed 003, Eq. (5)). The resource network carries
physical links with delays; placement methods see it as a fully connected logical network
whose link (u, v) follows the shortest-delay route (seed 003, Section 7.2), with d(u, u) = 0.

Examples
--------
>>> dag = operator_dag(["a", "b", "c", "d"], [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
>>> source_sink_paths(dag)
[('a', 'b', 'd'), ('a', 'c', 'd')]
>>> net = resource_network(["x", "y", "z"], [("x", "y", 0.01), ("y", "z", 0.02)])
>>> shortest_delays(net)["x"]["z"]
0.03
>>> shortest_delay_route(net, "x", "z")
['x', 'y', 'z']
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import networkx as nx

__all__ = [
    "GraphError",
    "farthest_node",
    "mean_delay",
    "operator_dag",
    "propagate_rates",
    "resource_network",
    "shortest_delay_route",
    "shortest_delays",
    "sinks",
    "source_sink_paths",
    "sources",
    "waxman_network",
]

DelayMatrix = dict[str, dict[str, float]]


class GraphError(ValueError):
    """A topology that cannot be used: a cycle, an unknown name, a disconnected network."""


# --- operator DAG --------------------------------------------------------------------------
def operator_dag(operators: Iterable[str], edges: Iterable[tuple[str, str]]) -> nx.DiGraph:
    """The operator graph G_dsp; raises :class:`GraphError` naming a cycle or unknown operator."""
    dag = nx.DiGraph()
    dag.add_nodes_from(operators)
    for src, dst in edges:
        for end in (src, dst):
            if end not in dag:
                raise GraphError(f"edge ({src!r}, {dst!r}) names unknown operator {end!r}")
        if src == dst:
            raise GraphError(f"edge ({src!r}, {dst!r}) is a self-loop")
        dag.add_edge(src, dst)
    if not nx.is_directed_acyclic_graph(dag):
        cycle = [u for u, _ in nx.find_cycle(dag)]
        raise GraphError(f"operator graph is not a DAG: cycle {' -> '.join(cycle + cycle[:1])}")
    return dag


def sources(dag: nx.DiGraph) -> list[str]:
    """Operators without incoming streams, in topological order."""
    return [n for n in nx.topological_sort(dag) if dag.in_degree(n) == 0]


def sinks(dag: nx.DiGraph) -> list[str]:
    """Operators without outgoing streams, in topological order."""
    return [n for n in nx.topological_sort(dag) if dag.out_degree(n) == 0]


def source_sink_paths(dag: nx.DiGraph) -> list[tuple[str, ...]]:
    """Π_dsp: every source→sink path (seed 003, Eq. (5)), sorted; a lone operator is a path."""
    paths: list[tuple[str, ...]] = []
    for s in sources(dag):
        if dag.out_degree(s) == 0:
            paths.append((s,))
            continue
        for t in sinks(dag):
            paths.extend(tuple(p) for p in nx.all_simple_paths(dag, s, t))
    return sorted(paths)


def propagate_rates(
    dag: nx.DiGraph, source_rates: Mapping[str, float], selectivity: Mapping[str, float]
) -> tuple[dict[str, float], dict[tuple[str, str], float]]:
    """Input rate λ_i of every operator and rate λ_(i,j) of every stream.

    Each output stream of ``i`` carries λ_i·σ_i (σ defaults to 1) and
    λ_j = Σ_i λ_(i,j) (seed 003, Section 3.2); sources take ``source_rates``.

    >>> dag = operator_dag(["s", "a", "b"], [("s", "a"), ("a", "b")])
    >>> propagate_rates(dag, {"s": 10.0}, {"a": 0.5})
    ({'s': 10.0, 'a': 10.0, 'b': 5.0}, {('s', 'a'): 10.0, ('a', 'b'): 5.0})
    """
    rates: dict[str, float] = {}
    streams: dict[tuple[str, str], float] = {}
    for op in nx.topological_sort(dag):
        preds = list(dag.predecessors(op))
        inflow = sum(streams[(p, op)] for p in preds)
        rates[op] = inflow if preds else source_rates.get(op, 0.0)
        for succ in dag.successors(op):
            streams[(op, succ)] = rates[op] * selectivity.get(op, 1.0)
    return rates, streams


# --- resource network ----------------------------------------------------------------------
def resource_network(
    nodes: Iterable[str], links: Iterable[tuple[str, str, float]]
) -> nx.Graph:
    """Physical network: nodes and undirected links with a ``delay`` (s) attribute."""
    net = nx.Graph()
    net.add_nodes_from(nodes)
    for u, v, delay in links:
        for end in (u, v):
            if end not in net:
                raise GraphError(f"link ({u!r}, {v!r}) names unknown node {end!r}")
        if not (delay >= 0 and math.isfinite(delay)):
            raise GraphError(f"link ({u!r}, {v!r}) has invalid delay {delay!r}")
        net.add_edge(u, v, delay=delay)
    return net


def shortest_delays(net: nx.Graph) -> DelayMatrix:
    """Logical link delays d_(u,v) over shortest-delay routes, d_(u,u) = 0.

    Raises :class:`GraphError` naming the components when the network is disconnected,
    because the model assumes a fully connected logical network (seed 003, Section 3.1).
    """
    if net.number_of_nodes() and not nx.is_connected(net):
        parts = sorted(sorted(c) for c in nx.connected_components(net))
        raise GraphError(f"resource network is disconnected: components {parts}")
    return {u: dict(d) for u, d in nx.all_pairs_dijkstra_path_length(net, weight="delay")}


def shortest_delay_route(net: nx.Graph, u: str, v: str) -> list[str]:
    """Physical route of the logical link (u, v)."""
    return nx.dijkstra_path(net, u, v, weight="delay")


def mean_delay(delays: DelayMatrix) -> float:
    """Mean logical delay over ordered pairs u ≠ v."""
    values = [d for u, row in delays.items() for v, d in row.items() if u != v]
    return sum(values) / len(values) if values else 0.0


def farthest_node(delays: DelayMatrix, origin: str) -> str:
    """The node with the largest shortest-path delay from ``origin`` (ties: by name)."""
    return max(sorted(delays[origin]), key=lambda v: delays[origin][v])


def waxman_network(
    n: int, seed: int, mean_delay_s: float, *, prefix: str = "n"
) -> tuple[list[str], list[tuple[str, str, float]]]:
    """A synthetic geo network: Waxman graph, delay ∝ distance, mean logical delay given.

    Extra nearest-neighbour links join any disconnected parts. Used for network sizes the
    paper does not publish (seed 003 digest §8, item 8).

    >>> nodes, links = waxman_network(6, seed=1, mean_delay_s=0.032)
    >>> round(mean_delay(shortest_delays(resource_network(nodes, links))), 6)
    0.032
    """
    g = nx.waxman_graph(n, beta=0.4, alpha=0.4, seed=seed)
    pos = nx.get_node_attributes(g, "pos")
    comps = [sorted(c) for c in nx.connected_components(g)]
    for a, b in zip(comps, comps[1:], strict=False):
        pairs = [(u, v) for u in a for v in b]
        g.add_edge(*min(pairs, key=lambda e: math.dist(pos[e[0]], pos[e[1]])))
    names = [f"{prefix}{i}" for i in range(n)]
    raw = [(names[u], names[v], math.dist(pos[u], pos[v])) for u, v in g.edges]
    scale = mean_delay_s / mean_delay(shortest_delays(resource_network(names, raw)))
    return names, [(u, v, d * scale) for u, v, d in raw]
