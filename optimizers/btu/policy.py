"""Seed 002's BTU-aware policy: Alg. 1 (up-trigger), Alg. 2 (host suitability), Alg. 3
(scale-down utility), the upscaling procedure (Fig. 4) and the host release procedure
(Fig. 5), with the digest's repairs (§8).

The formulas are plain functions so they can be checked on the digest's numbers (§10):

>>> round(regression_prediction([600, 650, 700, 740]), 6)   # oldest first, x = 1..N
790.0
>>> uptrigger(Observation(d_ms=740, queue=80, history_ms=(600, 650, 700, 740)), 750, BtuParams())
True
>>> uptrigger(Observation(d_ms=740, queue=30, history_ms=(600, 650, 700, 740)), 750, BtuParams())
False
>>> round(host_score(2000, 3000, 4096, 7168, 660, 452, cached=False, cf=0.01), 6)
0.009346
>>> round(host_score(3000, 1500, 4096, 7168, 660, 452, cached=True, cf=0.01), 7)
0.0012809
>>> host_score(500, 6000, 4096, 7168, 660, 452, cached=False, cf=0.01)
-1.0
>>> round(utility(6, 1, 6, d_ms=540, slo_ms=600, s_o=3, s_total=12, queue=0,
...               params=BtuParams()), 5)
100.84991
>>> utility(1, 1, 6, d_ms=540, slo_ms=600, s_o=3, s_total=12, queue=0, params=BtuParams())
-1.0
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from .inputs import BtuInputError, BtuParams
from .state import Action, Cluster, Host, Observation

__all__ = [
    "btu_step",
    "down_utilities",
    "host_score",
    "place",
    "regression_prediction",
    "release_step",
    "upscale",
    "uptrigger",
    "utility",
]

Trace = list[dict[str, Any]] | None


# --- Alg. 1 --------------------------------------------------------------------------------
def regression_prediction(history_ms: Sequence[float]) -> float:
    """Least-squares line through (x, o_d) with x = 1..N oldest first, evaluated at N + 1.

    With fewer than two points there is no trend: the last value (or 0) is returned.
    """
    n = len(history_ms)
    if n == 0:
        return 0.0
    if n == 1:
        return float(history_ms[0])
    x_bar = (n + 1) / 2
    y_bar = sum(history_ms) / n
    sxy = sum((x - x_bar) * (y - y_bar) for x, y in enumerate(history_ms, start=1))
    sxx = sum((x - x_bar) ** 2 for x in range(1, n + 1))
    beta = sxy / sxx
    alpha = y_bar - beta * x_bar
    return alpha + beta * (n + 1)


def uptrigger(obs: Observation, slo_ms: float, params: BtuParams) -> bool:
    """Alg. 1: late now or trending late (regression over the last N points), *and* a
    backlog above ``scaling_threshold``."""
    late = obs.d_ms > slo_ms
    history = obs.history_ms[-params.regression_n :]
    if not late and len(history) >= 2:
        late = regression_prediction(history) > slo_ms
    return late and obs.queue > params.scaling_threshold


# --- Alg. 2 --------------------------------------------------------------------------------
def host_score(
    free_cpu: float,
    free_mem: float,
    cap_cpu: float,
    cap_mem: float,
    o_cpu: float,
    o_mem: float,
    *,
    cached: bool,
    cf: float,
) -> float:
    """Alg. 2 suitability of a host for one instance: −1 if it does not fit, else
    ``|cpu left share − mem left share| / f`` (× CF when the image is cached); lower wins."""
    f = min(free_cpu / o_cpu, free_mem / o_mem)
    if f < 1:
        return -1.0
    diff = abs((free_cpu - o_cpu) / cap_cpu - (free_mem - o_mem) / cap_mem)
    score = diff / f
    return score * cf if cached else score


# --- Alg. 3 --------------------------------------------------------------------------------
def utility(
    n_o: int,
    n_min: int,
    n_max: int,
    *,
    d_ms: float,
    slo_ms: float,
    s_o: int,
    s_total: int,
    queue: float,
    params: BtuParams,
) -> float:
    """Alg. 3: value of removing one instance of o (> 0: may lose one); −1 if o_# < 2."""
    if n_o < 2:
        return -1.0
    w1, w2, w3, w4 = params.weights
    inst = (n_o - n_min) / (n_max - n_min) if n_max > n_min else 0.0
    delay = (d_ms / slo_ms) * (1 + params.penalty)
    scal = s_o / s_total if s_total > 0 else 0.0
    ql = params.empty_queue_bonus if queue < 1 else 0.0
    return 1 + w1 * inst + w2 * ql - w3 * delay - w4 * scal


