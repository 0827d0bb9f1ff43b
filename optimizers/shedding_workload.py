"""Workloads for seed 001's evaluation: the running example, random graphs, a Borg-like trace.

* :func:`example_g` — digest §10 worked example G (Fig. 1 with ω2 the bottleneck).
* :func:`fig1_instance` — Fig. 1's topology fed by two sources with given type mixes.
* :func:`borg_trace` / :func:`segment_mixes` — a generated stand-in for the Google Borg
  ClusterData 2019 ``instance_usage`` table (per 5-minute window, one usage record per
  active instance, keyed by machine id); an event's type is its machine id mod 4 (paper
  §X). The trace cannot be downloaded here, so machines get heavy-tailed activity that
  switches regime every few windows, which skews the type mix per source and over time.
* :func:`random_instance` — random operator graphs with many event types and queries and
  overloaded bottleneck operators (also the scalability grid of Fig. 6, digest A12).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from optimizers.shedding.fluid import selectivity_value
from optimizers.shedding.instance import Instance, Operator, Pattern, Sink

__all__ = [
    "BorgTrace",
    "borg_trace",
    "example_g",
    "fig1_instance",
    "random_instance",
    "segment_mixes",
]

FAST_S = 1e-6  # ptime of operators that are never a bottleneck in the examples


def _fig1_patterns(suffix: str, ptime_seq: float, ptime_and: float) -> tuple[Pattern, ...]:
    """P1 = SEQ(0;0;1) and P2 = AND(1,2,3) of Fig. 1 (k_0 = 2 in SEQ, so σ_0 = 1/2)."""
    return (
        Pattern.of(f"g{suffix}1", f"Q{suffix}1", "seq", {"0": 0.5, "1": 1.0}, ptime_seq),
        Pattern.of(f"g{suffix}2", f"Q{suffix}2", "and", {"1": 1.0, "2": 1.0, "3": 1.0},
                   ptime_and),
    )


def _fig1_sinks() -> tuple[list[Operator], list[tuple[str, str]], list[Sink]]:
    joins = [
        Operator("w3", [Pattern.of("g31", "S1", "and", {"Q11": 1.0, "Q21": 1.0}, FAST_S)]),
        Operator("w4", [Pattern.of("g41", "S2", "and", {"Q12": 1.0, "Q22": 1.0}, FAST_S)]),
    ]
    edges = [("w1", "w3"), ("w2", "w3"), ("w1", "w4"), ("w2", "w4")]
    return joins, edges, [Sink("sink1", "w3"), Sink("sink2", "w4")]


def example_g(balanced: bool = False) -> Instance:
    """Digest §10 example G: λ at ω2 = (400, 200, 200, 200), ptime 1 ms / 2 ms, B* = 4 ms.

    ω1's outputs are Q11 = 50, Q12 = 300 (``balanced``: Q11 = 300). Global sinks 158.33,
    local 83.33 (balanced: both 233.33).

    >>> from optimizers.shedding.fluid import propagate
    >>> inst = example_g()
    >>> [round(float(v), 2) for v in propagate(inst).y[inst.op_index["w1"]]]
    [50.0, 300.0]
    """
    q11 = 300.0 if balanced else 50.0
    w1 = Operator("w1", _fig1_patterns("1", FAST_S, FAST_S),
                  {"0": 2 * q11, "1": 300.0, "2": 300.0, "3": 300.0})
    w2 = Operator("w2", _fig1_patterns("2", 0.001, 0.002),
                  {"0": 400.0, "1": 200.0, "2": 200.0, "3": 200.0})
    joins, edges, sinks = _fig1_sinks()
    return Instance([w1, w2, *joins], edges, sinks, latency_bound_s=0.004)


def fig1_instance(
    mix1: Sequence[float],
    mix2: Sequence[float],
    *,
    rho2: float = 1.35,
    rho1: float = 0.7,
    latency_bound_s: float = 0.004,
    ptime_seq_s: float = 0.001,
    ptime_and_s: float = 0.002,
) -> Instance:
    """Fig. 1 with type mixes ``mix1``/``mix2`` (shares of types 0–3) at sources 1 and 2.

    Both sources emit the same total rate, scaled so that ω2 (the bottleneck) has unshed
    utilisation ``rho2`` (digest §6: ρ ∈ [1.2, 1.5]). The paper does not say how the overload
    was produced; we let ω1 run on a faster node, its ptimes scaled to utilisation ``rho1``.
    """
    # work per event of each type at (SEQ, AND): type 0 → SEQ, 1 → both, 2 and 3 → AND
    work = np.array([ptime_seq_s, ptime_seq_s + ptime_and_s, ptime_and_s, ptime_and_s])
    m1 = np.asarray(mix1, dtype=float) / np.sum(mix1)
    m2 = np.asarray(mix2, dtype=float) / np.sum(mix2)
    total = rho2 / float(m2 @ work)  # Eq. (3) at r = 1: λ·p = ρ
    speed1 = rho1 / (total * float(m1 @ work))
    w1 = Operator("w1", _fig1_patterns("1", ptime_seq_s * speed1, ptime_and_s * speed1),
                  {str(t): float(total * m1[t]) for t in range(4)})
    w2 = Operator("w2", _fig1_patterns("2", ptime_seq_s, ptime_and_s),
                  {str(t): float(total * m2[t]) for t in range(4)})
    joins, edges, sinks = _fig1_sinks()
    return Instance([w1, w2, *joins], edges, sinks, latency_bound_s=latency_bound_s)


@dataclass(frozen=True)
class BorgTrace:
    """Columns of a generated ``instance_usage``-shaped table (one row per usage record)."""

    window: np.ndarray
    """Index of the 5-minute window (start_time // 300 s)."""
    machine_id: np.ndarray
    avg_cpu: np.ndarray
    """``average_usage.cpus`` in normalised cores."""


def borg_trace(
    name: str,
    *,
    windows: int = 96,
    machines: int = 48,
    sigma: float = 1.5,
    regime_windows: int = 6,
    records_per_window: float = 4000.0,
) -> BorgTrace:
    """Generate a trace shard seeded by ``name`` (e.g. "Borg-A/1": data set A, source 1).

    Each machine's activity is lognormal(0, ``sigma``) and is redrawn every
    ``regime_windows`` windows on average (piecewise-stationary load, as Borg cells show);
    each window holds Poisson(activity share × ``records_per_window``) records per machine.
    """
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    activity = rng.lognormal(0.0, sigma, machines)
    rows_w, rows_m = [], []
    for w in range(windows):
        switch = rng.random(machines) < 1.0 / regime_windows
        activity[switch] = rng.lognormal(0.0, sigma, int(switch.sum()))
        counts = rng.poisson(activity / activity.sum() * records_per_window)
        rows_m.append(np.repeat(np.arange(machines), counts))
        rows_w.append(np.full(int(counts.sum()), w))
    machine = np.concatenate(rows_m)
    return BorgTrace(np.concatenate(rows_w), machine, rng.gamma(2.0, 0.05, machine.size))


def segment_mixes(trace: BorgTrace, *, types: int = 4, per_segment: int = 6) -> np.ndarray:
    """Type mix per segment of ``per_segment`` windows: type = machine id mod ``types``."""
    seg = trace.window // per_segment
    counts = np.zeros((int(seg.max()) + 1, types))
    np.add.at(counts, (seg, trace.machine_id % types), 1.0)
    return counts / counts.sum(axis=1, keepdims=True)


def random_instance(
    n_types: int,
    n_queries: int,
    *,
    share: float = 1.0,
    n_bottlenecks: int = 1,
    n_operators: int | None = None,
    or_share: float = 0.0,
    overload: tuple[float, float] = (1.2, 1.5),
    weights: bool = True,
    rate_sigma: float = 1.0,
    seed: int = 0,
) -> Instance:
    """A random two-layer operator graph with overloaded bottlenecks.

    Layer 1 has ``n_operators`` (default ``n_bottlenecks``) operators; query q runs pattern
    ``g{q}`` (AND, SEQ or, with probability ``or_share``, OR) over ``share``·``n_types``
    random types on operator ``q mod n_operators`` (a SEQ repeats one type: k = 2). Type
    rates are lognormal with shape ``rate_sigma`` (small: balanced, the budget binds; large:
    a few types dominate and min-patterns need few events). Layer 2 joins ``Q{q}`` with a partner
    stream ``P{q}`` (rate 0.2–1.5 × Q{q}'s unshed rate, so partners sometimes limit) and
    feeds sink ``s{q}`` with weight U(0.5, 2) (1 if not ``weights``). The first
    ``n_bottlenecks`` layer-1 operators get unshed ρ ∈ ``overload``, the rest ρ ∈ [0.3, 0.6];
    every operator's bound is 5× its unshed mean processing time.
    """
    rng = np.random.default_rng(seed)
    n_ops = n_operators or n_bottlenecks
    if not 1 <= n_bottlenecks <= n_ops:
        raise ValueError(f"n_bottlenecks must be in [1, {n_ops}], got {n_bottlenecks}")
    names = np.array([f"t{i}" for i in range(n_types)])
    k = max(1, round(share * n_types))
    base_rate = rng.lognormal(0.0, rate_sigma, n_types) * 100.0  # type popularity
    layer1: list[list[Pattern]] = [[] for _ in range(n_ops)]
    columns: list[list[np.ndarray]] = [[] for _ in range(n_ops)]
    for q in range(n_queries):
        cols = np.sort(rng.choice(n_types, k, replace=False)) if k < n_types else np.arange(k)
        kind = "or" if rng.random() < or_share else ("seq" if rng.random() < 0.5 else "and")
        mult = np.ones(k)
        if kind == "seq":
            mult[rng.integers(k)] = 2.0
        sel = rng.uniform(0.5, 1.0) / mult
        layer1[q % n_ops].append(
            Pattern(f"g{q}", f"Q{q}", kind, tuple(names[cols].tolist()), sel,
                    rng.uniform(0.5, 1.5, k))
        )
        columns[q % n_ops].append(cols)
    first, unshed = [], []
    for i, pats in enumerate(layer1):
        used = np.unique(np.concatenate(columns[i]))
        lam = np.zeros(n_types)
        lam[used] = base_rate[used]
        load = sum(float(lam[c] @ g.ptime_s) for g, c in zip(pats, columns[i], strict=True))
        rho = rng.uniform(*overload) if i < n_bottlenecks else rng.uniform(0.3, 0.6)
        scale = rho / load  # Eq. (3): unshed utilisation λp = ρ
        first.append(Operator(
            f"w{i}",
            [Pattern(g.name, g.output, g.kind, g.inputs, g.selectivity, g.ptime_s * scale)
             for g in pats],
            dict(zip(names[used].tolist(), lam[used].tolist(), strict=True)),
            latency_bound_s=5 * rho / lam.sum(),  # 5× the unshed mean processing time
        ))
        unshed.append([selectivity_value(g.kind, g.selectivity * lam[c])
                       for g, c in zip(pats, columns[i], strict=True)])
    joins, edges, sinks = [], [], []
    for q in range(n_queries):
        i = q % n_ops
        yq = unshed[i][q // n_ops]
        partner = max(yq, 1e-3) * rng.uniform(0.2, 1.5)
        lam_j = yq + partner
        pt = 0.05 / max(lam_j, 1e-9)  # joins run at ρ ≈ 0.05
        joins.append(Operator(
            f"j{q}",
            [Pattern.of(f"h{q}", f"S{q}", "and", {f"Q{q}": 1.0, f"P{q}": 1.0}, pt)],
            {f"P{q}": partner},
            latency_bound_s=5 * pt,
        ))
        edges.append((f"w{i}", f"j{q}"))
        sinks.append(Sink(f"s{q}", f"j{q}", rng.uniform(0.5, 2.0) if weights else 1.0))
    bound = max(o.latency_bound_s or 0.0 for o in first)
    return Instance([*first, *joins], edges, sinks, latency_bound_s=bound)
