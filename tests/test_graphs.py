"""Graph layer: operator DAG, source→sink paths, rate propagation, shortest-delay routes."""

from __future__ import annotations

import itertools

import pytest

from optimizers.graphs import (
    GraphError,
    farthest_node,
    mean_delay,
    operator_dag,
    propagate_rates,
    resource_network,
    shortest_delay_route,
    shortest_delays,
    sinks,
    source_sink_paths,
    sources,
    waxman_network,
)
from streamplan.config import load_config
from streamplan.settings import REPO_ROOT

DEBS = REPO_ROOT / "configs" / "debs2015_edrp.yaml"


@pytest.fixture(scope="module")
def debs():
    return load_config(DEBS)


def test_diamond_paths_sources_and_sinks() -> None:
    dag = operator_dag("abcde", [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("e", "d")])
    assert sorted(sources(dag)) == ["a", "e"]
    assert sinks(dag) == ["d"]
    assert source_sink_paths(dag) == [("a", "b", "d"), ("a", "c", "d"), ("e", "d")]


def test_lone_operator_is_its_own_path() -> None:
    assert source_sink_paths(operator_dag(["x"], [])) == [("x",)]


def test_debs_topology_has_two_source_sink_paths(debs) -> None:
    dag = operator_dag([o.name for o in debs.operators], debs.edges)
    paths = source_sink_paths(dag)
    assert len(paths) == 2
    assert {p[0] for p in paths} == {"data_source"} and {p[-1] for p in paths} == {"global_rank"}
    assert {"metronome", "compute_route_id"} == {p[3] for p in paths}


def test_cycle_is_rejected_with_the_cycle_named() -> None:
    with pytest.raises(GraphError, match="not a DAG: cycle .*a.*b.*c"):
        operator_dag("abc", [("a", "b"), ("b", "c"), ("c", "a")])


@pytest.mark.parametrize(
    ("edges", "match"),
    [([("a", "zz")], "unknown operator 'zz'"), ([("a", "a")], "self-loop")],
)
def test_bad_edges_are_rejected(edges, match) -> None:
    with pytest.raises(GraphError, match=match):
        operator_dag("ab", edges)


def test_rates_follow_selectivities_and_add_up_at_joins() -> None:
    dag = operator_dag("sabj", [("s", "a"), ("s", "b"), ("a", "j"), ("b", "j")])
    rates, streams = propagate_rates(dag, {"s": 10.0}, {"a": 2.0, "b": 0.5})
    assert rates == {"s": 10.0, "a": 10.0, "b": 10.0, "j": 25.0}
    assert streams[("a", "j")] == 20.0 and streams[("b", "j")] == 5.0


def test_shortest_delays_route_over_the_faster_path() -> None:
    net = resource_network("uvw", [("u", "v", 0.010), ("v", "w", 0.010), ("u", "w", 0.050)])
    d = shortest_delays(net)
    assert d["u"]["w"] == pytest.approx(0.020)
    assert d["w"]["u"] == pytest.approx(0.020)
    assert all(d[x][x] == 0 for x in "uvw")
    assert shortest_delay_route(net, "u", "w") == ["u", "v", "w"]


def test_closure_satisfies_the_triangle_inequality(debs) -> None:
    links = [(k["src"], k["dst"], k["delay_ms"]) for k in debs.method.params["network"]["links"]]
    d = shortest_delays(resource_network([n.name for n in debs.nodes], links))
    for a, b, c in itertools.permutations(d, 3):
        assert d[a][c] <= d[a][b] + d[b][c] + 1e-9


def test_disconnected_network_names_its_components() -> None:
    net = resource_network("abcd", [("a", "b", 0.01), ("c", "d", 0.01)])
    with pytest.raises(GraphError, match=r"disconnected.*\['a', 'b'\].*\['c', 'd'\]"):
        shortest_delays(net)


@pytest.mark.parametrize(
    ("links", "match"), [([("a", "q", 0.1)], "unknown node 'q'"), ([("a", "b", -1.0)], "delay")]
)
def test_bad_links_are_rejected(links, match) -> None:
    with pytest.raises(GraphError, match=match):
        resource_network("ab", links)


@pytest.mark.parametrize("n", [8, 15, 24])
def test_waxman_networks_are_connected_with_the_target_mean_delay(n: int) -> None:
    nodes, links = waxman_network(n, seed=n, mean_delay_s=0.032)
    d = shortest_delays(resource_network(nodes, links))  # raises if disconnected
    assert len(d) == n
    assert mean_delay(d) == pytest.approx(0.032)
    assert waxman_network(n, seed=n, mean_delay_s=0.032) == (nodes, links)


def test_debs_network_matches_the_paper_and_the_pins(debs) -> None:
    """15 nodes, 32 ms mean delay (Section 7.2); globalRank sits farthest from the source."""
    params = debs.method.params
    links = [(lk["src"], lk["dst"], lk["delay_ms"] / 1e3) for lk in params["network"]["links"]]
    d = shortest_delays(resource_network([n.name for n in debs.nodes], links))
    assert len(d) == 15
    assert mean_delay(d) == pytest.approx(0.032, abs=5e-5)
    (src_pin,) = params["operators"]["data_source"]["pin"]
    (sink_pin,) = params["operators"]["global_rank"]["pin"]
    assert farthest_node(d, src_pin) == sink_pin
