"""Run-to-completion jobs of one input event, enumerated exactly over its random outcomes.

Each record picks a replica uniformly and emits one record to every successor with
probability equal to its selectivity (Bernoulli, as the project simulator draws it). Records
co-located with their parent join the parent's job; a record on another node starts (or
joins) the job keyed by (parent's job, node), which arrives when the parent job departs —
the project simulator's rule (``streamplan/simulation/flow.py``, ``assign_jobs``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from optimizers.prediction.scenarios import Scenario, ScenarioError

__all__ = ["Job", "Outcome", "MAX_OUTCOMES", "outcomes"]

MAX_OUTCOMES = 4096


@dataclass(frozen=True)
class Job:
    """One job: its node, the job it follows (-1 for the event's arrival) and the mean and
    variance of its service time (sum of independent record service times)."""

    node: str
    parent: int
    mean_s: float
    var_s2: float


@dataclass(frozen=True)
class Outcome:
    """One realisation of the random choices of an event, with its probability."""

    prob: float
    jobs: tuple[Job, ...]


Record = tuple[str, str, int]  # (operator, node, parent record index)


def outcomes(scenario: Scenario, query: str) -> list[Outcome]:
    """All outcomes of one input event of ``query`` (probabilities sum to 1).

    Raises
    ------
    ScenarioError
        When the query has more than :data:`MAX_OUTCOMES` outcomes.

    Examples
    --------
    >>> from optimizers.prediction.scenarios import Op, Query, Scenario
    >>> ops = (Op("a", "q", ("n1",), 1.0, selectivity=0.5), Op("b", "q", ("n2",), 2.0))
    >>> s = Scenario("two", ops,
    ...              (("a", "b"),), (Query("q", 10.0, ("a",), ("b",)),))
    >>> [(o.prob, [j.node for j in o.jobs]) for o in outcomes(s, "q")]
    [(0.5, ['n1', 'n2']), (0.5, ['n1'])]
    """
    q = scenario.query(query)
    out: list[Outcome] = []
    for prob, records in _expand(scenario, [(s, -1) for s in q.sources], [], 1.0):
        out.append(Outcome(prob, _jobs(scenario, records)))
        if len(out) > MAX_OUTCOMES:
            raise ScenarioError(
                f"query[{query}]: more than {MAX_OUTCOMES} outcomes per event; simplify it"
            )
    return out


def _expand(
    scenario: Scenario, pending: list[tuple[str, int]], records: list[Record], prob: float
) -> Iterator[tuple[float, list[Record]]]:
    """Breadth-first expansion, so every parent record precedes its children."""
    if not pending:
        yield prob, records
        return
    (op, parent), rest = pending[0], pending[1:]
    spec = scenario.op(op)
    idx = len(records)
    for node, count in Counter(spec.nodes).items():
        recs = [*records, (op, node, parent)]
        p_node = count / len(spec.nodes)
        for emits, p_out in ((True, spec.selectivity), (False, 1.0 - spec.selectivity)):
            if p_out > 0:
                kids = [(s, idx) for s in scenario.successors(op)] if emits else []
                yield from _expand(scenario, rest + kids, recs, prob * p_node * p_out)


def _jobs(scenario: Scenario, records: list[Record]) -> tuple[Job, ...]:
    job_of: list[int] = []
    keys: dict[tuple[int, str], int] = {}
    members: list[list[str]] = []
    parents: list[int] = []
    nodes: list[str] = []
    for op, node, parent in records:
        if parent >= 0 and records[parent][1] == node:
            job = job_of[parent]
        else:
            origin = job_of[parent] if parent >= 0 else -1
            job = keys.setdefault((origin, node), len(members))
            if job == len(members):
                members.append([])
                parents.append(origin)
                nodes.append(node)
        job_of.append(job)
        members[job].append(op)
    return tuple(
        Job(
            node=nodes[j],
            parent=parents[j],
            mean_s=sum(scenario.op(o).mean_s for o in ops),
            var_s2=sum(scenario.op(o).m2_s2 - scenario.op(o).mean_s ** 2 for o in ops),
        )
        for j, ops in enumerate(members)
    )