def down_utilities(
    cluster: Cluster, observations: Mapping[str, Observation], params: BtuParams
) -> dict[str, float]:
    """Alg. 3 for every operator type on the current deployment."""
    counts = cluster.counts()
    lo, hi = min(counts.values()), max(counts.values())
    s_total = sum(cluster.scaling_actions.get(o, 0) for o in cluster.types)
    return {
        o: utility(
            counts[o],
            lo,
            hi,
            d_ms=observations[o].d_ms,
            slo_ms=t.slo_ms,
            s_o=cluster.scaling_actions.get(o, 0),
            s_total=s_total,
            queue=observations[o].queue,
            params=params,
        )
        for o, t in cluster.types.items()
    }


# --- placement helpers ---------------------------------------------------------------------
def _start_latency(host: Host, op: str, params: BtuParams) -> float:
    cached = op in host.images
    return params.instance_start_cached_s if cached else params.instance_start_uncached_s


def place(cluster: Cluster, host: Host, op: str, now: float, params: BtuParams) -> float:
    """Reserve one instance of ``op`` on ``host``; returns when it serves."""
    ready = max(now, host.ready_at) + _start_latency(host, op, params)
    host.add(op)
    return ready


def best_host(
    cluster: Cluster,
    op: str,
    params: BtuParams,
    *,
    exclude: Collection[str] = (),
    free: Mapping[str, tuple[float, float]] | None = None,
) -> Host | None:
    """Lowest Alg. 2 score among feasible hosts; ties by more free memory, then lease order.

    ``free`` overrides a host's free capacity (used by release simulations).
    """
    t = cluster.types[op]
    best: tuple[float, float, int] | None = None
    choice = None
    for k, h in enumerate(cluster.hosts.values()):
        if h.name in exclude:
            continue
        fc, fm = free[h.name] if free is not None and h.name in free else h.free(cluster.types)
        s = host_score(fc, fm, h.vm.cpu, h.vm.mem, t.cpu, t.mem,
                       cached=op in h.images, cf=params.cached_factor)
        if s < 0:
            continue
        key = (s, -fm, k)
        if best is None or key < best:
            best, choice = key, h
    return choice


# --- upscaling procedure (Fig. 4) ------------------------------------------------------------
def upscale(
    cluster: Cluster,
    op: str,
    now: float,
    observations: Mapping[str, Observation],
    params: BtuParams,
    *,
    trace: Trace = None,
) -> list[Action]:
    """Add one instance of ``op``: best leased host, else free room by dropping one instance
    of the type with the largest positive utility, else lease a VM."""
    actions: list[Action] = []
    host = best_host(cluster, op, params)
    if host is not None:
        ready = place(cluster, host, op, now, params)
        cluster.note_scaling(op)
        _log(trace, "place", op=op, host=host.name, now=now)
        return [Action("up", now, op=op, host=host.name, ready_at=ready, reason="alg2")]
    utilities = down_utilities(cluster, observations, params)
    victims = sorted(
        (o for o, u in utilities.items() if u > 0 and o != op and params.free_room),
        key=lambda o: (-utilities[o], o),
    )
    t = cluster.types[op]
    for v in victims:
        tv = cluster.types[v]
        free = {}
        for h in cluster.hosts.values():
            if h.instances.get(v, 0) > 0:
                fc, fm = h.free(cluster.types)
                free[h.name] = (fc + tv.cpu, fm + tv.mem)
        if not free:
            continue
        exclude = [h for h in cluster.hosts if h not in free]
        host = best_host(cluster, op, params, exclude=exclude, free=free)
        if host is None:
            continue
        host.remove(v)
        cluster.note_scaling(v)
        actions.append(Action("down", now, op=v, host=host.name, reason=f"free room for {op}"))
        ready = place(cluster, host, op, now, params)
        cluster.note_scaling(op)
        actions.append(Action("up", now, op=op, host=host.name, ready_at=ready, reason="alg3"))
        _log(trace, "replace", op=op, victim=v, utility=utilities[v], host=host.name, now=now)
        return actions
    host = cluster.lease(now, params.vm_start_s)
    actions.append(Action("lease", now, host=host.name, ready_at=host.ready_at))
    ready = place(cluster, host, op, now, params)
    cluster.note_scaling(op)
    actions.append(Action("up", now, op=op, host=host.name, ready_at=ready, reason="lease"))
    _log(trace, "lease", op=op, host=host.name, now=now, cpu=t.cpu, mem=t.mem)
    return actions


