"""Plain typed inputs of EDRP (seed 003, Table I): operators, streams, nodes, links, weights.

All times are in seconds, rates in tuples/s, sizes in bytes, transfer rates in bit/s and
costs in $/h. A deployment maps an operator to a :data:`Multiset` of nodes: a sorted tuple
with one entry per replica, so ``("u", "u", "v")`` is two replicas on u and one on v.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "Bounds",
    "DataStore",
    "EdrpInputError",
    "EdrpInputs",
    "Multiset",
    "Node",
    "Operator",
    "Stream",
    "Weights",
]

Multiset = tuple[str, ...]


class EdrpInputError(ValueError):
    """Inputs that cannot describe an EDRP instance; the message names the field."""


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise EdrpInputError(message)


def _nonneg(name: str, value: float) -> None:
    _check(value >= 0 and math.isfinite(value), f"{name} must be finite and >= 0, got {value}")


@dataclass(frozen=True)
class Operator:
    """An operator i of G_dsp with its reference-CPU service rate μ_i and input rate λ_i."""

    name: str
    service_rate: float
    input_rate: float
    max_replicas: int = 1
    nodes: tuple[str, ...] | None = None
    resources: float = 1.0
    price: float = 1.0
    state_bytes: float = 0.0
    code_bytes: float = 300 * 1024
    query: str = "app"

    def __post_init__(self) -> None:
        _check(self.service_rate > 0, f"operator {self.name}: service_rate must be > 0")
        for name in ("input_rate", "resources", "price", "state_bytes", "code_bytes"):
            _nonneg(f"operator {self.name}: {name}", getattr(self, name))
        _check(self.max_replicas >= 1, f"operator {self.name}: max_replicas must be >= 1")
        _check(self.nodes is None or len(self.nodes) > 0, f"operator {self.name}: nodes is empty")


@dataclass(frozen=True)
class Stream:
    """A stream (i, j) of G_dsp carrying λ_(i,j) tuples/s."""

    src: str
    dst: str
    rate: float

    def __post_init__(self) -> None:
        _nonneg(f"stream ({self.src}, {self.dst}): rate", self.rate)


@dataclass(frozen=True)
class Node:
    """A computing node u: capacity Res_u, speed-up S_u, replica spawn time t_s,u."""

    name: str
    capacity: float = 2.0
    speed: float = 1.0
    spawn_s: float = 0.5
    type: str = "default"

    def __post_init__(self) -> None:
        _nonneg(f"node {self.name}: capacity", self.capacity)
        _nonneg(f"node {self.name}: spawn_s", self.spawn_s)
        _check(self.speed > 0, f"node {self.name}: speed must be > 0")


@dataclass(frozen=True)
class Weights:
    """SAW weights w_r, w_c, w_d (seed 003, Eq. (12)): non-negative, summing to 1."""

    r: float
    c: float
    d: float

    def __post_init__(self) -> None:
        for name in ("r", "c", "d"):
            _nonneg(f"weights.{name}", getattr(self, name))
        _check(abs(self.r + self.c + self.d - 1) < 1e-9, "weights must sum to 1")


@dataclass(frozen=True)
class Bounds:
    """R_max (s), C_max ($/h), T_D,max (s): hard bounds and normalisers (Eqs. (12), (15)–(17))."""

    r_max_s: float
    c_max: float
    td_max_s: float

    def __post_init__(self) -> None:
        for name in ("r_max_s", "c_max", "td_max_s"):
            _check(getattr(self, name) > 0, f"bounds.{name} must be > 0")


@dataclass(frozen=True)
class DataStore:
    """The state/code repository: one-way delay d_(u,DS) and rate r_(u,DS), both directions."""

    delay_s: float = 0.005
    rate_bps: float = 100e6

    def __post_init__(self) -> None:
        _nonneg("datastore.delay_s", self.delay_s)
        _check(self.rate_bps > 0, "datastore.rate_bps must be > 0")


@dataclass(frozen=True)
class EdrpInputs:
    """One EDRP instance. ``links`` are physical (u, v, delay_s); the logical network is their
    shortest-delay closure. ``current`` is U_0 (None: initial deployment, no downtime)."""

    operators: tuple[Operator, ...]
    streams: tuple[Stream, ...]
    nodes: tuple[Node, ...]
    links: tuple[tuple[str, str, float], ...]
    weights: Weights
    bounds: Bounds
    link_cost: float = 0.0
    datastore: DataStore = DataStore()
    t_syn_s: float = 0.25
    current: Mapping[str, Multiset] | None = field(default=None)

    def __post_init__(self) -> None:
        ops = [o.name for o in self.operators]
        nodes = [n.name for n in self.nodes]
        _check(len(ops) > 0, "operators is empty")
        _check(len(nodes) > 0, "nodes is empty")
        _check(len(set(ops)) == len(ops), "operators: duplicate names")
        _check(len(set(nodes)) == len(nodes), "nodes: duplicate names")
        _nonneg("link_cost", self.link_cost)
        _nonneg("t_syn_s", self.t_syn_s)
        known = set(nodes)
        for op in self.operators:
            for u in op.nodes or ():
                _check(u in known, f"operator {op.name}: unknown node {u!r}")
        for s in self.streams:
            for end in (s.src, s.dst):
                _check(end in ops, f"stream ({s.src}, {s.dst}): unknown operator {end!r}")
        for op_name, ms in (self.current or {}).items():
            _check(op_name in ops, f"current: unknown operator {op_name!r}")
            _check(len(ms) > 0, f"current[{op_name}] is empty")
            for u in ms:
                _check(u in known, f"current[{op_name}]: unknown node {u!r}")
