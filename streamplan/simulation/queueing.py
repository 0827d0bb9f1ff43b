"""Exact FCFS stations and networks of them (job level, non-preemptive)."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from graphlib import CycleError, TopologicalSorter

import numpy as np


def fcfs_departures(arrivals: np.ndarray, services: np.ndarray) -> np.ndarray:
    """Exact single-server FCFS departures via vectorised Lindley recursion:
    D_n = C_n + max_{k<=n}(A_k - C_{k-1}), C = cumsum(services) (design.md, Simulator).

    ``arrivals`` must be sorted ascending; ``services`` belong to the same jobs.
    """
    a = np.asarray(arrivals, dtype=float)
    s = np.asarray(services, dtype=float)
    if a.shape != s.shape or a.ndim != 1:
        raise ValueError(f"arrivals {a.shape} and services {s.shape} must be equal 1-d shapes")
    c = np.cumsum(s)
    c_prev = np.concatenate(([0.0], c[:-1]))
    # Unrolled Lindley recursion D_n = max(A_n, D_{n-1}) + S_n.
    return c + np.maximum.accumulate(a - c_prev)


def fcfs_multi_departures(arrivals: np.ndarray, services: np.ndarray, servers: int) -> np.ndarray:
    """Exact FCFS M/G/c departures: each job, in arrival order, takes the earliest free server.

    ``arrivals`` must be sorted ascending. ``servers == 1`` uses the vectorised Lindley path.
    """
    if servers < 1:
        raise ValueError(f"servers must be >= 1, got {servers}")
    if servers == 1:
        return fcfs_departures(arrivals, services)
    free = [-np.inf] * servers
    out = []
    for a, s in zip(np.asarray(arrivals, float).tolist(), np.asarray(services, float).tolist()):
        d = max(a, free[0]) + s
        heapq.heapreplace(free, d)
        out.append(d)
    return np.asarray(out, dtype=float)


def network_departures(
    root_arrival: np.ndarray,
    parent: np.ndarray,
    node: np.ndarray,
    service: np.ndarray,
    cores: Sequence[int],
) -> np.ndarray:
    """Departure time of every job of a network of FCFS nodes.

    A job with ``parent[j] < 0`` arrives at ``root_arrival[j]``; any other job arrives at
    node ``node[j]`` when its parent job departs. When the node graph induced by the
    parent links is acyclic, nodes are solved one by one in topological order (vectorised);
    otherwise the exact event-driven loop is used.
    """
    order = _node_order(parent, node, len(cores))
    if order is None:
        return event_driven_departures(root_arrival, parent, node, service, cores)
    dep = np.empty(len(service), dtype=float)
    for n in order:
        jobs = np.flatnonzero(node == n)
        arr = root_arrival[jobs].astype(float)
        inner = parent[jobs] >= 0
        arr[inner] = dep[parent[jobs][inner]]
        by_time = np.argsort(arr, kind="stable")
        jobs = jobs[by_time]
        dep[jobs] = fcfs_multi_departures(arr[by_time], service[jobs], cores[n])
    return dep


def event_driven_departures(
    root_arrival: np.ndarray,
    parent: np.ndarray,
    node: np.ndarray,
    service: np.ndarray,
    cores: Sequence[int],
) -> np.ndarray:
    """Same as :func:`network_departures` for any node graph (cycles allowed), by an exact
    event loop: arrivals are taken from one heap in time order, so every node sees its jobs
    in FCFS order, and a job's departure is fixed when it arrives (non-preemptive FCFS)."""
    n_jobs = len(service)
    children = _children(parent, n_jobs)
    pending = [(float(root_arrival[j]), int(j)) for j in np.flatnonzero(parent < 0)]
    heapq.heapify(pending)
    free = [[-np.inf] * c for c in cores]
    nodes, services = node.tolist(), service.tolist()
    dep = [0.0] * n_jobs
    while pending:
        t, j = heapq.heappop(pending)
        servers = free[nodes[j]]
        d = max(t, servers[0]) + services[j]
        heapq.heapreplace(servers, d)
        dep[j] = d
        for k in children[j]:
            heapq.heappush(pending, (d, k))
    return np.asarray(dep, dtype=float)


def _children(parent: np.ndarray, n_jobs: int) -> list[list[int]]:
    kids: list[list[int]] = [[] for _ in range(n_jobs)]
    for j in np.flatnonzero(parent >= 0).tolist():
        kids[parent[j]].append(j)
    return kids


def _node_order(parent: np.ndarray, node: np.ndarray, n_nodes: int) -> list[int] | None:
    """Topological order of the nodes under the job parent links, or None on a cycle."""
    inner = parent >= 0
    links = np.unique(node[parent[inner]] * n_nodes + node[inner])
    graph: dict[int, set[int]] = {n: set() for n in range(n_nodes)}
    for src, dst in zip((links // n_nodes).tolist(), (links % n_nodes).tolist()):
        graph[dst].add(src)
    try:
        return list(TopologicalSorter(graph).static_order())
    except CycleError:
        return None
