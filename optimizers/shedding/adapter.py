"""``method: shedding``: seed 001 on the fitted model and the application config.

Mapping (digest §9):

* Pattern structure comes from ``method.params.patterns`` (operator → patterns with kind,
  input types with multiplicity k, output type, relative cost). Operators without patterns
  forward every type they emit (one single-input pattern per type, so shedding there drops
  events of that type).
* ``selectivity_by_type[T]`` of an operator is read as ``records_out_by_type[T] /
  records_in``: per processed event, how many events of type T it emits. An operator's
  measured output rate of T is that times its arrival rate.
* λ_{T,ω} at a pattern operator is the sum of its upstream operators' measured outputs
  (§VIII: an overloaded operator counts only what it processes). A source operator's rate
  is its query's input rate when it is the query's only source, else its own arrival rate.
* Match factor s_γ (A4) = measured output of γ's type / min-model output at the measured
  mix, clipped to (0, 1]; σ_{γ,T} = s_γ/k_{γ,T}.
* ptime_{γ,T} (A6): the fitted mean service b split over patterns by relative cost so
  that Eq. (3) at r = 1 gives back b.
* B* = ``latency_bound_ms``, else the smallest ``target_rt_ms`` of the operator's query.

The decision keeps the current deployment; ``shedding`` holds drop shares keyed by event
type, or ``"<pattern>:<type>"`` on operators where one type feeds several patterns.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Literal, Self

import networkx as nx
import numpy as np
import pyscipopt
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from streamplan.config import AppConfig, QuerySpec
from streamplan.fitted import FittedModel, OperatorModel
from streamplan.plan import Decision, Prediction, Replicas, SolverStats

from .fluid import selectivity_value
from .instance import Instance, Operator, Pattern, Sink
from .lp import Limits
from .planner import ShedPlan, plan

__all__ = ["PatternSpec", "SheddingParams", "instance_from_model", "plan_shedding"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PatternSpec(_Strict):
    """One pattern of an operator as written in the app config."""

    name: str = Field(min_length=1)
    output: str = Field(min_length=1, description="event type it emits")
    kind: Literal["and", "seq", "or"]
    inputs: dict[str, Annotated[int, Field(ge=1)]] = Field(
        min_length=1, description="input type -> multiplicity k (SEQ(A;B;A): A -> 2)"
    )
    relative_cost: float = Field(default=1.0, gt=0, description="ptime relative to others")


class SheddingParams(_Strict):
    """Parameters of ``method: shedding`` (``method.params``)."""

    mode: Literal["global", "local", "none"] = Field(
        default="global", description="global LP, local LP or no shedding"
    )
    latency_bound_ms: float | None = Field(
        default=None, gt=0, description="B*; default: the operator's query target_rt_ms"
    )
    weights: dict[str, float] = Field(default_factory=dict, description="query -> sink weight")
    patterns: dict[str, list[PatternSpec]] = Field(default_factory=dict)
    or_semantics: Literal["max", "sum"] = "max"
    formulation: Literal["aggregated", "full"] = "aggregated"
    time_limit_s: float = Field(default=60.0, gt=0)

    @classmethod
    def from_config(cls, config: AppConfig) -> Self:
        """Validate ``config.method.params``; errors name ``method.params.<field>``."""
        try:
            params = cls.model_validate(dict(config.method.params))
        except ValidationError as exc:
            parts = []
            for err in exc.errors():
                loc = ".".join(str(p) for p in err["loc"])
                parts.append(f"method.params.{loc}: {err['msg']} (value: {err.get('input')!r})")
            raise ValueError("; ".join(parts)) from exc
        queries = {q.name for q in config.queries}
        ops = {o.name for o in config.operators}
        for q, w in params.weights.items():
            if q not in queries:
                raise ValueError(f"method.params.weights: unknown query {q!r}")
            if not (math.isfinite(w) and w >= 0):
                raise ValueError(f"method.params.weights[{q!r}] must be finite and >= 0, got {w}")
        for op in params.patterns:
            if op not in ops:
                raise ValueError(f"method.params.patterns: unknown operator {op!r}")
        return params


def _rate(model: FittedModel, om: OperatorModel) -> float:
    return {"max": om.arrival_rate_max, "p95": om.arrival_rate_p95,
            "mean": om.arrival_rate_mean}[model.rate_statistic]


def _measured_outputs(model: FittedModel, op: str, sources: dict[str, str]) -> dict[str, float]:
    """Measured output rate per type of ``op``: selectivity_by_type × arrival rate."""
    if op not in model.operators:
        raise ValueError(f"fitted model has no operator {op!r}")
    om = model.operators[op]
    if not om.selectivity_by_type:
        raise ValueError(
            f"fitted.operators[{op!r}].selectivity_by_type is empty: seed 001 needs per-type "
            "telemetry (records_out_by_type)"
        )
    for t, s in om.selectivity_by_type.items():
        if not (math.isfinite(s) and s >= 0):
            raise ValueError(
                f"fitted.operators[{op!r}].selectivity_by_type[{t!r}] must be finite and "
                f">= 0, got {s}"
            )
    lam = _rate(model, om)
    if op in sources and sources[op] in model.queries:
        lam = model.query_rate(sources[op])
    return {t: s * lam for t, s in om.selectivity_by_type.items()}


def instance_from_model(
    model: FittedModel, config: AppConfig, params: SheddingParams
) -> Instance:
    """Build seed 001's instance from the fitted model (see the module docstring)."""
    graph = nx.DiGraph(list(config.edges))
    graph.add_nodes_from(o.name for o in config.operators)
    only_source = {q.sources[0]: q.name for q in config.queries if len(q.sources) == 1}
    out = {o: _measured_outputs(model, o, only_source) for o in graph}
    targets = {q.name: q.target_rt_ms for q in config.queries}
    query_of = {o.name: o.query for o in config.operators}
    operators = []
    for name in nx.lexicographical_topological_sort(graph):
        om = model.operators[name]
        preds = list(graph.predecessors(name))
        bound = None if params.latency_bound_ms else targets[query_of[name]] / 1e3
        specs = params.patterns.get(name)
        if not specs:  # forwarder: one single-input pattern per emitted type
            pats = [Pattern.of(t, t, "and", {t: 1.0}, om.service_mean_s) for t in out[name]]
            source = {} if preds else out[name]
            operators.append(Operator(name, pats, source, bound))
            continue
        if not preds:
            raise ValueError(
                f"method.params.patterns[{name!r}]: a source operator's input types are not "
                "measured; put a forwarding operator in front of it"
            )
        lam: dict[str, float] = {}
        for p in preds:
            for t, rate in out[p].items():
                lam[t] = lam.get(t, 0.0) + rate
        operators.append(Operator(name, _fit_patterns(name, specs, lam, om), {}, bound))
    sinks = [Sink(name, op, params.weights.get(q.name, 1.0))
             for q in config.queries for op, name in _sink_names(q).items()]
    default = (params.latency_bound_ms or min(targets.values())) / 1e3
    return Instance(operators, config.edges, sinks, default, params.or_semantics)


