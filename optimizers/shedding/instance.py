"""Typed input of seed 001's load-shedding model: operators, patterns, sinks, bound.

A :class:`Pattern` is one CEP pattern γ on an operator: its kind (Table I), its input event
types with the conditional selectivity σ_{γ,T} (outputs per kept event of type T, so
``y_γ ≤ σ_{γ,T}·λ_T·r_{γ,T}``; σ = s_γ/k_{γ,T} folds in the multiplicity k and the fitted match
factor s, digest A4) and the processing time ptime_{γ,T} of one event of type T at γ (A6).
:class:`Instance` validates everything on construction (errors name the field and value) and
pre-computes the index arrays the fluid model and the LP builder use.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import networkx as nx
import numpy as np

__all__ = ["Instance", "Kind", "Operator", "Pattern", "Sink"]

Kind = Literal["and", "seq", "or"]
_KINDS = ("and", "seq", "or")


def _check_finite(where: str, value: float, *, low: float, high: float = math.inf) -> None:
    if not (math.isfinite(value) and low <= value <= high):
        rng = f"[{low}, {high}]" if math.isfinite(high) else f">= {low}"
        raise ValueError(f"{where} must be finite and {rng}, got {value}")


def _check_array(
    where: str, names: Sequence[str], values: np.ndarray, low: float, high: float
) -> None:
    bad = ~(np.isfinite(values) & (values >= low) & (values <= high))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        rng = f"[{low}, {high}]" if math.isfinite(high) else f">= {low}"
        raise ValueError(f"{where}[{names[i]!r}] must be finite and in {rng}, got {values[i]}")


@dataclass(frozen=True, eq=False)
class Pattern:
    """One pattern γ (seed 001 §VII-C); SEQ is modelled like AND (order is not guaranteed).

    Parameters
    ----------
    name : str
        Pattern id, unique on its operator.
    output : str
        Event type of the complex events it emits.
    kind : {"and", "seq", "or"}
        Selectivity function of Table I: min over inputs (AND, SEQ) or max (OR).
    inputs : sequence of str
        Input event types (only these get a keep share, digest A5).
    selectivity : array-like
        σ_{γ,T} in [0, 1] per input, aligned with ``inputs`` (Eqs. 12–13 with A4).
    ptime_s : array-like or float
        ptime_{γ,T} ≥ 0 per input in seconds (Eq. 3 with A6); a float applies to every input.
    f : float
        Outputs per match (Eq. 14).
    """

    name: str
    output: str
    kind: Kind
    inputs: tuple[str, ...]
    selectivity: np.ndarray
    ptime_s: np.ndarray
    f: float = 1.0

    def __post_init__(self) -> None:
        where = f"pattern {self.name!r}"
        if self.kind not in _KINDS:
            raise ValueError(f"{where}.kind must be one of {_KINDS}, got {self.kind!r}")
        inputs = tuple(self.inputs)
        if not inputs:
            raise ValueError(f"{where}.inputs must name at least one event type")
        if len(set(inputs)) != len(inputs):
            raise ValueError(f"{where}.inputs has duplicate event types: {inputs}")
        sel = np.asarray(self.selectivity, dtype=float).reshape(-1)
        pt = np.asarray(self.ptime_s, dtype=float)
        pt = np.full(len(inputs), float(pt)) if pt.ndim == 0 else pt.reshape(-1)
        for label, arr in (("selectivity", sel), ("ptime_s", pt)):
            if arr.shape != (len(inputs),):
                raise ValueError(f"{where}.{label} needs {len(inputs)} values, got {arr.size}")
        _check_array(f"{where}.selectivity", inputs, sel, 0.0, 1.0)
        _check_array(f"{where}.ptime_s", inputs, pt, 0.0, math.inf)
        _check_finite(f"{where}.f", self.f, low=1e-12)
        object.__setattr__(self, "inputs", inputs)
        object.__setattr__(self, "selectivity", sel)
        object.__setattr__(self, "ptime_s", pt)

    @classmethod
    def of(
        cls,
        name: str,
        output: str,
        kind: Kind,
        selectivity: Mapping[str, float],
        ptime_s: Mapping[str, float] | float,
        f: float = 1.0,
    ) -> Pattern:
        """Build from ``{type: σ}`` and ``{type: ptime}`` (or one ptime for all inputs)."""
        inputs = tuple(selectivity)
        if isinstance(ptime_s, Mapping):
            missing = [t for t in inputs if t not in ptime_s]
            extra = [t for t in ptime_s if t not in selectivity]
            if missing or extra:
                raise ValueError(
                    f"pattern {name!r}.ptime_s: types must match selectivity "
                    f"(missing {missing}, unknown {extra})"
                )
            pt: np.ndarray | float = np.array([ptime_s[t] for t in inputs], dtype=float)
        else:
            pt = float(ptime_s)
        sel = np.array([selectivity[t] for t in inputs], dtype=float)
        return cls(name, output, kind, inputs, sel, pt, f)


@dataclass(frozen=True, eq=False)
class Operator:
    """An operator ω: its patterns Γ_ω, its input from outside the graph and its bound B*.

    ``source_rates`` are λ_{T,ω} (events/s) arriving from sources; rates from upstream
    operators follow from the fluid model (Eq. 11). ``latency_bound_s`` overrides the
    instance-wide B*.
    """

    name: str
    patterns: tuple[Pattern, ...]
    source_rates: Mapping[str, float] = field(default_factory=dict)
    latency_bound_s: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "patterns", tuple(self.patterns))
        if not self.patterns:
            raise ValueError(f"operators[{self.name!r}].patterns must not be empty")
        names = [g.name for g in self.patterns]
        if len(set(names)) != len(names):
            raise ValueError(f"operators[{self.name!r}].patterns: duplicate names {names}")
        for t, rate in self.source_rates.items():
            _check_finite(f"operators[{self.name!r}].source_rates[{t!r}]", rate, low=0.0)
        if self.latency_bound_s is not None:
            _check_finite(f"operators[{self.name!r}].latency_bound_s", self.latency_bound_s,
                          low=1e-15)


@dataclass(frozen=True)
class Sink:
    """A sink s: receives the outputs of ``operator`` of the given types (all when empty)."""

    name: str
    operator: str
    weight: float = 1.0
    types: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_finite(f"sinks[{self.name!r}].weight", self.weight, low=0.0)


@dataclass(frozen=True, eq=False)
class Instance:
    """A whole application snapshot for seed 001's LP (validated on construction).

    Parameters
    ----------
    operators : sequence of Operator
    edges : sequence of (str, str)
        Operator graph; an edge carries the outputs of its tail that its head consumes
        (subscription by type), Eq. (11).
    sinks : sequence of Sink
    latency_bound_s : float
        B*, the bound on the mean sojourn of an operator (Eq. 2); > 0.
    or_semantics : {"max", "sum"}
        OR as Table I's max (MILP, digest A3) or the linear sum form.

    Raises
    ------
    ValueError
        Naming the field and value: negative or non-finite rates, selectivity outside
        [0, 1] or NaN, a bound ≤ 0, unknown operators, a cycle, a pattern input type that
        never arrives at its operator, an arriving or emitted type nothing consumes.

    Examples
    --------
    >>> g = Pattern.of("g", "Q", "and", {"A": 1.0, "B": 0.5}, 0.001)
    >>> Instance([Operator("w", [g], {"A": 10, "B": 20})], [], [Sink("s", "w")], 0.01).types
    ('A', 'B', 'Q')
    >>> Instance([Operator("w", [g], {"A": -1, "B": 20})], [], [Sink("s", "w")], 0.01)
    Traceback (most recent call last):
    ...
    ValueError: operators['w'].source_rates['A'] must be finite and >= 0.0, got -1
    """

    operators: tuple[Operator, ...]
    edges: tuple[tuple[str, str], ...]
    sinks: tuple[Sink, ...]
    latency_bound_s: float
    or_semantics: Literal["max", "sum"] = "max"
    # derived on construction
    types: tuple[str, ...] = field(init=False)
    type_index: dict[str, int] = field(init=False, repr=False)
    op_index: dict[str, int] = field(init=False, repr=False)
    order: tuple[int, ...] = field(init=False, repr=False)
    preds: tuple[tuple[int, ...], ...] = field(init=False, repr=False)
    succs: tuple[tuple[int, ...], ...] = field(init=False, repr=False)
    source: np.ndarray = field(init=False, repr=False)
    in_idx: tuple[tuple[np.ndarray, ...], ...] = field(init=False, repr=False)
    out_idx: tuple[np.ndarray, ...] = field(init=False, repr=False)
    consumes: np.ndarray = field(init=False, repr=False)
    sink_ops: tuple[tuple[int, np.ndarray], ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        ops = tuple(self.operators)
        object.__setattr__(self, "operators", ops)
        object.__setattr__(self, "edges", tuple(tuple(e) for e in self.edges))
        object.__setattr__(self, "sinks", tuple(self.sinks))
        _check_finite("latency_bound_s", self.latency_bound_s, low=1e-15)
        if self.or_semantics not in ("max", "sum"):
            raise ValueError(f"or_semantics must be 'max' or 'sum', got {self.or_semantics!r}")
        op_index = {o.name: i for i, o in enumerate(ops)}
        if len(op_index) != len(ops):
            raise ValueError(f"operators: duplicate names {[o.name for o in ops]}")
        graph = nx.DiGraph()
        graph.add_nodes_from(range(len(ops)))
        for i, (a, b) in enumerate(self.edges):
            for end, name in ((0, a), (1, b)):
                if name not in op_index:
                    raise ValueError(f"edges[{i}][{end}]: unknown operator {name!r}")
            graph.add_edge(op_index[a], op_index[b])
        if not nx.is_directed_acyclic_graph(graph):
            raise ValueError(f"edges: the operator graph has a cycle {nx.find_cycle(graph)}")
        order = tuple(nx.lexicographical_topological_sort(graph))
        preds = tuple(tuple(sorted(graph.predecessors(i))) for i in range(len(ops)))
        succs = tuple(tuple(sorted(graph.successors(i))) for i in range(len(ops)))

        types = _collect_types(ops)
        type_index = {t: i for i, t in enumerate(types)}
        source = np.zeros((len(ops), len(types)))
        for i, o in enumerate(ops):
            if o.source_rates:
                cols = [type_index[t] for t in o.source_rates]
                source[i, cols] = list(o.source_rates.values())
        in_idx = tuple(
            tuple(np.fromiter((type_index[t] for t in g.inputs), np.int64, len(g.inputs))
                  for g in o.patterns)
            for o in ops
        )
        out_idx = tuple(np.array([type_index[g.output] for g in o.patterns]) for o in ops)
        consumes = np.zeros((len(ops), len(types)), dtype=bool)
        for i, idx in enumerate(in_idx):
            for arr in idx:
                consumes[i, arr] = True
        if not self.sinks:
            raise ValueError("sinks: at least one sink is needed (Eq. 9 sums over sinks)")
        sink_ops = []
        for s in self.sinks:
            if s.operator not in op_index:
                raise ValueError(f"sinks[{s.name!r}].operator: unknown operator {s.operator!r}")
            o = op_index[s.operator]
            emitted = {g.output for g in ops[o].patterns}
            for t in s.types:
                if t not in emitted:
                    raise ValueError(
                        f"sinks[{s.name!r}].types: unknown event type {t!r} "
                        f"(operator {s.operator!r} emits {sorted(emitted)})"
                    )
            wanted = set(s.types or emitted)
            sink_ops.append((o, np.array([g.output in wanted for g in ops[o].patterns])))

        for name, value in (
            ("types", types), ("type_index", type_index), ("op_index", op_index),
            ("order", order), ("preds", preds), ("succs", succs), ("source", source),
            ("in_idx", in_idx), ("out_idx", out_idx), ("consumes", consumes),
            ("sink_ops", tuple(sink_ops)),
        ):
            object.__setattr__(self, name, value)
        self._check_consumption()

    def _check_consumption(self) -> None:
        """Every input type must arrive; every arriving or emitted type must be consumed."""
        n = len(self.types)
        consumed = self.consumes
        sunk = {
            (o, g.output)
            for o, mask in self.sink_ops
            for g, m in zip(self.operators[o].patterns, mask, strict=True)
            if m
        }
        for i, o in enumerate(self.operators):
            sourced = np.zeros(n, dtype=bool)
            sourced[[self.type_index[t] for t in o.source_rates]] = True
            unused = np.flatnonzero(sourced & ~consumed[i])
            if unused.size:
                raise ValueError(
                    f"operators[{o.name!r}].source_rates: event type "
                    f"{self.types[unused[0]]!r} is consumed by no pattern of the operator"
                )
            arriving = sourced.copy()
            for p in self.preds[i]:
                arriving[self.out_idx[p]] = True
            for g, idx in zip(o.patterns, self.in_idx[i], strict=True):
                missing = idx[~arriving[idx]]
                if missing.size:
                    raise ValueError(
                        f"operators[{o.name!r}].patterns[{g.name!r}]: unknown event type "
                        f"{self.types[missing[0]]!r} (no source rate and no upstream output)"
                    )
            for g in o.patterns:
                t = self.type_index[g.output]
                if (i, g.output) not in sunk and not any(
                    consumed[s, t] for s in self.succs[i]
                ):
                    raise ValueError(
                        f"operators[{o.name!r}].patterns[{g.name!r}]: output type "
                        f"{g.output!r} is consumed by no operator or sink"
                    )

    def bound(self, op: int) -> float:
        """B* of operator ``op`` (its override or the instance-wide bound)."""
        own = self.operators[op].latency_bound_s
        return self.latency_bound_s if own is None else own


def _collect_types(ops: Sequence[Operator]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for o in ops:
        for t in o.source_rates:
            seen.setdefault(t)
        for g in o.patterns:
            for t in g.inputs:
                seen.setdefault(t)
            seen.setdefault(g.output)
    return tuple(sorted(seen))
