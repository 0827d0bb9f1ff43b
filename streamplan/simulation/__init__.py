"""Telemetry simulator: the demo's world and the tests' "measured" (design.md, Simulator).

Model
-----
* Nodes are FCFS stations. A node type has ``cores`` servers and a ``speed``: every service
  time is divided by the speed of the node the record runs on. A single-core node is solved
  exactly by the vectorised Lindley recursion (``fcfs_departures``); a multi-core node by an
  exact M/G/c loop in which each job, in arrival order, takes the earliest free core.
* Input events of query q arrive as a Poisson process whose rate is piecewise constant over
  the workload timeline (``simulation.workload`` phases, ``start_s`` from the timeline
  start; a query absent from a phase has rate 0). Each event puts one record at each of the
  query's source operators.
* A record processed by operator o produces floor(s) + Bernoulli(s - floor(s)) output
  records, s = ``simulation.selectivity`` (default 1), each sent to every successor along
  ``config.edges``. Service times per record follow the operator's ``ServiceSpec``
  (exponential; deterministic; lognormal or uniform with the given mean and scv).
* Replicas: each record picks one of the operator's instances uniformly at random
  (instance = replica index over all placement entries of the operator, in order).
* Run to completion per node (an operator chain in one thread; seed 000's EPN as one
  M/G/1 super-operator): the records an event brings to a node, and all their descendants
  on that node, form one job whose service is the sum of their service times; a job runs
  its records in operator topological order (parents first). A descendant placed on another
  node joins the job (parent job, node) there, which arrives when the parent job departs.
  Nodes are solved in topological order of the node graph induced by these job links; when
  that graph has a cycle (e.g. replicas of consecutive operators spread over two nodes),
  an exact event-driven loop is used instead (slower, Python per job).
* A query's response time for an event runs from its arrival to the completion of the last
  sink record it caused (to the completion of its last record if it reached no sink).
  Only events completed by the end of the interval count. Every interval starts empty.

Telemetry (design.md, Telemetry contract), per window of ``config.window_s``, ``ts`` = window
end: ``operator`` records per instance (counters and service sums of the records completing
in the window, so ``busy_ms`` = ``service_ms_sum``; ``queue_len`` = records available at the
node but not yet started at the window end), ``query`` records (events completing in the
window), ``node`` records (``cpu_util`` = exact busy core-time fraction of the window, so it
can differ slightly from the operators' ``busy_ms`` sum for records straddling a window
edge; illustrative linear ``mem_util`` and ``power_w``), one ``deployment`` record.

Edge + cloud (seed 004), only when ``simulation.node_types`` / ``simulation.links`` are set
(``edgecloud.py``): a node of a listed type reports ``cpu_util`` x (1 + slope·(m − 1)) for m
operators with records in the window (operators' ``busy_ms`` stays exclusive), ``power_w`` =
κ + ε·records/s and ``battery_wh`` drained from the given charge (full at the interval start);
``link`` records per ordered node pair and window carry the tier pair's latency and bandwidth.
"""

from streamplan.simulation.engine import SimulationResult, simulate
from streamplan.simulation.queueing import fcfs_departures, fcfs_multi_departures
from streamplan.simulation.telemetry import write_ndjson

__all__ = [
    "SimulationResult",
    "fcfs_departures",
    "fcfs_multi_departures",
    "simulate",
    "write_ndjson",
]
