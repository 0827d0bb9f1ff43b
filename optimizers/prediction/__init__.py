"""Response-time prediction: one interface (:class:`ResponseTimeModel`), models by name.

``mg1_single_server`` is seed 000's single-server M/G/1 abstraction (``optimizers/queueing.py``);
``qna_decomposition`` decomposes each query over its nodes with Whitt's QNA flows. A planner
picks one with ``method.params.rt_model``.
"""

from __future__ import annotations

from optimizers.prediction.base import ResponseTimeModel, RtPrediction
from optimizers.prediction.mg1 import Mg1SingleServer
from optimizers.prediction.qna import QnaDecomposition
from optimizers.prediction.scenarios import Op, Query, Scenario, ScenarioError

__all__ = [
    "MODELS",
    "Op",
    "Query",
    "ResponseTimeModel",
    "RtPrediction",
    "Scenario",
    "ScenarioError",
    "get_model",
]

MODELS: dict[str, ResponseTimeModel] = {
    m.name: m for m in (Mg1SingleServer(), QnaDecomposition())
}


def get_model(name: str) -> ResponseTimeModel:
    """The model called ``name``.

    Raises
    ------
    ValueError
        When no model has that name (the message names ``method.params.rt_model``).

    Examples
    --------
    >>> get_model("qna_decomposition").name
    'qna_decomposition'
    """
    if name not in MODELS:
        raise ValueError(
            f"method.params.rt_model: unknown model {name!r} (known: {sorted(MODELS)})"
        )
    return MODELS[name]
