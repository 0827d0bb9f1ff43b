"""Record flow: the records each input event causes, grouped into run-to-completion jobs,
and their timing through the network of FCFS nodes."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from streamplan.simulation.queueing import network_departures
from streamplan.simulation.sampling import output_counts, service_times
from streamplan.simulation.topology import Topology

_INT = np.int64


@dataclass
class Records:
    """One row per processed record, grouped by operator in topological order."""

    op: np.ndarray
    inst: np.ndarray  # global instance index
    node: np.ndarray
    event: np.ndarray
    parent: np.ndarray  # record that produced it, -1 for an input record
    service: np.ndarray  # seconds, already divided by the node speed
    n_out: np.ndarray
    job: np.ndarray  # run-to-completion job it belongs to
    etype: np.ndarray  # index into topo.event_types of the record's own type, -1 if untyped
    out_counts: np.ndarray  # [record, event type] outputs of each type (zeros if untyped)


@dataclass
class Trace:
    """Timing of every record, job and input event (seconds from the interval start)."""

    records: Records
    rec_created: np.ndarray  # when the record became available at its node
    rec_start: np.ndarray
    rec_done: np.ndarray
    job_node: np.ndarray
    job_start: np.ndarray
    job_done: np.ndarray
    event_query: np.ndarray
    event_done: np.ndarray  # last sink record done (or last record, if no sink was reached)


def generate_records(
    topo: Topology, event_query: np.ndarray, rng: np.random.Generator
) -> Records:
    """Draw every record caused by the input events: replica choice, service time, outputs."""
    speed = np.array([t.speed for t in topo.types])
    per_op: list[Records] = []
    first = [0]  # global id of each operator's first record
    for o in range(len(topo.ops)):
        roots = [np.flatnonzero(event_query == q) for q, s in enumerate(topo.sources) if o in s]
        fed = [(p, per_op[p]) for p in topo.preds[o]]
        parent = _cat(
            [np.full(len(r), -1, _INT) for r in roots]
            + [first[p] + np.repeat(np.arange(len(r.n_out)), r.n_out) for p, r in fed]
        )
        event = _cat(roots + [np.repeat(r.event, r.n_out) for _, r in fed])
        etype = _cat([np.full(len(r), -1, _INT) for r in roots]
                     + [_output_types(topo, p, r) for p, r in fed])
        local = rng.integers(0, len(topo.inst_node[o]), len(event))
        node = topo.inst_node[o][local]
        n_out = output_counts(float(topo.selectivity[o]), len(event), rng)
        service = service_times(topo.services[o], len(event), rng) / speed[node]
        mix = topo.output_mix[o]
        out_counts = (np.zeros((len(event), len(topo.event_types)), _INT) if mix is None
                      else rng.multinomial(n_out, mix))
        per_op.append(Records(
            op=np.full(len(event), o, _INT), inst=topo.inst_offset[o] + local, node=node,
            event=event, parent=parent, service=service, n_out=n_out,
            job=np.empty(len(event), _INT), etype=etype, out_counts=out_counts,
        ))
        first.append(first[-1] + len(event))
    empty = {"service": np.empty(0), "out_counts": np.empty((0, len(topo.event_types)), _INT)}
    return Records(**{
        f.name: np.concatenate([empty.get(f.name, np.empty(0, _INT))]
                               + [getattr(r, f.name) for r in per_op])
        for f in fields(Records)
    })


def _output_types(topo: Topology, op: int, rec: Records) -> np.ndarray:
    """Type of each output of ``op``'s records, in output order (-1 when ``op`` is untyped)."""
    if topo.output_mix[op] is None:
        return np.full(int(rec.n_out.sum()), -1, _INT)
    k = len(topo.event_types)
    return np.repeat(np.tile(np.arange(k), len(rec.n_out)), rec.out_counts.ravel())


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate([np.empty(0, _INT), *parts])


