"""Deployments as multisets of nodes: P(S; k) for EDRP and the one-move set of rEDRP.

Examples
--------
>>> all_multisets(["a", "b"], 2)
[('a',), ('b',), ('a', 'a'), ('a', 'b'), ('b', 'b')]
>>> one_move(("a",), ["a", "b", "c"], 2)
[('a',), ('a', 'a'), ('a', 'b'), ('a', 'c'), ('b',), ('c',)]
>>> action(("a",), ("a", "b")), action(("a", "b"), ("b", "c")), action(("a",), ("a",))
('scale-out', 'migrate', 'none')
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import combinations_with_replacement

from .inputs import Multiset

__all__ = ["action", "all_multisets", "as_multiset", "one_move", "placement_of"]


def as_multiset(entries: Iterable[tuple[str, int]]) -> Multiset:
    """[(node, replicas)] → sorted tuple with one entry per replica."""
    return tuple(sorted(u for u, n in entries for _ in range(n)))


def placement_of(ms: Multiset) -> list[tuple[str, int]]:
    """Sorted tuple → [(node, replicas)] in node order."""
    return sorted(Counter(ms).items())


def all_multisets(nodes: Sequence[str], k: int) -> list[Multiset]:
    """P(V_res^i; k) minus the empty multiset: C(n+k, k) − 1 of them (seed 003, §4.1)."""
    ordered = sorted(nodes)
    return [m for size in range(1, k + 1) for m in combinations_with_replacement(ordered, size)]


def one_move(current: Multiset, nodes: Sequence[str], k: int) -> list[Multiset]:
    """rEDRP's P(V_res^i; k; U_0): U_0 and every single scale-out, scale-in or migration.

    seed 003, Section 7.2 (restricted EDRP): |U_0(v) − V(v)| ≤ 1 for every v,
    Σ_v |U_0(v) − V(v)| ≤ 2 and, as the text intends, ||V| − |U_0|| ≤ 1;
    1 ≤ |V| ≤ k and V ⊆ V_res^i. Nodes of U_0 outside ``nodes`` can only be removed.
    """
    allowed = sorted(nodes)
    out: set[Multiset] = set()
    base = list(current)
    if set(base) <= set(allowed):
        out.add(tuple(sorted(base)))
    removals = sorted(set(base))
    if len(base) < k:
        out.update(tuple(sorted([*base, v])) for v in allowed)
    for u in removals:
        rest = list(base)
        rest.remove(u)
        if rest:
            out.add(tuple(sorted(rest)))
        out.update(tuple(sorted([*rest, v])) for v in allowed if v != u)
    return sorted(m for m in out if set(m) <= set(allowed) and 1 <= len(m) <= k)


def action(before: Multiset | None, after: Multiset) -> str:
    """Reconfiguration kind from ``before`` to ``after`` (seed 003, Eq. (25), labels per §8.4)."""
    if before is None:
        return "deploy"
    if tuple(sorted(before)) == tuple(sorted(after)):
        return "none"
    if len(after) > len(before):
        return "scale-out"
    if len(after) < len(before):
        return "scale-in"
    return "migrate"