def _sink_names(query: QuerySpec) -> dict[str, str]:
    """Sink operator → sink name: the query's name, or ``query/operator`` for several."""
    if len(query.sinks) == 1:
        return {query.sinks[0]: query.name}
    return {op: f"{query.name}/{op}" for op in query.sinks}


def _fit_patterns(
    op: str,
    specs: list[PatternSpec],
    upstream: Mapping[str, float],
    om: OperatorModel,
) -> list[Pattern]:
    """σ_{γ,T} = s_γ/k (A4) and ptime_{γ,T} (A6) of one operator's patterns.

    ``upstream`` holds the upstream output rates per type; the operator receives the types
    its patterns consume, so the measured ``selectivity_by_type`` is per such event.
    """
    for g in specs:
        for t in g.inputs:
            if t not in upstream:
                raise ValueError(
                    f"method.params.patterns[{op!r}][{g.name!r}].inputs: unknown event type "
                    f"{t!r} (upstream emits {sorted(upstream)})"
                )
    lam = {t: upstream[t] for g in specs for t in g.inputs}
    total = sum(lam.values())
    mix = {t: v / total for t, v in lam.items()} if total > 0 else dict.fromkeys(lam, 0.0)
    model_out: dict[str, float] = {}
    for g in specs:
        args = np.array([mix[t] / k for t, k in g.inputs.items()])
        model_out[g.output] = model_out.get(g.output, 0.0) + selectivity_value(g.kind, args)
    # Eq. (3) at r = 1: b = Σ_T mix_T Σ_{γ∋T} ptime_{γ,T}, ptime ∝ relative cost
    work = sum(mix[t] * g.relative_cost for g in specs for t in g.inputs)
    unit = om.service_mean_s / work if work > 0 else 0.0
    pats = []
    for g in specs:
        measured_out = om.selectivity_by_type.get(g.output, 0.0)
        s = min(1.0, measured_out / model_out[g.output]) if model_out[g.output] > 0 else 1.0
        sel = {t: s / k for t, k in g.inputs.items()}
        pats.append(Pattern.of(g.name, g.output, g.kind, sel, g.relative_cost * unit))
    return pats