# --- host release procedure (Fig. 5) ---------------------------------------------------------
def release_candidates(cluster: Cluster, now: float, params: BtuParams) -> list[Host]:
    """Hosts whose paid BTU ends within the release window, soonest first."""
    hosts = [
        h
        for h in cluster.hosts.values()
        if 0 <= h.time_left(now) < params.release_window_s(h.vm.btu_s) - 1e-9
        and h.ready_at <= now
    ]
    order = {name: k for k, name in enumerate(cluster.hosts)}
    return sorted(hosts, key=lambda h: (h.time_left(now), order[h.name]))


def release_step(
    cluster: Cluster,
    now: float,
    observations: Mapping[str, Observation],
    params: BtuParams,
    *,
    trace: Trace = None,
) -> list[Action]:
    """Fig. 5 for every host in its release window: drop instances of types with U > 0 (at
    most ``max(1, floor(20 % · o_#))`` per type, never the last one), migrate the rest to
    other leased hosts by Alg. 2 (no new lease), release; if a migration does not fit,
    keep the VM for another BTU."""
    actions: list[Action] = []
    for h in release_candidates(cluster, now, params):
        counts = cluster.counts()
        utilities = down_utilities(cluster, observations, params)
        marked: dict[str, int] = {}
        any_positive = any(utilities[o] > 0 for o in h.instances)
        for o, n in sorted(h.instances.items()):
            if utilities[o] > 0 or (params.release_marking == "any" and any_positive):
                cap = max(1, math.floor(params.removal_cap_share * counts[o]))
                k = min(n, cap, counts[o] - 1)
                if k > 0:
                    marked[o] = k
        movers = [
            o
            for o, n in sorted(
                h.instances.items(),
                key=lambda kv: (-cluster.types[kv[0]].cpu, -cluster.types[kv[0]].mem, kv[0]),
            )
            for _ in range(n - marked.get(o, 0))
        ]
        free = {g.name: g.free(cluster.types) for g in cluster.hosts.values() if g is not h}
        targets: list[tuple[str, Host]] = []
        ok = True
        for o in movers:
            # the new instance must fit even with the images it would cache; tentative only
            target = best_host(cluster, o, params, exclude=[h.name], free=free)
            if target is None:
                ok = False
                break
            fc, fm = free[target.name]
            free[target.name] = (fc - cluster.types[o].cpu, fm - cluster.types[o].mem)
            targets.append((o, target))
        _log(trace, "release_sim", host=h.name, now=now, ok=ok, marked=marked,
             movers=len(movers), utilities={o: utilities[o] for o in h.instances})
        if not ok:
            actions.append(Action("renew", now, host=h.name, reason="migration does not fit"))
            continue
        for o, k in marked.items():
            h.remove(o, k)
            cluster.note_scaling(o, k)
            actions += [Action("down", now, op=o, host=h.name, reason="release")] * k
        for o, target in targets:
            ready = place(cluster, target, o, now, params)
            h.remove(o)
            actions.append(Action("migrate", now, op=o, host=target.name, src=h.name,
                                  ready_at=ready, reason="release"))
        cluster.release(h.name, now)
        actions.append(Action("release", now, host=h.name, reason="BTU end"))
    return actions


# --- one provisioning cycle ----------------------------------------------------------------
def btu_step(
    cluster: Cluster,
    now: float,
    observations: Mapping[str, Observation],
    params: BtuParams,
    *,
    trace: Trace = None,
) -> list[Action]:
    """One BTU-aware provisioning cycle: Alg. 1 for every type (one instance each on a
    trigger, Fig. 4), then Fig. 5 for hosts in their release window. Nothing else scales
    down: surplus instances on paid VMs are kept for free."""
    _check_observations(cluster, observations)
    actions: list[Action] = []
    for o, t in cluster.types.items():
        fire = uptrigger(observations[o], t.slo_ms, params)
        _log(trace, "alg1", op=o, now=now, d_ms=observations[o].d_ms,
             queue=observations[o].queue, trigger=fire)
        if fire:
            actions += upscale(cluster, o, now, observations, params, trace=trace)
    actions += release_step(cluster, now, observations, params, trace=trace)
    return actions


def _check_observations(cluster: Cluster, observations: Mapping[str, Observation]) -> None:
    unknown = sorted(set(observations) - set(cluster.types))
    if unknown:
        raise BtuInputError(
            f"observations: operators {unknown} are not in the topology "
            f"(known: {sorted(cluster.types)})"
        )
    missing = sorted(set(cluster.types) - set(observations))
    if missing:
        raise BtuInputError(f"observations: no measurement for operators {missing}")


def _log(trace: Trace, event: str, **fields: Any) -> None:
    if trace is not None:
        trace.append({"event": event, **fields})