class _KeyIndex:
    """Stable integer ids for int64 keys; new keys get the next free ids."""

    def __init__(self) -> None:
        self.keys = np.empty(0, _INT)
        self.ids = np.empty(0, _INT)

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        uniq, inv = np.unique(keys, return_inverse=True)
        pos = np.searchsorted(self.keys, uniq)
        known = pos < len(self.keys)
        known[known] = self.keys[pos[known]] == uniq[known]
        ids = np.empty(len(uniq), _INT)
        ids[known] = self.ids[pos[known]]
        fresh = np.flatnonzero(~known)
        ids[fresh] = len(self.keys) + np.arange(len(fresh))
        keys_all = np.concatenate([self.keys, uniq[fresh]])
        order = np.argsort(keys_all, kind="stable")
        self.keys, self.ids = keys_all[order], np.concatenate([self.ids, ids[fresh]])[order]
        return ids[inv]


def assign_jobs(rec: Records, n_events: int, n_nodes: int) -> int:
    """Group records into jobs (sets ``rec.job``) and return the number of jobs.

    A record joins its parent's job when both run on the same node (run to completion);
    otherwise it belongs to the job keyed (parent's job, node), or (input event, node) for an
    input record, which arrives at that node when the parent job departs (or with the event).
    """
    index = _KeyIndex()
    bounds = np.searchsorted(rec.op, np.arange(rec.op.max(initial=-1) + 2))
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        sl = slice(lo, hi)
        parent, node = rec.parent[sl], rec.node[sl]
        same = parent >= 0
        same[same] = rec.node[parent[same]] == node[same]
        job = np.empty(len(parent), _INT)
        job[same] = rec.job[parent[same]]
        new = ~same
        origin = rec.event[sl][new].copy()
        inner = parent[new] >= 0
        origin[inner] = n_events + rec.job[parent[new][inner]]
        job[new] = index.lookup(origin * n_nodes + node[new])
        rec.job[sl] = job
    return len(index.keys)


def schedule(
    topo: Topology, rec: Records, event_query: np.ndarray, event_time: np.ndarray
) -> Trace:
    """Run the jobs through the nodes (exact FCFS) and time every record and event."""
    n_jobs = assign_jobs(rec, len(event_time), len(topo.nodes))
    job_node = np.empty(n_jobs, _INT)
    job_node[rec.job] = rec.node
    job_event = np.empty(n_jobs, _INT)
    job_event[rec.job] = rec.event
    job_parent = np.full(n_jobs, -1, _INT)
    has_parent = rec.parent >= 0
    cross = has_parent.copy()
    cross[has_parent] = rec.job[rec.parent[has_parent]] != rec.job[has_parent]
    job_parent[rec.job[cross]] = rec.job[rec.parent[cross]]
    job_service = np.bincount(rec.job, weights=rec.service, minlength=n_jobs)
    cores = [t.cores for t in topo.types]
    job_done = network_departures(event_time[job_event], job_parent, job_node, job_service, cores)
    job_start = job_done - job_service
    rec_done = _record_done(rec, job_start)
    rec_created = np.where(job_parent >= 0, job_done[job_parent], event_time[job_event])[rec.job]
    inside = has_parent & ~cross
    rec_created[inside] = rec_done[rec.parent[inside]]
    return Trace(
        records=rec,
        rec_created=rec_created,
        rec_start=rec_done - rec.service,
        rec_done=rec_done,
        job_node=job_node,
        job_start=job_start,
        job_done=job_done,
        event_query=event_query,
        event_done=_event_done(topo, rec, rec_done, event_query),
    )


def _record_done(rec: Records, job_start: np.ndarray) -> np.ndarray:
    """Completion of each record: a job runs its records in operator topological order
    (so parents before children), back to back from the job's start."""
    order = np.argsort(rec.job, kind="stable")
    jobs, service = rec.job[order], rec.service[order]
    csum = np.cumsum(service)
    heads = np.flatnonzero(np.diff(jobs, prepend=-1))  # first record of each job
    before = np.empty(len(job_start))
    before[jobs[heads]] = csum[heads] - service[heads]
    done = np.empty(len(order))
    done[order] = job_start[jobs] + (csum - before[jobs])
    return done


def _event_done(
    topo: Topology, rec: Records, rec_done: np.ndarray, event_query: np.ndarray
) -> np.ndarray:
    sink = topo.is_sink[event_query[rec.event], rec.op]
    last_sink = np.full(len(event_query), -np.inf)
    np.maximum.at(last_sink, rec.event[sink], rec_done[sink])
    last_any = np.full(len(event_query), -np.inf)
    np.maximum.at(last_any, rec.event, rec_done)
    return np.where(np.isfinite(last_sink), last_sink, last_any)
