"""EDRP: elastic replication and placement of stream operators as an ILP (seed 003).

``build_model`` / ``solve`` / ``extract`` are the three solver steps; ``plan`` runs them on
typed :mod:`~optimizers.edrp.inputs` and returns a :class:`streamplan.plan.Decision`;
:mod:`~optimizers.edrp.adapter` maps the fitted model and application config onto the inputs.
"""

from .adapter import build_inputs, config_inputs, plan_edrp, plan_redrp
from .check import Evaluation, evaluate, violations
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
from .model import EdrpVars, Limits, SolveResult, build_model, extract, solve, warm_start
from .params import WEIGHT_PRESETS, EdrpParams, parse_params
from .planner import plan

__all__ = [
    "WEIGHT_PRESETS",
    "Bounds",
    "DataStore",
    "EdrpInputError",
    "EdrpInputs",
    "EdrpParams",
    "EdrpVars",
    "Evaluation",
    "Limits",
    "Multiset",
    "Node",
    "Operator",
    "SolveResult",
    "Stream",
    "Weights",
    "build_inputs",
    "build_model",
    "config_inputs",
    "evaluate",
    "extract",
    "parse_params",
    "plan",
    "plan_edrp",
    "plan_redrp",
    "solve",
    "violations",
    "warm_start",
]
