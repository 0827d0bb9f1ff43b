"""Map the application config (and the fitted model) onto EDRP inputs; the two methods.

``plan_edrp`` / ``plan_redrp`` are the registry entry points: service rates μ_i = 1/b_i and
selectivities σ_i come from the fitted model, source rates from the fitted query rate under
the model's rate statistic, and every other λ_i, λ_(i,j) by propagation along the DAG (each
output stream of i carries λ_i·σ_i). ``config_inputs`` builds the same inputs from the
config's simulation section instead (true service times and selectivities): the benchmarks'
path, which needs no telemetry.
"""

from __future__ import annotations

from collections.abc import Mapping

from streamplan.config import AppConfig, ConfigError
from streamplan.fitted import FittedModel
from streamplan.plan import Decision

from ..graphs import operator_dag, propagate_rates, sources
from .inputs import (
    Bounds,
    DataStore,
    EdrpInputError,
    EdrpInputs,
    Multiset,
    Node,
    Operator,
    Stream,
    Weights,
)
from .model import Limits
from .multisets import as_multiset
from .params import EdrpParams, parse_params
from .planner import plan

__all__ = ["build_inputs", "config_inputs", "plan_edrp", "plan_redrp"]


def plan_edrp(model: FittedModel, config: AppConfig) -> Decision:
    """Method ``edrp``: the full EDRP ILP from the current deployment (seed 003, Section 5)."""
    return _plan(model, config, restricted=False)


def plan_redrp(model: FittedModel, config: AppConfig) -> Decision:
    """Method ``redrp``: EDRP restricted to one move per operator (seed 003, Section 7.2)."""
    return _plan(model, config, restricted=True)


def _plan(model: FittedModel, config: AppConfig, *, restricted: bool) -> Decision:
    params = parse_params(config.method.params)
    missing = sorted({o.name for o in config.operators} - set(model.operators))
    if missing:
        raise EdrpInputError(f"fitted model has no operators {missing}")
    mu: dict[str, float] = {}
    for name, op in model.operators.items():
        if op.service_mean_s <= 0:
            raise EdrpInputError(f"fitted model: operators[{name}].service_mean_s must be > 0")
        mu[name] = 1.0 / op.service_mean_s
    src_rates = {s: model.query_rate(q.name) for q in config.queries for s in q.sources}
    placement = model.deployment.placement or config.deployment
    current = {op: as_multiset(entries) for op, entries in placement.items()}
    inputs = build_inputs(
        config,
        params,
        service_rates=mu,
        selectivity={n: op.selectivity for n, op in model.operators.items()},
        source_rates=src_rates,
        current=current,
    )
    return plan(inputs, restricted=restricted, limits=_limits(params))


def _limits(params: EdrpParams) -> Limits:
    return Limits(time_limit_s=params.time_limit_s, gap=params.gap)


def config_inputs(
    config: AppConfig,
    source_rates: Mapping[str, float],
    *,
    current: Mapping[str, Multiset] | None = None,
    weights: Weights | None = None,
) -> EdrpInputs:
    """EDRP inputs from the config alone: μ_i and σ_i from ``config.simulation``."""
    if config.simulation is None:
        raise ConfigError("simulation: required for service rates when no fitted model is given")
    sim = config.simulation
    return build_inputs(
        config,
        parse_params(config.method.params),
        service_rates={op: 1000.0 / s.mean_ms for op, s in sim.service.items()},
        selectivity=sim.selectivity,
        source_rates=source_rates,
        current=current,
        weights=weights,
    )


def build_inputs(
    config: AppConfig,
    params: EdrpParams,
    *,
    service_rates: Mapping[str, float],
    selectivity: Mapping[str, float],
    source_rates: Mapping[str, float],
    current: Mapping[str, Multiset] | None,
    weights: Weights | None = None,
) -> EdrpInputs:
    """Assemble :class:`EdrpInputs`; raises ConfigError naming an unknown operator or node."""
    op_names = [o.name for o in config.operators]
    node_names = {n.name for n in config.nodes}
    _known_names(params, set(op_names), node_names)
    dag = operator_dag(op_names, config.edges)
    rates, streams = propagate_rates(
        dag, {s: source_rates.get(s, 0.0) for s in sources(dag)}, selectivity
    )
    query_of = {o.name: o.query for o in config.operators}
    operators = []
    for name in op_names:
        p = params.operators.get(name)
        operators.append(
            Operator(
                name=name,
                service_rate=service_rates[name],
                input_rate=rates[name],
                max_replicas=(p.max_replicas if p and p.max_replicas else params.max_replicas),
                nodes=tuple(p.pin) if p and p.pin else None,
                resources=p.resources if p else 1.0,
                price=params.replica_price_per_hour,
                state_bytes=p.state_bytes if p else 0.0,
                code_bytes=p.code_bytes if p and p.code_bytes is not None else params.code_bytes,
                query=query_of[name],
            )
        )
    nodes = tuple(
        Node(
            name=n.name,
            capacity=float(config.node_type(n.name).cores),
            speed=config.node_type(n.name).speed,
            spawn_s=params.spawn_s,
            type=n.type,
        )
        for n in config.nodes
    )
    b = params.bounds
    return EdrpInputs(
        operators=tuple(operators),
        streams=tuple(Stream(i, j, rate) for (i, j), rate in streams.items()),
        nodes=nodes,
        links=tuple((lk.src, lk.dst, lk.delay_ms / 1e3) for lk in params.network.links),
        weights=weights or params.weight_values(),
        bounds=Bounds(b.r_max_ms / 1e3, b.c_max_per_hour, b.td_max_s),
        link_cost=params.network.link_cost_per_tps,
        datastore=DataStore(params.datastore.delay_ms / 1e3, params.datastore.rate_mbps * 1e6),
        t_syn_s=params.t_syn_s,
        current=current,
    )


def _known_names(params: EdrpParams, ops: set[str], nodes: set[str]) -> None:
    for op, p in params.operators.items():
        if op not in ops:
            raise ConfigError(f"field 'method.params.operators': unknown operator {op!r}")
        for u in p.pin or ():
            if u not in nodes:
                raise ConfigError(f"field 'method.params.operators.{op}.pin': unknown node {u!r}")
    for k, lk in enumerate(params.network.links):
        for end in (lk.src, lk.dst):
            if end not in nodes:
                raise ConfigError(f"field 'method.params.network.links.{k}': unknown node {end!r}")
