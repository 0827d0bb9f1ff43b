"""The edge + cloud placement model of seed 004 (Ghosh et al.): resources, DAGs, options.

Units are SI throughout (digest A7): times in s, rates in events/s, sizes in bytes, bandwidth
in bytes/s, power in W, energy in J. The paper's λ (per-event compute latency) is called
``service_s`` here, because streamplan's λ is an arrival rate (digest §9).

* :class:`Resource` — an edge device (battery C, idle power κ, recharge interval τ, energy per
  transferred byte) or a cloud VM (no energy limit); both with a linear parallelism overhead
  π(m) = ``interference``·(m − 1) for m co-located non-source queries.
* :class:`Vertex` / :class:`Dag` — a query of a dataflow: its cost class (``kind``, a row of
  the instance's service and energy tables), selectivity σ, output event size δ and optional
  pin. Sources are the vertices without parents, sinks those without children (E4 pins them to
  edge and cloud resources).
* :class:`Instance` — resources, the per-kind × per-resource service time λ and energy per
  event ε tables, the latency and bandwidth matrices, and :class:`Options`.

:func:`compile_dag` turns a :class:`Dag` into the index form (:class:`DagInfo`) that every
algorithm uses: topological order, level sets, E1 rates and allowed resources per vertex.
Construction validates every number and raises :class:`EdgeCloudInputError` naming the
field and value; a cycle raises :class:`optimizers.graphs.GraphError` naming the cycle.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import networkx as nx
import numpy as np

from ..graphs import GraphError, operator_dag

__all__ = [
    "CLOUD",
    "EDGE",
    "Dag",
    "DagInfo",
    "EdgeCloudInputError",
    "Instance",
    "Options",
    "Resource",
    "Vertex",
    "compile_dag",
    "level_sets",
]

EDGE = "edge"
CLOUD = "cloud"
Tier = Literal["edge", "cloud"]
LatencyMode = Literal["exclusive", "interfered"]
CapacityMode = Literal["strict", "utilisation"]
EPS_CAP = 1e-9  # "<" in E5/E6 is implemented as <= 1 - 1e-9 (digest A2)


class EdgeCloudInputError(ValueError):
    """Inputs that cannot describe an instance; the message names the field and the value."""


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise EdgeCloudInputError(message)


def _finite_nonneg(name: str, value: float) -> None:
    _check(
        isinstance(value, int | float) and math.isfinite(value) and value >= 0,
        f"{name} must be finite and >= 0, got {value!r}",
    )


@dataclass(frozen=True)
class Resource:
    """An edge device or a cloud VM.

    ``battery_j`` is C (J) and only binds on edges (E7): τ(κ + Σ ω_i ε_i + e_net·traffic) ≤ C.
    ``net_j_per_byte`` is the radio energy per byte the device sends or receives across
    resources (0, the paper's model, unless configured).
    """

    name: str
    tier: Tier
    type: str = "default"
    interference: float = 0.0
    idle_w: float = 0.0
    battery_j: float = math.inf
    recharge_s: float = 0.0
    net_j_per_byte: float = 0.0

    def __post_init__(self) -> None:
        _check(bool(self.name), "resource name must not be empty")
        _check(self.tier in (EDGE, CLOUD), f"resource {self.name}: tier must be 'edge' or "
               f"'cloud', got {self.tier!r}")
        for attr in ("interference", "idle_w", "recharge_s", "net_j_per_byte"):
            _finite_nonneg(f"resource {self.name}: {attr}", getattr(self, attr))
        _check(
            isinstance(self.battery_j, int | float) and self.battery_j >= 0
            and not math.isnan(self.battery_j),
            f"resource {self.name}: battery_j must be >= 0, got {self.battery_j!r}",
        )

    def pi(self, m: int) -> float:
        """π(m): parallelism overhead with m co-located non-source queries (π(0) = π(1) = 0)."""
        return self.interference * max(m - 1, 0)

    @property
    def idle_drain_j(self) -> float:
        """τκ: what the device drains over its recharge interval with nothing running."""
        return self.recharge_s * self.idle_w if self.tier == EDGE else 0.0

    @property
    def empty(self) -> bool:
        """An edge whose battery cannot even cover its idle drain (E7 fails with no queries)."""
        return self.tier == EDGE and self.battery_j + 1e-9 < self.idle_drain_j


@dataclass(frozen=True)
class Vertex:
    """A query: cost class ``kind``, selectivity σ, output event size δ (bytes), optional pin."""

    name: str
    kind: str
    selectivity: float = 1.0
    event_bytes: float = 0.0
    pin: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        _check(bool(self.name), "vertex name must not be empty")
        _finite_nonneg(f"vertex {self.name}: selectivity", self.selectivity)
        _finite_nonneg(f"vertex {self.name}: event_bytes", self.event_bytes)
        _check(self.pin is None or len(self.pin) > 0, f"vertex {self.name}: pin is empty")


@dataclass(frozen=True)
class Dag:
    """A dataflow G_k: vertices, edges and its input rate Ω^in (split equally over sources
    unless ``source_rates`` gives each source's rate)."""

    name: str
    vertices: tuple[Vertex, ...]
    edges: tuple[tuple[str, str], ...]
    input_rate: float = 100.0
    source_rates: Mapping[str, float] | None = None

    def __post_init__(self) -> None:
        _check(bool(self.name), "dag name must not be empty")
        _check(len(self.vertices) >= 2, f"dag {self.name}: needs at least a source and a sink, "
               f"got {len(self.vertices)} vertices")
        _finite_nonneg(f"dag {self.name}: input_rate", self.input_rate)
        for v, r in (self.source_rates or {}).items():
            _finite_nonneg(f"dag {self.name}: source_rates[{v}]", r)


@dataclass(frozen=True)
class Options:
    """Model switches (digest A1, A2, A8, A9)."""

    latency_mode: LatencyMode = "exclusive"
    capacity_mode: CapacityMode = "strict"
    include_sink_compute: bool = False
    sources_free: bool = True

    def __post_init__(self) -> None:
        _check(self.latency_mode in ("exclusive", "interfered"),
               f"latency_mode must be 'exclusive' or 'interfered', got {self.latency_mode!r}")
        _check(self.capacity_mode in ("strict", "utilisation"),
               f"capacity_mode must be 'strict' or 'utilisation', got {self.capacity_mode!r}")


@dataclass(frozen=True, eq=False)
class Instance:
    """Resources and cost tables.

    ``service_s[k, p]`` is λ of kind k on resource p (s/event), ``energy_j[k, p]`` is ε (J per
    input event, used on edges), ``latency_s[p, q]`` and ``bandwidth_Bps[p, q]`` the link from
    p to q. Co-location is free: the diagonal of ``latency_s`` must be 0 and the diagonal of
    ``bandwidth_Bps`` is ignored (taken as infinite).
    """

    resources: tuple[Resource, ...]
    kinds: tuple[str, ...]
    service_s: np.ndarray
    energy_j: np.ndarray
    latency_s: np.ndarray
    bandwidth_Bps: np.ndarray
    options: Options = field(default_factory=Options)

    def __post_init__(self) -> None:
        names = [r.name for r in self.resources]
        _check(len(names) > 0, "resources is empty")
        _check(len(set(names)) == len(names), f"resources: duplicate names {_dups(names)}")
        _check(len(set(self.kinds)) == len(self.kinds),
               f"kinds: duplicate names {_dups(self.kinds)}")
        n, k = len(names), len(self.kinds)
        for attr, shape in (("service_s", (k, n)), ("energy_j", (k, n)),
                            ("latency_s", (n, n)), ("bandwidth_Bps", (n, n))):
            arr = np.asarray(getattr(self, attr), dtype=float)
            _check(arr.shape == shape, f"{attr}: shape must be {shape}, got {arr.shape}")
            object.__setattr__(self, attr, arr)
        for attr in ("service_s", "energy_j"):
            arr = getattr(self, attr)
            bad = np.argwhere(~np.isfinite(arr) | (arr < 0))
            if len(bad):
                kk, p = bad[0]
                raise EdgeCloudInputError(
                    f"{attr}[{self.kinds[kk]}][{names[p]}] must be finite and >= 0, "
                    f"got {float(arr[kk, p])!r}")
        lat = self.latency_s
        bad = np.argwhere(~np.isfinite(lat) | (lat < 0))
        if len(bad):
            p, q = bad[0]
            raise EdgeCloudInputError(
                f"latency from {names[p]} to {names[q]} must be finite and >= 0, "
                f"got {float(lat[p, q])!r}")
        _check(bool(np.all(np.diag(lat) == 0)),
               "latency_s: co-located latency (diagonal) must be 0")
        bw = self.bandwidth_Bps.copy()
        np.fill_diagonal(bw, np.inf)
        bad = np.argwhere(~(bw > 0) | np.isnan(bw))
        if len(bad):
            p, q = bad[0]
            raise EdgeCloudInputError(
                f"bandwidth from {names[p]} to {names[q]} must be > 0, "
                f"got {float(self.bandwidth_Bps[p, q])!r}")
        inv = 1.0 / bw
        object.__setattr__(self, "inv_bandwidth", inv)
        object.__setattr__(self, "index", {nm: i for i, nm in enumerate(names)})
        object.__setattr__(self, "kind_index", {nm: i for i, nm in enumerate(self.kinds)})
        tiers = np.array([r.tier == EDGE for r in self.resources])
        object.__setattr__(self, "is_edge", tiers)
        object.__setattr__(self, "edge_ids", np.flatnonzero(tiers))
        object.__setattr__(self, "cloud_ids", np.flatnonzero(~tiers))
        for attr, values in (
            ("slope", [r.interference for r in self.resources]),
            ("idle_w", [r.idle_w for r in self.resources]),
            ("battery_j", [r.battery_j if r.tier == EDGE else math.inf for r in self.resources]),
            ("recharge_s", [r.recharge_s if r.tier == EDGE else 0.0 for r in self.resources]),
            ("net_j_per_byte",
             [r.net_j_per_byte if r.tier == EDGE else 0.0 for r in self.resources]),
        ):
            object.__setattr__(self, attr, np.asarray(values, dtype=float))
        # E7 budget per unit of recharge time: κ + load ≤ C/τ  (inf where τ = 0 or cloud)
        with np.errstate(divide="ignore", invalid="ignore"):
            budget = np.where(self.recharge_s > 0, self.battery_j / self.recharge_s, np.inf)
        object.__setattr__(self, "power_budget_w", budget)
        types = sorted({r.type for r in self.resources})
        by_type = [np.flatnonzero([r.type == t for r in self.resources]) for t in types]
        mean_by_type = np.stack([self.service_s[:, ids].mean(axis=1) for ids in by_type], axis=1)
        object.__setattr__(self, "critical_latency", mean_by_type.mean(axis=1))

    # typed views of the derived attributes set above
    inv_bandwidth: np.ndarray = field(init=False, repr=False)
    index: dict[str, int] = field(init=False, repr=False)
    kind_index: dict[str, int] = field(init=False, repr=False)
    is_edge: np.ndarray = field(init=False, repr=False)
    edge_ids: np.ndarray = field(init=False, repr=False)
    cloud_ids: np.ndarray = field(init=False, repr=False)
    slope: np.ndarray = field(init=False, repr=False)
    idle_w: np.ndarray = field(init=False, repr=False)
    battery_j: np.ndarray = field(init=False, repr=False)
    recharge_s: np.ndarray = field(init=False, repr=False)
    net_j_per_byte: np.ndarray = field(init=False, repr=False)
    power_budget_w: np.ndarray = field(init=False, repr=False)
    critical_latency: np.ndarray = field(init=False, repr=False)

    @property
    def n_resources(self) -> int:
        return len(self.resources)

    def empty_edges(self) -> list[str]:
        """Edge devices whose battery cannot cover even their idle drain τκ."""
        return [r.name for r in self.resources if r.empty]

    def with_options(self, options: Options) -> Instance:
        """The same resources and tables under other model switches."""
        return Instance(self.resources, self.kinds, self.service_s, self.energy_j,
                        self.latency_s, self.bandwidth_Bps, options)

    def with_battery(self, resource: str, battery_j: float) -> Instance:
        """A copy where ``resource``'s battery capacity C is ``battery_j``."""
        res = list(self.resources)
        i = self.index[resource]
        res[i] = _replace(res[i], battery_j=battery_j)
        return Instance(tuple(res), self.kinds, self.service_s, self.energy_j, self.latency_s,
                        self.bandwidth_Bps, self.options)


def _replace(r: Resource, **changes) -> Resource:
    from dataclasses import replace

    return replace(r, **changes)


def _dups(names: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    return sorted({n for n in names if n in seen or seen.add(n)})


@dataclass(frozen=True, eq=False)
class DagInfo:
    """A compiled DAG: integer vertex ids in the order of :attr:`Dag.vertices`."""

    name: str
    names: tuple[str, ...]
    index: dict[str, int]
    kind: np.ndarray
    parents: tuple[tuple[int, ...], ...]
    children: tuple[tuple[int, ...], ...]
    order: tuple[int, ...]
    levels: tuple[tuple[int, ...], ...]
    depth: np.ndarray
    is_source: np.ndarray
    is_sink: np.ndarray
    omega_in: np.ndarray
    omega_out: np.ndarray
    delta: np.ndarray
    allowed: tuple[np.ndarray, ...]
    edges: tuple[tuple[int, int], ...]
    dag: Dag
    esrc: np.ndarray = field(repr=False, default=None)  # edges by topological rank of dst
    edst: np.ndarray = field(repr=False, default=None)
    edge_pos: dict[tuple[int, int], int] = field(repr=False, default=None)

    @property
    def n(self) -> int:
        return len(self.names)


def level_sets(parents: Sequence[Sequence[int]]) -> list[list[int]]:
    """TopSet's S_0, S_1, …: S_0 holds vertices without parents, S_{i+1} the unvisited ones
    whose parents all lie in S_0 … S_i (Kahn's algorithm, level by level).

    >>> level_sets([[], [0], [0], [1, 2], [0]])
    [[0], [1, 2, 4], [3]]
    """
    n = len(parents)
    indeg = [len(p) for p in parents]
    children: list[list[int]] = [[] for _ in range(n)]
    for v, ps in enumerate(parents):
        for u in ps:
            children[u].append(v)
    level = [v for v in range(n) if indeg[v] == 0]
    out: list[list[int]] = []
    seen = 0
    while level:
        out.append(sorted(level))
        seen += len(level)
        nxt = []
        for u in level:
            for c in children[u]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    nxt.append(c)
        level = nxt
    if seen != n:
        raise GraphError("graph has a cycle")
    return out


def compile_dag(dag: Dag, inst: Instance) -> DagInfo:
    """Index form of ``dag`` on ``inst``: E1 rates, level sets and allowed resources (E4).

    Raises :class:`GraphError` naming a cycle or unknown vertex, and
    :class:`EdgeCloudInputError` for an unknown kind or pinned resource, or a pin that
    contradicts E4 (a source pinned to a VM, a sink pinned to an edge).
    """
    names = tuple(v.name for v in dag.vertices)
    _check(len(set(names)) == len(names), f"dag {dag.name}: duplicate vertices {_dups(names)}")
    try:
        g = operator_dag(names, dag.edges)
    except GraphError as exc:
        raise GraphError(f"dag {dag.name}: {exc}") from None
    index = {nm: i for i, nm in enumerate(names)}
    parents = tuple(tuple(sorted(index[u] for u in g.predecessors(v))) for v in names)
    children = tuple(tuple(sorted(index[w] for w in g.successors(v))) for v in names)
    levels = tuple(tuple(s) for s in level_sets(parents))
    depth = np.zeros(len(names), dtype=int)
    for d, s in enumerate(levels):
        depth[list(s)] = d
    order = tuple(index[v] for v in nx.lexicographical_topological_sort(g, key=index.__getitem__))
    is_source = np.array([not p for p in parents])
    is_sink = np.array([not c for c in children])
    for i, nm in enumerate(names):
        _check(not (is_source[i] and is_sink[i]),
               f"dag {dag.name}: vertex {nm} is isolated (both a source and a sink)")
    kinds = []
    for v in dag.vertices:
        _check(v.kind in inst.kind_index,
               f"dag {dag.name}: vertex {v.name}: unknown kind {v.kind!r}")
        kinds.append(inst.kind_index[v.kind])
    sources = [i for i in range(len(names)) if is_source[i]]
    rates = dict(dag.source_rates or {})
    for s in rates:
        _check(s in index and is_source[index[s]],
               f"dag {dag.name}: source_rates names {s!r}, which is not a source")
    omega_in = np.zeros(len(names))
    omega_out = np.zeros(len(names))
    sel = np.array([v.selectivity for v in dag.vertices])
    for v in order:
        if is_source[v]:
            omega_in[v] = rates.get(names[v], dag.input_rate / len(sources))
        else:
            omega_in[v] = sum(omega_out[u] for u in parents[v])
        omega_out[v] = omega_in[v] * sel[v]
    allowed = []
    for i, v in enumerate(dag.vertices):
        mask = np.ones(inst.n_resources, dtype=bool)
        if is_source[i]:
            mask &= inst.is_edge
        if is_sink[i]:
            mask &= ~inst.is_edge
        if v.pin is not None:
            pin = np.zeros(inst.n_resources, dtype=bool)
            for r in v.pin:
                _check(r in inst.index, f"dag {dag.name}: vertex {v.name}: pin names unknown "
                       f"resource {r!r}")
                pin[inst.index[r]] = True
            _check(bool((pin & mask).any()),
                   f"dag {dag.name}: vertex {v.name}: pin {list(v.pin)} leaves no resource "
                   f"allowed by E4 ({'sources on edges' if is_source[i] else 'sinks on cloud'})")
            mask &= pin
        _check(bool(mask.any()), f"dag {dag.name}: vertex {v.name}: no "
               f"{'edge' if is_source[i] else 'cloud'} resource exists for it (E4)")
        allowed.append(np.flatnonzero(mask))
    rank = {v: i for i, v in enumerate(order)}
    sorted_edges = sorted(((index[u], index[w]) for u, w in dag.edges),
                          key=lambda e: (rank[e[1]], rank[e[0]]))
    return DagInfo(
        esrc=np.array([u for u, _ in sorted_edges], dtype=int),
        edst=np.array([w for _, w in sorted_edges], dtype=int),
        edge_pos={e: i for i, e in enumerate(sorted_edges)},
        name=dag.name,
        names=names,
        index=index,
        kind=np.asarray(kinds, dtype=int),
        parents=parents,
        children=children,
        order=order,
        levels=levels,
        depth=depth,
        is_source=is_source,
        is_sink=is_sink,
        omega_in=omega_in,
        omega_out=omega_out,
        delta=np.array([v.event_bytes for v in dag.vertices]),
        allowed=tuple(allowed),
        edges=tuple((index[u], index[w]) for u, w in dag.edges),
        dag=dag,
    )