def _shedding_keys(inst: Instance, result: ShedPlan) -> dict[str, dict[str, float]]:
    """Drop shares per operator keyed by type, or ``pattern:type`` where types are shared."""
    shed: dict[str, dict[str, float]] = {}
    for op, by_pattern in result.drops(inst).items():
        types = [t for shares in by_pattern.values() for t in shares]
        shared = len(types) != len(set(types))
        shed[op] = {
            (f"{g}:{t}" if shared else t): x
            for g, shares in by_pattern.items()
            for t, x in shares.items()
        }
    return shed


def plan_shedding(model: FittedModel, config: AppConfig) -> Decision:
    """Seed 001 on the running system: drop shares at the bottlenecks, placement kept."""
    params = SheddingParams.from_config(config)
    inst = instance_from_model(model, config, params)
    result = plan(inst, params.mode, formulation=params.formulation,
                  limits=Limits(time_s=params.time_limit_s))
    baseline = plan(inst, "none").state.weighted_output(inst)
    state = result.state
    output = state.weighted_output(inst)
    rt_by_sink = state.response_times(inst)
    violations = []
    rt: dict[str, float] = {}
    for q in config.queries:
        worst = max(rt_by_sink[name] for name in _sink_names(q).values())
        if math.isfinite(worst):
            rt[q.name] = worst * 1e3
        else:
            violations.append(f"query {q.name}: unbounded response time (an operator has ρ ≥ 1)")
    for o in state.violations(inst):
        name = inst.operators[o].name
        violations.append(f"operator {name}: M/M/1 sojourn {state.sojourn[o] * 1e3:.3g} ms > "
                          f"bound {inst.bound(o) * 1e3:.3g} ms")
    extra = {f"output[{k}]": v for k, v in state.sink_rates(inst).items()}
    extra["weighted_output"] = output
    extra["recall"] = output / baseline if baseline > 0 else 1.0
    for r in result.rounds:
        o = inst.op_index[r.bottleneck]
        extra[f"p_ms[{r.bottleneck}]"] = state.p[o] * 1e3
        extra[f"rho[{r.bottleneck}]"] = float(state.rho[o])
        extra[f"sojourn_ms[{r.bottleneck}]"] = state.sojourn[o] * 1e3
    runs = [r.result for r in result.rounds]
    status = result.status
    if params.mode == "none":
        status = "degraded" if violations else "feasible"
    solver = SolverStats(
        name="SCIP" if params.mode != "none" else "none",
        version=f"SCIP {pyscipopt.Model().version()} / PySCIPOpt {pyscipopt.__version__}",
        status=status,
        objective=output,
        gap=max((r.gap or 0.0 for r in runs), default=0.0) if runs else None,
        time_s=sum(r.time_s for r in runs),
        n_vars=sum(r.n_vars for r in runs),
        n_conss=sum(r.n_conss for r in runs),
        message=result.message or f"{len(runs)} bottleneck(s): "
        + ", ".join(r.bottleneck for r in result.rounds),
        extra={
            "build_s": sum(r.build_s for r in result.rounds),
            "rounds": float(len(runs)),
            "binaries": float(sum(r.n_binaries for r in runs)),
        },
    )
    return Decision(
        placement={op: [Replicas(node=n, replicas=k) for n, k in entries]
                   for op, entries in model.deployment.placement.items()},
        nodes=dict.fromkeys(model.deployment.nodes, "keep"),
        shedding=_shedding_keys(inst, result),
        predicted=Prediction(response_time_ms=rt, extra=extra),
        solver=solver,
        violations=violations,
    )
