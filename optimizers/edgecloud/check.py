"""Independent plan checker and brute force (digest §10, "invariants").

Nothing here uses :mod:`~optimizers.edgecloud.evaluate`: rates are propagated again (E1),
makespans are recomputed by enumerating every source→sink path with networkx (E2/E3), and
E4 (pinning), E6 (capacity, in the instance's mode) and E7 (battery) are tested query by
query and device by device from the raw :class:`~optimizers.edgecloud.model.Dag` objects.
So a plan can be checked against the planner's own claims, and :func:`brute_force` — every
assignment, checked here — is an oracle for the MILP.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import networkx as nx

from .model import EDGE, Dag, Instance

__all__ = ["CheckReport", "brute_force", "check_plan"]

Assignment = Mapping[str, Mapping[str, str]]


@dataclass(frozen=True)
class CheckReport:
    """What the checker found: broken rules, recomputed makespans and energy per edge."""

    violations: list[str]
    makespan_s: dict[str, float]
    total_s: float
    drain_j: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations


def _rates(dag: Dag) -> tuple[nx.DiGraph, dict[str, float], dict[str, float]]:
    g = nx.DiGraph()
    g.add_nodes_from(v.name for v in dag.vertices)
    g.add_edges_from(dag.edges)
    sel = {v.name: v.selectivity for v in dag.vertices}
    srcs = [v for v in g if g.in_degree(v) == 0]
    given = dict(dag.source_rates or {})
    w_in: dict[str, float] = {}
    w_out: dict[str, float] = {}
    for v in nx.topological_sort(g):
        if g.in_degree(v) == 0:
            w_in[v] = given.get(v, dag.input_rate / len(srcs))
        else:
            w_in[v] = sum(w_out[u] for u in g.predecessors(v))
        w_out[v] = w_in[v] * sel[v]
    return g, w_in, w_out


def check_plan(
    inst: Instance,
    dags: Sequence[Dag],
    assignment: Assignment,
    *,
    claimed_s: Mapping[str, float] | None = None,
    rel_tol: float = 1e-9,
) -> CheckReport:
    """Check ``assignment`` (dag → vertex → resource name) of ``dags`` on ``inst``."""
    opts = inst.options
    res = {r.name: r for r in inst.resources}
    found: list[str] = []
    hosted: dict[str, list[tuple[float, float, float, bool]]] = {r: [] for r in res}
    traffic = {r: 0.0 for r in res}
    graphs = {}
    names = {d.name for d in dags}
    for extra in set(assignment) - names:
        found.append(f"assignment names unknown dag {extra!r}")
    for dag in dags:
        g, w_in, w_out = _rates(dag)
        graphs[dag.name] = (g, w_in)
        mu = assignment.get(dag.name, {})
        verts = {v.name: v for v in dag.vertices}
        for extra in set(mu) - set(verts):
            found.append(f"{dag.name}: assignment names unknown vertex {extra!r}")
        for v in dag.vertices:
            p = mu.get(v.name)
            if p is None:
                found.append(f"{dag.name}:{v.name} is not mapped")
                continue
            if p not in res:
                found.append(f"{dag.name}:{v.name} is mapped to unknown resource {p!r}")
                continue
            is_src, is_snk = g.in_degree(v.name) == 0, g.out_degree(v.name) == 0
            if is_src and res[p].tier != EDGE:
                found.append(f"E4: source {dag.name}:{v.name} on {p}, not an edge device")
            if is_snk and res[p].tier == EDGE:
                found.append(f"E4: sink {dag.name}:{v.name} on edge device {p}")
            if v.pin is not None and p not in v.pin:
                found.append(f"E4: {dag.name}:{v.name} on {p}, outside its pin {list(v.pin)}")
            k, q = inst.kind_index[v.kind], inst.index[p]
            free = is_src and opts.sources_free
            hosted[p].append((w_in[v.name], inst.service_s[k, q], inst.energy_j[k, q], free))
        for u, w in dag.edges:
            pu, pw = mu.get(u), mu.get(w)
            if pu in res and pw in res and pu != pw:
                b = w_out[u] * verts[u].event_bytes
                traffic[pu] += b
                traffic[pw] += b
    m_of: dict[str, int] = {}
    drain: dict[str, float] = {}
    for p, queries in hosted.items():
        busy = [q for q in queries if not q[3]]
        m = len(busy)
        m_of[p] = m
        f = 1.0 + res[p].interference * max(m - 1, 0)
        total_lam = sum(q[1] for q in busy)
        if opts.capacity_mode == "strict":
            for w, _, _, _ in busy:
                if not w * f * total_lam <= 1.0 - 1e-9:
                    found.append(
                        f"E6: on {p} a query with input rate {w:g} ev/s needs "
                        f"ω(1+π(m))Σλ = {w * f * total_lam:.6g} >= 1 (m = {m})")
                    break
        elif busy:
            util = sum(w * lam for w, lam, _, _ in busy) * f
            if not util <= 1.0 - 1e-9:
                found.append(f"E6: utilisation of {p} is {util:.6g} >= 1 (m = {m})")
        r = res[p]
        if r.tier == EDGE:
            power = r.idle_w + sum(w * e for w, _, e, free in queries if not free) \
                + r.net_j_per_byte * traffic[p]
            drain[p] = r.recharge_s * power
            if drain[p] > r.battery_j * (1 + 1e-9) + 1e-9:  # E7 holds idle too
                found.append(f"E7: {p} drains {drain[p]:.6g} J within τ = {r.recharge_s:g} s, "
                             f"battery holds {r.battery_j:.6g} J")
    makespans: dict[str, float] = {}
    for dag in dags:
        mu = assignment.get(dag.name, {})
        if any(mu.get(v.name) not in res for v in dag.vertices):
            continue
        g, _ = graphs[dag.name]
        kind = {v.name: inst.kind_index[v.kind] for v in dag.vertices}
        delta = {v.name: v.event_bytes for v in dag.vertices}

        def lat(v: str, _mu=mu, _kind=kind) -> float:
            p = _mu[v]
            lam = inst.service_s[_kind[v], inst.index[p]]
            if opts.latency_mode == "interfered":
                lam *= 1.0 + res[p].interference * max(m_of[p] - 1, 0)
            return lam

        def link(u: str, w: str, _mu=mu, _delta=delta) -> float:
            pu, pw = _mu[u], _mu[w]
            if pu == pw:
                return 0.0
            i, j = inst.index[pu], inst.index[pw]
            return inst.latency_s[i, j] + _delta[u] / inst.bandwidth_Bps[i, j]

        best = 0.0
        srcs = [v for v in g if g.in_degree(v) == 0]
        snks = [v for v in g if g.out_degree(v) == 0]
        for s in srcs:
            for t in snks:
                for path in nx.all_simple_paths(g, s, t):
                    total = sum(lat(u) + link(u, w) for u, w in itertools.pairwise(path))
                    if opts.include_sink_compute:
                        total += lat(path[-1])
                    best = max(best, total)
        makespans[dag.name] = float(best)
        if claimed_s is not None and dag.name in claimed_s:
            c = claimed_s[dag.name]
            if not math.isclose(c, best, rel_tol=rel_tol, abs_tol=1e-12):
                found.append(f"{dag.name}: claimed makespan {c!r} s, path enumeration gives "
                             f"{best!r} s")
    return CheckReport(found, makespans, float(sum(makespans.values())),
                       {k: float(v) for k, v in drain.items()})


def brute_force(
    inst: Instance, dags: Sequence[Dag], *, limit: int = 2_000_000
) -> tuple[float, dict[str, dict[str, str]]] | None:
    """The optimum of E8 by enumerating every assignment allowed by E4 and the pins, each
    checked by :func:`check_plan`; None when no assignment is valid.

    Ties are broken by enumeration order (resources in instance order).
    """
    slots: list[tuple[str, str, list[str]]] = []
    for dag in dags:
        g = nx.DiGraph()
        g.add_nodes_from(v.name for v in dag.vertices)
        g.add_edges_from(dag.edges)
        for v in dag.vertices:
            options = [r.name for r in inst.resources]
            if g.in_degree(v.name) == 0:
                options = [r for r in options if inst.resources[inst.index[r]].tier == EDGE]
            if g.out_degree(v.name) == 0:
                options = [r for r in options if inst.resources[inst.index[r]].tier != EDGE]
            if v.pin is not None:
                options = [r for r in options if r in v.pin]
            slots.append((dag.name, v.name, options))
    size = math.prod(len(o) for _, _, o in slots)
    if size > limit:
        raise ValueError(f"brute force over {size} assignments exceeds limit {limit}")
    best: tuple[float, dict[str, dict[str, str]]] | None = None
    for combo in itertools.product(*(o for _, _, o in slots)):
        assignment: dict[str, dict[str, str]] = {d.name: {} for d in dags}
        for (d, v, _), r in zip(slots, combo, strict=True):
            assignment[d][v] = r
        report = check_plan(inst, dags, assignment)
        if report.ok and (best is None or report.total_s < best[0] - 1e-12):
            best = (report.total_s, assignment)
    return best
