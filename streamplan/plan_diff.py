"""What changed between two plans: operator moves, node actions, predicted response times."""

from __future__ import annotations

from dataclasses import dataclass, field

from streamplan.plan import Plan


@dataclass
class PlanDiff:
    """Differences from plan ``a`` to plan ``b``."""

    moved: dict[str, tuple[list[tuple[str, int]], list[tuple[str, int]]]] = field(
        default_factory=dict
    )
    nodes: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    response_time_ms: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    shedding: dict[str, tuple[dict[str, float], dict[str, float]]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """True when the two plans deploy the same way (predictions may still differ)."""
        return not (self.moved or self.nodes or self.shedding)


def _placement(plan: Plan, op: str) -> list[tuple[str, int]]:
    return sorted((e.node, e.replicas) for e in plan.placement.get(op, []))


def diff_plans(a: Plan, b: Plan) -> PlanDiff:
    """Compare two plans of the same app."""
    out = PlanDiff()
    for op in sorted(set(a.placement) | set(b.placement)):
        before, after = _placement(a, op), _placement(b, op)
        if before != after:
            out.moved[op] = (before, after)
    for node in sorted(set(a.nodes) | set(b.nodes)):
        if a.nodes.get(node) != b.nodes.get(node):
            out.nodes[node] = (a.nodes.get(node), b.nodes.get(node))
    for q in sorted(set(a.predicted.response_time_ms) | set(b.predicted.response_time_ms)):
        out.response_time_ms[q] = (
            a.predicted.response_time_ms.get(q), b.predicted.response_time_ms.get(q)
        )
    for op in sorted(set(a.shedding) | set(b.shedding)):
        if a.shedding.get(op, {}) != b.shedding.get(op, {}):
            out.shedding[op] = (a.shedding.get(op, {}), b.shedding.get(op, {}))
    return out
