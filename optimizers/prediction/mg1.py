"""Seed 000's single-server abstraction behind the :class:`ResponseTimeModel` interface.

Each query (EPN) is one M/G/1 class on the node hosting most of its operators (as
``optimizers/epn_plan.py`` places it), with ``b_i = Σ v_k b_k`` and
``M_2,i = b_i² + Σ v_k Var_k`` (digest 000 §9, as ``pipelines/fit.py`` fits it); classes on
the same node share one FIFO queue (``optimizers/queueing.py``, P-K).
"""

from __future__ import annotations

import math
from collections import Counter

from optimizers.prediction.base import RtPrediction
from optimizers.prediction.scenarios import Scenario
from optimizers.queueing import EpnLoad, node_load, response_times

__all__ = ["Mg1SingleServer", "epn_loads"]


def epn_loads(scenario: Scenario) -> dict[str, list[EpnLoad]]:
    """Node -> the EPN classes seed 000 puts there (target unused, set to 1 s)."""
    visits = scenario.visits()
    hosted: dict[str, list[EpnLoad]] = {}
    for q in scenario.queries:
        ops = [o for o in scenario.ops if o.query == q.name]
        b = sum(visits[o.name] * o.mean_s for o in ops)
        var = sum(visits[o.name] * (o.m2_s2 - o.mean_s**2) for o in ops)
        counts = Counter(n for o in ops for n in set(o.nodes))
        node = min(counts, key=lambda n: (-counts[n], n))
        hosted.setdefault(node, []).append(EpnLoad(q.name, q.rate, b, b * b + var, 1.0))
    return hosted


class Mg1SingleServer:
    """Seed 000's model: whole query as one M/G/1 class on one node."""

    name = "mg1_single_server"

    def predict(self, scenario: Scenario) -> RtPrediction:
        """Per-query ``W_i = b_i + W_0/(1−ρ)`` in ms; ``inf`` with a reason when ρ ≥ 1."""
        rt: dict[str, float] = {}
        unstable: dict[str, str] = {}
        for node, classes in epn_loads(scenario).items():
            for q, w in response_times(classes).items():
                rt[q] = w * 1000.0
                if not math.isfinite(w):
                    rho = node_load(classes)
                    unstable[q] = f"single-server load on {node!r} is rho={rho:.4g} >= 1"
        return RtPrediction(self.name, rt, unstable)

    def job_moments(self, scenario: Scenario, query: str) -> tuple[float, float]:
        """``b_i`` and ``M_2,i = b_i² + Σ v_k Var_k`` (digest 000 §9)."""
        load = next(c for cs in epn_loads(scenario).values() for c in cs if c.name == query)
        return load.service_mean_s, load.service_m2_s2
