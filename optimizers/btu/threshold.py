"""The threshold baseline of seed 002 (digest §4, §8.3).

Each cycle and operator type: more than ``baseline_up2`` (250) items queued → two new
instances, more than ``baseline_up`` (50) → one, fewer than ``baseline_down`` (1) → remove
one (never the last). New instances go first-fit over hosts in lease order; a VM is leased
when none fits. The instance removed is the one on the host with the most free memory, so
hosts empty out; a VM is released as soon as its last instance stops, wherever it is in its
BTU. A VM still running at its BTU end is renewed (billing does that implicitly).
"""

from __future__ import annotations

from collections.abc import Mapping

from .inputs import BtuParams
from .policy import Trace, _check_observations, _log, place, uptrigger
from .state import Action, Cluster, Host, Observation

__all__ = ["first_fit", "threshold_step"]


def first_fit(cluster: Cluster, op: str) -> Host | None:
    """The first host in lease order with room for one instance of ``op``."""
    t = cluster.types[op]
    for h in cluster.hosts.values():
        fc, fm = h.free(cluster.types)
        if fc >= t.cpu and fm >= t.mem:
            return h
    return None


def _add(cluster: Cluster, op: str, now: float, params: BtuParams) -> list[Action]:
    actions = []
    host = first_fit(cluster, op)
    if host is None:
        host = cluster.lease(now, params.vm_start_s)
        actions.append(Action("lease", now, host=host.name, ready_at=host.ready_at))
    ready = place(cluster, host, op, now, params)
    cluster.note_scaling(op)
    actions.append(Action("up", now, op=op, host=host.name, ready_at=ready, reason="threshold"))
    return actions


def _remove(cluster: Cluster, op: str, now: float) -> Action:
    hosts = [h for h in cluster.hosts.values() if h.instances.get(op, 0) > 0]
    order = {name: k for k, name in enumerate(cluster.hosts)}
    victim = max(hosts, key=lambda h: (h.free(cluster.types)[1], order[h.name]))
    victim.remove(op)
    cluster.note_scaling(op)
    return Action("down", now, op=op, host=victim.name, reason="queue empty")


def threshold_step(
    cluster: Cluster,
    now: float,
    observations: Mapping[str, Observation],
    params: BtuParams,
    *,
    trace: Trace = None,
) -> list[Action]:
    """One cycle of the threshold baseline; empty VMs are released at once."""
    _check_observations(cluster, observations)
    actions: list[Action] = []
    for o, t in cluster.types.items():
        obs = observations[o]
        if params.baseline_trigger == "alg1":
            n_up = 1 if uptrigger(obs, t.slo_ms, params) else 0
        else:
            n_up = 2 if obs.queue > params.baseline_up2 else int(obs.queue > params.baseline_up)
        _log(trace, "threshold", op=o, now=now, queue=obs.queue, up=n_up)
        if n_up:
            for _ in range(n_up):
                actions += _add(cluster, o, now, params)
        elif obs.queue < params.baseline_down and cluster.count(o) > 1:
            actions.append(_remove(cluster, o, now))
    for name in [h.name for h in cluster.hosts.values() if h.count() == 0]:
        cluster.release(name, now)
        actions.append(Action("release", now, host=name, reason="empty"))
    return actions
