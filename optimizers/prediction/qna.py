"""Per-node decomposition with two-moment flows (Whitt's QNA) along each event's jobs.

Every node is a GI/G/1 FIFO station fed by job flows, one per (query, node, upstream node).
Job service moments are exact for the run-to-completion rule (:mod:`jobs`: a job's service
is the sum of its records', so windowing — a window operator firing with probability
1/slide and a per-window cost — enters through the job's true second moment). Flows leave a
node with the QNA departure SCV, are thinned by the routing probability and superposed at
the next node (:mod:`flows`). An event's response time is the expected length of the
critical path of its jobs, each job adding its node's mean wait and its own mean service.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter

from optimizers.prediction.base import RtPrediction
from optimizers.prediction.flows import departure_scv, gg1_wait, split_scv, superpose_scv
from optimizers.prediction.jobs import Outcome, outcomes
from optimizers.prediction.scenarios import Scenario, ScenarioError

__all__ = ["NodeState", "QnaDecomposition", "node_states"]

Stream = tuple[str, str, str | None]  # (query, node, upstream node or None for the input)


@dataclass(frozen=True)
class NodeState:
    """Aggregate job flow at one node and its mean FIFO wait (s)."""

    rate: float
    service_mean_s: float
    service_scv: float
    arrival_scv: float
    rho: float
    wait_s: float


def _streams(
    scenario: Scenario, events: dict[str, list[Outcome]]
) -> tuple[dict[Stream, float], dict[str, float], dict[str, float]]:
    """Job rate per stream, and per node the rate-weighted first and second service moments."""
    rate: dict[Stream, float] = defaultdict(float)
    m1: dict[str, float] = defaultdict(float)
    m2: dict[str, float] = defaultdict(float)
    for q in scenario.queries:
        for out in events[q.name]:
            w = q.rate * out.prob
            for job in out.jobs:
                up = out.jobs[job.parent].node if job.parent >= 0 else None
                rate[(q.name, job.node, up)] += w
                m1[job.node] += w * job.mean_s
                m2[job.node] += w * (job.var_s2 + job.mean_s**2)
    return rate, m1, m2


def node_states(scenario: Scenario, events: dict[str, list[Outcome]]) -> dict[str, NodeState]:
    """QNA traffic and wait at every node carrying jobs, nodes visited in flow order.

    Raises
    ------
    ScenarioError
        When job flows between nodes form a cycle.
    """
    rate, m1, m2 = _streams(scenario, events)
    graph: dict[str, set[str]] = defaultdict(set)
    for _, node, up in rate:
        graph[node].update([up] if up else [])
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        cycle = exc.args[1]
        raise ScenarioError(f"scenario[{scenario.name}]: job flows form a cycle {cycle}") from exc
    class_rate: dict[tuple[str, str], float] = defaultdict(float)
    for (q, node, _), r in rate.items():
        class_rate[(q, node)] += r
    states: dict[str, NodeState] = {}
    for node in order:
        mine = {s: r for s, r in rate.items() if s[1] == node and r > 0}
        lam = sum(mine.values())
        if lam <= 0:  # only idle queries pass here: no wait
            states[node] = NodeState(0.0, 0.0, 1.0, 1.0, 0.0, 0.0)
            continue
        b = m1[node] / lam
        cs2 = max(m2[node] / lam / b**2 - 1.0, 0.0)
        ca2 = superpose_scv(list(mine.values()), [_arrival_scv(s, r, states, class_rate)
                                                  for s, r in mine.items()])
        rho = lam * b
        states[node] = NodeState(lam, b, cs2, ca2, rho, gg1_wait(rho, b, ca2, cs2))
    return states


def _arrival_scv(
    stream: Stream, r: float, states: dict[str, NodeState], class_rate: dict[tuple[str, str], float]
) -> float:
    """Input flows are Poisson (thinning keeps them so); a flow from node u is query q's
    share of u's departures, thinned again by the probability that a job at u has one here."""
    q, _, up = stream
    if up is None:
        return 1.0
    src = states[up]
    if src.rho >= 1.0:
        return 1.0  # unstable upstream: the query's prediction is inf anyway
    c2_out = departure_scv(src.rho, src.arrival_scv, src.service_scv)
    c2_class = split_scv(class_rate[(q, up)] / src.rate, c2_out)
    return split_scv(r / class_rate[(q, up)], c2_class)


def _critical_path_s(out: Outcome, states: dict[str, NodeState]) -> float:
    finish: list[float] = []
    for job in out.jobs:
        start = finish[job.parent] if job.parent >= 0 else 0.0
        finish.append(start + states[job.node].wait_s + job.mean_s)
    return max(finish, default=0.0)


class QnaDecomposition:
    """Per-node GI/G/1 decomposition with QNA flows; see the module docstring."""

    name = "qna_decomposition"

    def predict(self, scenario: Scenario) -> RtPrediction:
        """Per-query mean response time in ms; ``inf`` with a reason when a node it uses
        has ρ ≥ 1."""
        events = {q.name: outcomes(scenario, q.name) for q in scenario.queries}
        states = node_states(scenario, events)
        rt: dict[str, float] = {}
        unstable: dict[str, str] = {}
        for q, outs in events.items():
            hot = sorted({j.node for o in outs for j in o.jobs if states[j.node].rho >= 1.0})
            if hot:
                rt[q] = math.inf
                unstable[q] = ", ".join(f"node {n!r} has rho={states[n].rho:.4g} >= 1" for n in hot)
                continue
            rt[q] = 1000.0 * sum(o.prob * _critical_path_s(o, states) for o in outs)
        return RtPrediction(self.name, rt, unstable)

    def job_moments(self, scenario: Scenario, query: str) -> tuple[float, float]:
        """Exact moments of the per-event work on one node (a random sum over the event's
        outcomes, :mod:`jobs`); 0 for an event that brings no job.

        Raises
        ------
        ScenarioError
            When the query's operators are on more than one node.
        """
        nodes = {n for o in scenario.ops if o.query == query for n in o.nodes}
        if len(nodes) != 1:
            raise ScenarioError(f"query[{query}]: job moments need one node, got {sorted(nodes)}")
        outs = outcomes(scenario, query)
        mean = sum(o.prob * j.mean_s for o in outs for j in o.jobs)
        m2 = sum(o.prob * (j.var_s2 + j.mean_s**2) for o in outs for j in o.jobs)
        return mean, m2
