"""Seed 001: global LP load shedding for distributed CEP, with local-LP and no-shedding
baselines (Röger, Bhowmik, Rothermel).

Modules: :mod:`.instance` (typed input), :mod:`.fluid` (selectivity functions and the M/M/1
bound), :mod:`.lp` (PySCIPOpt model: build, solve, extract), :mod:`.planner` (bottleneck
rounds), :mod:`.simulate` (Lindley-recursion check), :mod:`.adapter` (fitted model and
config → :class:`streamplan.plan.Decision`).
"""

from .adapter import SheddingParams, plan_shedding

__all__ = ["SheddingParams", "plan_shedding"]
