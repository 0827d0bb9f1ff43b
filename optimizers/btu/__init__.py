"""Seed 002 (Hochreiner et al.): BTU-aware elastic provisioning vs the threshold baseline.

Modules: :mod:`~optimizers.btu.inputs` (typed inputs and parameters),
:mod:`~optimizers.btu.state` (VMs with their BTU clock), :mod:`~optimizers.btu.policy`
(Alg. 1–3, Figs. 4–5), :mod:`~optimizers.btu.threshold` (baseline),
:mod:`~optimizers.btu.milp` (exact one-step MILP on SCIP), :mod:`~optimizers.btu.cost`
(leasing + SLA penalties), :mod:`~optimizers.btu.sim` and :mod:`~optimizers.btu.replay`
(fast simulation of a run), :mod:`~optimizers.btu.workload` (the paper's setting),
:mod:`~optimizers.btu.adapter` (``method: btu`` / ``btu-threshold``).
"""

from .adapter import plan_btu, plan_btu_threshold, predict_observations
from .cost import LEVELS, Leasing, SlaCounts, leasing, paid_btus, totals
from .inputs import BtuInputError, BtuParams, OperatorType, VmType, check_fits
from .milp import (
    StepHost,
    StepInstance,
    StepResult,
    StepSolution,
    brute_force,
    build_model,
    extract,
    solve,
    solve_step,
    step_cost,
)
from .params import BtuMethodParams, parse_params
from .policy import btu_step, host_score, regression_prediction, uptrigger, utility
from .replay import ExactSettings, ReplayResult, replay
from .state import Action, Cluster, Host, Observation
from .threshold import threshold_step

__all__ = [
    "LEVELS",
    "Action",
    "BtuInputError",
    "BtuMethodParams",
    "BtuParams",
    "Cluster",
    "ExactSettings",
    "Host",
    "Leasing",
    "Observation",
    "OperatorType",
    "ReplayResult",
    "SlaCounts",
    "StepHost",
    "StepInstance",
    "StepResult",
    "StepSolution",
    "VmType",
    "brute_force",
    "btu_step",
    "build_model",
    "check_fits",
    "extract",
    "host_score",
    "leasing",
    "paid_btus",
    "parse_params",
    "plan_btu",
    "plan_btu_threshold",
    "predict_observations",
    "regression_prediction",
    "replay",
    "solve",
    "solve_step",
    "step_cost",
    "threshold_step",
    "totals",
    "uptrigger",
    "utility",
]
