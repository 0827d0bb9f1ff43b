"""Rebalancing of the active DAGs (seed 004, §4.3): vertex, edge and vertex + edge.

The active DAGs are sorted once by decreasing makespan and visited in that order; each DAG
gets at most one move per pass, so a pass makes at most |G^t| migrations (2|G^t| for
vertex + edge: a full vertex pass, then an edge pass). Sources never move. A move is kept only
when every resource it touches still meets E6 and E7 and L̂ drops by more than 1e-9 s; L̂ and
critical paths are recomputed after every move.

* **Vertex.** On the DAG's critical path take the query with the largest compute latency λ
  (sinks only when their compute counts, ``include_sink_compute``), and move it to the valid
  resource *that computes it faster* and lowers L̂ most (§4.3: "migrated to a resource which
  has a higher compute capacity"; the digest's worked example also takes slower ones, which
  makes vertex moves do edge moves' work). Every allowed resource is scored at once: the
  DAG's new makespan is max(longest path avoiding v, best path through v on p), exact in
  exclusive latency mode; candidates are then tried in that order and verified exactly.
* **Edge.** On the critical path take the edge ⟨u, w⟩ with the largest l + δ_u/β; try u onto
  w's resource and w onto u's resource, and apply the better valid one if it lowers L̂.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .evaluate import State
from .model import DagInfo
from .topset import candidates

__all__ = ["STRATEGIES", "RebalanceResult", "edge_move", "place_vertex", "rebalance", "vertex_move"]

STRATEGIES = ("none", "vertex", "edge", "vertex+edge")
GAIN = 1e-9


@dataclass
class RebalanceResult:
    """Moves made, as (dag, vertex, from resource, to resource), and the L̂ gain (s)."""

    moves: list[tuple[str, str, str, str]] = field(default_factory=list)
    gain_s: float = 0.0
    time_s: float = 0.0


def rebalance(state: State, strategy: str, *, max_tries: int = 8) -> RebalanceResult:
    """Run one rebalancing round with ``strategy`` (one of :data:`STRATEGIES`)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"rebalance: unknown strategy {strategy!r} (known: {list(STRATEGIES)})")
    start = time.perf_counter()
    result = RebalanceResult()
    if strategy == "none" or not state.dags:
        return result
    before = state.total()
    order = sorted(state.dags, key=lambda d: (-state.makespan(d), d))
    passes = {"vertex": [vertex_move], "edge": [edge_move],
              "vertex+edge": [vertex_move, edge_move]}[strategy]
    for step in passes:
        for d in order:
            move = step(state, d, max_tries=max_tries)
            if move is not None:
                result.moves.append(move)
    result.gain_s = before - state.total()
    result.time_s = time.perf_counter() - start
    return result


def _touched(state: State, info: DagInfo, v: int, old: int, new: int) -> set[int]:
    mu = state.mapping[info.name]
    out = {old, new}
    if state.inst.net_j_per_byte.any():
        out.update(int(mu[u]) for u in info.parents[v] if mu[u] >= 0)
        out.update(int(mu[c]) for c in info.children[v] if mu[c] >= 0)
    return out


def _try(state: State, info: DagInfo, v: int, p: int) -> float | None:
    """Move v to p; keep it and return the gain if valid and L̂ drops, else undo → None."""
    before = state.total()
    old = state.move(info.name, v, p)
    if all(state.resource_ok(q) for q in _touched(state, info, v, old, p)):
        gain = before - state.total()
        if gain > GAIN:
            return gain
    state.move(info.name, v, old)
    return None


def _gain_if(state: State, info: DagInfo, v: int, p: int) -> tuple[float, bool]:
    """The L̂ gain of moving v to p and whether the move is valid (the state is left
    unchanged)."""
    before = state.total()
    old = state.move(info.name, v, p)
    ok = all(state.resource_ok(q) for q in _touched(state, info, v, old, p))
    gain = before - state.total()
    state.move(info.name, v, old)
    return gain, ok


def _names(state: State, info: DagInfo, v: int, old: int, new: int) -> tuple[str, ...]:
    res = state.inst.resources
    return (info.name, info.names[v], res[old].name, res[new].name)


def _tails(state: State, info: DagInfo, lat: list[float], link: list[float]) -> list[float]:
    """tail_w: the longest remaining time from w's arrival to the end of the DAG."""
    include = state.inst.options.include_sink_compute
    tail = [lat[w] if include and info.is_sink[w] else 0.0 for w in range(info.n)]
    src, dst = info.esrc.tolist(), info.edst.tolist()
    for e in range(len(src) - 1, -1, -1):
        s, d = src[e], dst[e]
        t = lat[s] + link[e] + tail[d]
        if t > tail[s]:
            tail[s] = t
    return tail


def _longest_avoiding(state: State, info: DagInfo, v: int, lat: list[float], link: list[float]
                      ) -> float:
    """The longest source→sink path that does not pass through v."""
    A = [0.0 if info.is_source[w] else -np.inf for w in range(info.n)]
    A[v] = -np.inf
    for e, (s, d) in enumerate(zip(info.esrc.tolist(), info.edst.tolist(), strict=True)):
        if s == v or d == v:
            continue
        a = A[s] + lat[s] + link[e]
        if a > A[d]:
            A[d] = a
    include = state.inst.options.include_sink_compute
    ends = [A[s] + (lat[s] if include else 0.0) for s in np.flatnonzero(info.is_sink).tolist()
            if s != v]
    return max(ends, default=0.0)


