"""Energy-aware placement of many dataflow DAGs across edge devices and cloud VMs (seed 004,
Ghosh et al.).

Modules: :mod:`.model` (instance, DAGs, options), :mod:`.evaluate` (makespan, capacity and
energy state), :mod:`.topset` (TopSet, TopSet/P), :mod:`.genetic` (GAI, GAG),
:mod:`.rebalance` (vertex, edge, vertex + edge), :mod:`.milp` (exact model on SCIP),
:mod:`.check` (independent checker, brute force), :mod:`.generator` (the paper's workload),
:mod:`.loop` (control loop over arrivals and departures), :mod:`.params` and
:mod:`.adapter` (app config + fitted model → instance → :class:`streamplan.plan.Decision`).
"""

from .check import CheckReport, brute_force, check_plan
from .evaluate import Metrics, State
from .genetic import GaParams, GaResult, gag_replan, gai_place, run_ga
from .model import (
    CLOUD,
    EDGE,
    Dag,
    DagInfo,
    EdgeCloudInputError,
    Instance,
    Options,
    Resource,
    Vertex,
    compile_dag,
)
from .rebalance import STRATEGIES, rebalance
from .topset import PlaceResult, topset_place

__all__ = [
    "CLOUD",
    "EDGE",
    "STRATEGIES",
    "CheckReport",
    "Dag",
    "DagInfo",
    "EdgeCloudInputError",
    "GaParams",
    "GaResult",
    "Instance",
    "Metrics",
    "Options",
    "PlaceResult",
    "Resource",
    "State",
    "Vertex",
    "brute_force",
    "check_plan",
    "compile_dag",
    "gag_replan",
    "gai_place",
    "rebalance",
    "run_ga",
    "topset_place",
]
