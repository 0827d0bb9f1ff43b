"""The fidelity benchmark's scenario classes (issue 10), at unit rates; scale them with
:meth:`Scenario.at_utilisation`.

Windowing follows seed 000's experiment (digest §5–§6): Op1 keeps 64-event windows sliding by
32, so it emits a window once every 32 events — drawn here as Bernoulli(1/32), the project
simulator's selectivity law — and Op2/Op3 work on a whole window (Op2's cost is 64 events'
worth).
"""

from __future__ import annotations

from optimizers.prediction.scenarios import Op, Query, Scenario

__all__ = ["CLASSES", "scenario_classes"]

WINDOW, SLIDE = 64, 32


def _single(scv: float) -> Scenario:
    return Scenario(
        f"single_scv{scv:g}", (Op("op", "q", ("n1",), 2.0, scv=scv),), (),
        (Query("q", 1.0, ("op",), ("op",)),),
    )


def _shared(k: int) -> Scenario:
    means = (1.0, 2.0, 4.0, 0.5, 3.0)
    scvs = (1.0, 0.25, 4.0, 1.0, 0.0)
    rates = (6.0, 2.0, 1.0, 4.0, 1.5)
    ops = tuple(Op(f"op{i}", f"q{i}", ("vm",), means[i], scv=scvs[i]) for i in range(k))
    queries = tuple(Query(f"q{i}", rates[i], (f"op{i}",), (f"op{i}",)) for i in range(k))
    return Scenario(f"shared_vm_{k}", ops, (), queries)


def _chain() -> Scenario:
    ops = (
        Op("a", "q", ("n1",), 1.0, scv=1.0, selectivity=0.8),
        Op("b", "q", ("n2",), 1.5, scv=0.25, selectivity=0.5),
        Op("c", "q", ("n3",), 2.0, scv=4.0),
    )
    return Scenario("chain3", ops, (("a", "b"), ("b", "c")), (Query("q", 1.0, ("a",), ("c",)),))


def _diamond() -> Scenario:
    """a forks to b and c (both on n2), which join at d on n3."""
    ops = (
        Op("a", "q", ("n1",), 1.0, selectivity=0.7),
        Op("b", "q", ("n2",), 0.8),
        Op("c", "q", ("n2",), 0.6, scv=0.25),
        Op("d", "q", ("n3",), 0.7),
    )
    edges = (("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"))
    return Scenario("diamond", ops, edges, (Query("q", 1.0, ("a",), ("d",)),))


def _windowed(spread: bool) -> Scenario:
    nodes = ("n1", "n2", "n3") if spread else ("vm", "vm", "vm")
    ops = (
        Op("window", "q", (nodes[0],), 0.2, selectivity=1.0 / SLIDE),
        Op("map", "q", (nodes[1],), WINDOW * 0.05, scv=0.25),
        Op("match", "q", (nodes[2],), 2.0),
    )
    name = "windowed_3vm" if spread else "windowed_epn"
    edges = (("window", "map"), ("map", "match"))
    return Scenario(name, ops, edges, (Query("q", 1.0, ("window",), ("match",)),))


def _replicated() -> Scenario:
    ops = (
        Op("parse", "q", ("n0",), 1.0, scv=0.25),
        Op("heavy", "q", ("n1", "n2", "n3"), 2.5),
    )
    query = Query("q", 1.0, ("parse",), ("heavy",))
    return Scenario("replicated3", ops, (("parse", "heavy"),), (query,))


def scenario_classes() -> dict[str, list[Scenario]]:
    """Benchmark class -> its scenarios (issue 10, classes 1–5)."""
    return {
        "one_station": [_single(0.25), _single(1.0), _single(4.0)],
        "shared_vm": [_shared(2), _shared(5)],
        "chain_dag": [_chain(), _diamond()],
        "windowed": [_windowed(False), _windowed(True)],
        "replicated": [_replicated()],
    }


CLASSES = tuple(scenario_classes())
