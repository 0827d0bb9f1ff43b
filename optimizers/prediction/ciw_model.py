"""An independent discrete-event simulation of a scenario with ``ciw`` (PyPI, 3.2).

Customers are input events, one customer class per query, arriving Poisson at the query's
entry node. When an event arrives its whole journey is drawn at once — replica choices and
Bernoulli outputs per record, record service times from ``ciw.dists`` — and grouped into
run-to-completion jobs, one per visited node; ``ciw``'s process-based routing then sends the
customer through those nodes (single-server FIFO) and each node serves it for its job's
drawn time. Only journeys whose jobs form a chain are supported (no fork across nodes).
"""

from __future__ import annotations

import math
import random

import ciw
import numpy as np

from optimizers.prediction.scenarios import Op, Scenario, ScenarioError

__all__ = ["ciw_response_times"]


def _record_dist(op: Op) -> ciw.dists.Distribution:
    if op.dist == "exponential":
        return ciw.dists.Exponential(rate=1.0 / op.mean_s)
    if op.dist == "deterministic":
        return ciw.dists.Deterministic(value=op.mean_s)
    # Lognormal with mean m and SCV c²: σ² = ln(1 + c²), μ = ln m − σ²/2.
    s2 = math.log1p(op.scv)
    return ciw.dists.Lognormal(mean=math.log(op.mean_s) - s2 / 2, sd=math.sqrt(s2))


class _JobService(ciw.dists.Distribution):
    """Serves a customer for the next job time drawn for it at arrival."""

    def sample(self, t: float | None = None, ind: ciw.Individual | None = None) -> float:
        return ind.job_times.pop(0)


class _Journey:
    """Draws an event's records and turns them into a chain of (node, job time)."""

    def __init__(self, scenario: Scenario, query: str, node_ids: dict[str, int]) -> None:
        self.scenario = scenario
        self.sources = scenario.query(query).sources
        self.node_ids = node_ids
        self.dists = {o.name: _record_dist(o) for o in scenario.ops}

    def draw(self) -> list[tuple[str, float]]:
        chain: list[list] = []  # [node, time] per job, in visiting order
        keys: dict[tuple[int, str], int] = {}  # (parent job, node) -> job
        pending = [(s, -1) for s in self.sources]  # (operator, parent job)
        while pending:
            op_name, parent = pending.pop(0)
            op = self.scenario.op(op_name)
            node = random.choice(op.nodes)
            if parent >= 0 and chain[parent][0] == node:
                pos = parent
            elif (parent, node) in keys:
                pos = keys[(parent, node)]
            elif parent == len(chain) - 1:
                chain.append([node, 0.0])
                pos = keys[(parent, node)] = len(chain) - 1
            else:
                raise ScenarioError(
                    f"scenario[{self.scenario.name}]: operator {op_name!r} forks the event "
                    "across nodes; the ciw model supports chains of jobs only"
                )
            chain[pos][1] += self.dists[op_name].sample()
            if random.random() < op.selectivity:
                pending += [(s, pos) for s in self.scenario.successors(op_name)]
        return [(n, t) for n, t in chain]

    def route(self, ind: ciw.Individual, simulation: ciw.Simulation) -> list[int]:
        jobs = self.draw()
        ind.job_times = [t for _, t in jobs]
        return [self.node_ids[n] for n, _ in jobs[1:]]


def _entry_node(scenario: Scenario, query: str) -> str:
    nodes = {n for s in scenario.query(query).sources for n in scenario.op(s).nodes}
    if len(nodes) != 1:
        raise ScenarioError(
            f"query[{query}].sources: the ciw model needs one entry node, got {sorted(nodes)}"
        )
    return nodes.pop()


def ciw_response_times(
    scenario: Scenario, duration_s: float, seed: int, warmup_s: float = 0.0
) -> dict[str, np.ndarray]:
    """Response times (ms) per query of the events that arrived after ``warmup_s`` and left
    by ``duration_s``, from one ``ciw`` run seeded with ``seed``.

    Raises
    ------
    ScenarioError
        When a node has ρ ≥ 1, a query has several entry nodes or forks across nodes.
    """
    scenario.check_stable()
    nodes = scenario.nodes
    ids = {n: i + 1 for i, n in enumerate(nodes)}  # ciw numbers nodes from 1
    arrivals, services, routing = {}, {}, {}
    for q in scenario.queries:
        entry = _entry_node(scenario, q.name)
        arrivals[q.name] = [
            ciw.dists.Exponential(rate=q.rate) if n == entry and q.rate > 0 else None
            for n in nodes
        ]
        services[q.name] = [_JobService() for _ in nodes]
        routing[q.name] = ciw.routing.ProcessBased(_Journey(scenario, q.name, ids).route)
    network = ciw.create_network(
        arrival_distributions=arrivals,
        service_distributions=services,
        number_of_servers=[1] * len(nodes),
        routing=routing,
    )
    ciw.seed(seed)
    sim = ciw.Simulation(network)
    sim.simulate_until_max_time(duration_s)
    rts: dict[str, list[float]] = {q.name: [] for q in scenario.queries}
    for ind in sim.nodes[-1].all_individuals:
        recs = ind.data_records
        start = recs[0].arrival_date
        if start >= warmup_s:
            rts[ind.customer_class].append((recs[-1].exit_date - start) * 1000.0)
    return {q: np.asarray(v) for q, v in rts.items()}