def vertex_move(state: State, dag: str, *, max_tries: int = 8):
    """One vertex-rebalancing move on ``dag``; returns the move or None."""
    info = state.dags[dag]
    mu = state.mapping[dag]
    exclusive = state.inst.options.latency_mode == "exclusive"
    if exclusive and state.memo.get(("vertex", dag)) == mu.tobytes():
        return None  # no resource could shorten this mapping last time, and it is unchanged
    include_sink = state.inst.options.include_sink_compute
    path = [v for v in state.critical_path(dag)
            if not info.is_source[v] and (include_sink or not info.is_sink[v])]
    if not path:
        return None
    latv, linkv = state.vectors(dag)
    lat, link = latv.tolist(), linkv.tolist()
    v = max(path, key=lambda x: (lat[x], -x))
    old = int(mu[v])
    arrival = np.asarray(state.arrivals(dag)[0])
    tail = _tails(state, info, lat, link)
    avoid = _longest_avoiding(state, info, v, lat, link)
    state.remove(dag, v)
    allowed, head, score, valid, _ = candidates(state, info, v, arrival)
    faster = score - head < lat[v] - GAIN  # score - head: v's compute latency on p
    # score = head + own latency on p; add the best way from p to the end of the DAG
    inst = state.inst
    through = score.copy() if (include_sink or not info.is_sink[v]) else head.copy()
    if info.children[v]:
        best = np.full(len(allowed), -np.inf)
        for c in info.children[v]:
            pc = mu[c]
            t = (inst.latency_s[allowed, pc] + info.delta[v] * inst.inv_bandwidth[allowed, pc]
                 + tail[c])
            np.maximum(best, t, out=best)
        through = through + best
    estimate = np.maximum(through, avoid)
    state.add(dag, v, old)
    current = state.makespan(dag)
    if exclusive and not (estimate[faster] < current - GAIN).any():
        # exact in exclusive mode: the gain depends on this DAG's mapping only
        state.memo[("vertex", dag)] = mu.tobytes()
        return None
    valid &= faster
    order = np.flatnonzero(valid)
    order = order[np.lexsort((allowed[order], estimate[order]))][:max_tries]
    for i in order:
        if estimate[i] >= current - GAIN and exclusive:
            break
        p = int(allowed[i])
        if _try(state, info, v, p) is not None:
            return _names(state, info, v, old, p)
    return None


def edge_move(state: State, dag: str, *, max_tries: int = 8):
    """One edge-rebalancing move on ``dag``; returns the move or None."""
    info = state.dags[dag]
    mu = state.mapping[dag]
    exclusive = state.inst.options.latency_mode == "exclusive"
    if exclusive and state.memo.get(("edge", dag)) == mu.tobytes():
        return None  # neither end of the critical edge could gain last time; unchanged since
    path = state.critical_path(dag)
    edges = list(zip(path, path[1:], strict=False))
    u, w = max(edges, key=lambda e: (state.edge_cost(info, *e), -e[0], -e[1]))
    pu, pw = int(mu[u]), int(mu[w])
    options = []
    if state.edge_cost(info, u, w) > 0:
        if not info.is_source[u] and pw in set(info.allowed[u].tolist()):
            options.append((u, pw, pu))
        if not info.is_source[w] and pu in set(info.allowed[w].tolist()):
            options.append((w, pu, pw))
    best, any_gain = None, False
    for x, target, origin in options:
        gain, ok = _gain_if(state, info, x, target)
        any_gain |= gain > GAIN
        if ok and gain > GAIN and (best is None or gain > best[0] + 1e-15):
            best = (gain, x, target, origin)
    if best is None:
        if exclusive and not any_gain:  # exact: the gains depend on this DAG's mapping only
            state.memo[("edge", dag)] = mu.tobytes()
        return None
    _, x, target, origin = best
    state.move(dag, x, target)
    return _names(state, info, x, origin, target)


def place_vertex(state: State, dag: str, v: int, *, avoid: int | None = None) -> bool:
    """Place the unplaced vertex ``v`` (its ancestors placed) on the valid resource that keeps
    its DAG's makespan smallest, never on ``avoid``; False when no resource is valid.

    Used when a battery runs down and queries are evicted; unplaced relatives are ignored in
    the estimate.
    """
    info = state.dags[dag]
    mu = state.mapping[dag]
    inst = state.inst
    arrival = np.zeros(info.n)
    for w in info.order:
        if mu[w] < 0:
            continue
        arrival[w] = max((arrival[u] + state.lat(info, u, mu[u]) + state.edge_cost(info, u, w)
                          for u in info.parents[w] if mu[u] >= 0), default=0.0)
    tail = np.zeros(info.n)
    for w in reversed(info.order):
        if mu[w] < 0 or info.is_sink[w]:
            continue
        tail[w] = max((state.lat(info, w, mu[w]) + state.edge_cost(info, w, c) + tail[c]
                       for c in info.children[w] if mu[c] >= 0), default=0.0)
    allowed, head, score, valid, _ = candidates(state, info, v, arrival)
    total = score.copy()
    placed = [c for c in info.children[v] if mu[c] >= 0]
    if placed:
        best = np.full(len(allowed), -np.inf)
        for c in placed:
            pc = mu[c]
            np.maximum(best, inst.latency_s[allowed, pc]
                       + info.delta[v] * inst.inv_bandwidth[allowed, pc] + tail[c], out=best)
        total = total + best
    if avoid is not None:
        valid &= allowed != avoid
    order = np.flatnonzero(valid)
    for i in order[np.lexsort((allowed[order], total[order]))]:
        p = int(allowed[i])
        state.add(dag, v, p)
        if all(state.resource_ok(q) for q in _touched(state, info, v, p, p)):
            return True
        state.remove(dag, v)
    return False
