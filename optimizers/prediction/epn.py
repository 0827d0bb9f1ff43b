"""The configured response-time model inside seed 000's EPN planners.

Seed 000's planners keep every query (EPN) on one node, where a node is a multi-class M/G/1
station; the models differ in the second moment of an EPN's work per event. This module
rebuilds each EPN's operators on one node from the fitted model and asks the configured
model for that moment (``ResponseTimeModel.job_moments``).
"""

from __future__ import annotations

from dataclasses import replace

from optimizers.prediction import get_model
from optimizers.prediction.scenarios import Op, Query, Scenario, ScenarioError
from optimizers.queueing import EpnLoad
from streamplan.config import AppConfig
from streamplan.fitted import FittedModel

__all__ = ["epn_scenario", "loads_for_model"]


def epn_scenario(model: FittedModel, config: AppConfig, query: str) -> Scenario:
    """One query's operators on one node with their fitted service mean, SCV and
    selectivity, at the query's fitted input rate.

    Raises
    ------
    ScenarioError
        When an operator has no fitted model, a zero service mean or a selectivity > 1.
    """
    q = next(x for x in config.queries if x.name == query)
    ops = []
    for name in config.query_operators(query):
        if name not in model.operators:
            raise ScenarioError(f"model.operators: no fitted model for operator {name!r}")
        om = model.operators[name]
        ops.append(Op(name, query, ("epn",), om.service_mean_s * 1000.0, scv=om.service_scv,
                      selectivity=om.selectivity))
    names = set(config.query_operators(query))
    edges = tuple((a, b) for a, b in config.edges if a in names)
    rate = model.query_rate(query)
    return Scenario(query, tuple(ops), edges, (Query(query, rate, tuple(q.sources),
                                                     tuple(q.sinks)),))


def loads_for_model(
    loads: list[EpnLoad], model: FittedModel, config: AppConfig, rt_model: str
) -> tuple[list[EpnLoad], list[str]]:
    """The EPN loads with ``M_2`` from the model ``rt_model``: the fitted mean ``b_i`` (which
    may come from the low-load calibration) is kept and the model's SCV applied to it.

    An EPN whose operators cannot form a scenario keeps its fitted ``M_2``; a note says why.
    """
    rtm = get_model(rt_model)
    out: list[EpnLoad] = []
    notes: list[str] = []
    for load in loads:
        try:
            mean, m2 = rtm.job_moments(epn_scenario(model, config, load.name), load.name)
        except ScenarioError as exc:
            notes.append(f"query {load.name}: rt_model {rt_model} not applied ({exc})")
            out.append(load)
            continue
        scv = m2 / mean**2 - 1.0 if mean > 0 else 1.0
        out.append(replace(load, service_m2_s2=(1.0 + scv) * load.service_mean_s**2))
    return out, notes
