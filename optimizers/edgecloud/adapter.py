"""Map the application config (and the fitted model) onto an edge + cloud instance; the
registry entry points ``topset``, ``topset-p``, ``gai``, ``gag`` and ``edgecloud-milp``.

Mapping (digest §9):

* One query = one DAG: its operators and the edges among them (an edge across queries is an
  error). Sources and sinks are the DAG's structural ones and must match the query's.
* Resources are the config's nodes; edge or cloud from ``NodeType.tier``.
* λ (per operator and node): the fitted ``placement_costs[op].service_mean_s_by_type`` when
  present; for a node type without fitted λ, the fitted λ of the measured types scaled by
  speed (λ_u · speed_u / speed_p, averaged); else the fitted mean service time b, which was
  measured on the operator's current node under co-location, turned into an exclusive time
  on node p as b / (1 + π_host(m_host)) · speed_host / speed_p; else
  ``method.params.operators.<op>.service_ms`` (a number is for a speed-1 node and is divided
  by the node's speed, a mapping is per node type); else the simulation's true mean service
  time / speed.
* π slope per node: fitted ``nodes[n].interference_slope``, else ``method.params.node_types``,
  else the tier default (0.05 edge, 0.02 cloud). κ and battery likewise (fitted
  ``idle_power_w`` / ``battery_wh`` first); ε from fitted ``placement_costs`` energy, else
  params, else 1e-5 J/event on edges.
* Rates: each source's fitted arrival rate under the model's rate statistic, else
  ``method.params.input_rate`` split over the sources, else the first simulation phase, else
  100 ev/s (the paper's Ω^in); selectivities from the fitted model, else the simulation.
* Links: fitted link records per node pair (either direction), else the tier figures in
  ``method.params.links``.
* Sources are pinned to their current node when it is an edge device (the sensor's
  gateway, A8), otherwise to any edge device; ``method.params.operators.<op>.pin`` overrides.

The plan keeps every node (``keep``), places each operator once, and predicts each query's
makespan, each node's utilisation and the edge devices' power and battery margin. A cycle is
an ``error`` decision; an empty battery, a DAG that fits nowhere or no valid GA/MILP
solution is ``infeasible`` with the reason, so nothing is published.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from streamplan.config import AppConfig, ConfigError
from streamplan.fitted import FittedModel
from streamplan.plan import Decision, Prediction, Replicas, SolverStats

from ..graphs import GraphError
from .check import check_plan
from .evaluate import State
from .genetic import GaParams, gag_replan, gai_place
from .milp import MilpLimits, solve_milp
from .model import (
    CLOUD,
    EDGE,
    Dag,
    EdgeCloudInputError,
    Instance,
    Options,
    Resource,
    Vertex,
    compile_dag,
)
from .params import DEFAULT_LINKS, TIER_DEFAULTS, EdgeCloudParams, parse_params
from .rebalance import rebalance
from .topset import topset_place

__all__ = [
    "Built",
    "build_instance",
    "plan_edgecloud_milp",
    "plan_gag",
    "plan_gai",
    "plan_instance",
    "plan_topset",
    "plan_topset_p",
]

DEFAULT_INPUT_RATE = 100.0


def plan_topset(model: FittedModel, config: AppConfig) -> Decision:
    """Method ``topset`` (seed 004, §4.1)."""
    return _plan(model, config, "topset")


def plan_topset_p(model: FittedModel, config: AppConfig) -> Decision:
    """Method ``topset-p``: TopSet with the co-location penalty."""
    return _plan(model, config, "topset-p")


def plan_gai(model: FittedModel, config: AppConfig) -> Decision:
    """Method ``gai``: incremental genetic placement of the arriving DAGs."""
    return _plan(model, config, "gai")


def plan_gag(model: FittedModel, config: AppConfig) -> Decision:
    """Method ``gag``: global genetic re-placement of every DAG."""
    return _plan(model, config, "gag")


def plan_edgecloud_milp(model: FittedModel, config: AppConfig) -> Decision:
    """Method ``edgecloud-milp``: the exact MILP on SCIP (small instances)."""
    return _plan(model, config, "milp")


@dataclass(frozen=True)
class Built:
    """An instance built from a config: resources, DAGs (one per query), current mapping."""

    inst: Instance
    dags: list[Dag]
    current: dict[str, dict[str, str]]
    operator_query: dict[str, str]


def _plan(model: FittedModel | None, config: AppConfig, method: str) -> Decision:
    start = time.perf_counter()
    params = parse_params(config.method.params)
    try:
        built = build_instance(config, params, model)
    except GraphError as exc:
        return _failed(method, "error", str(exc), start)
    except EdgeCloudInputError as exc:
        return _failed(method, "error", str(exc), start)
    return plan_instance(built, params, method, start=start)


def _failed(method: str, status: str, message: str, start: float) -> Decision:
    return Decision(
        placement={},
        nodes={},
        predicted=Prediction(),
        solver=SolverStats(name=method, status=status, time_s=time.perf_counter() - start,
                           message=message),
    )


# --- instance ----------------------------------------------------------------------------------
def _per_type(value, node_type: str, speed: float) -> float | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        return value.get(node_type)
    return float(value) / speed


def build_instance(
    config: AppConfig, params: EdgeCloudParams, model: FittedModel | None = None
) -> Built:
    """The instance of ``config`` (see the module docstring for where each number comes from).

    Raises ConfigError (unknown names in params, a query whose declared sources/sinks are not
    its DAG's, an edge across queries, an operator without a service time) and
    EdgeCloudInputError / GraphError for numbers or graphs the model cannot use.
    """
    types = {t.name: t for t in config.node_types}
    for name in params.node_types:
        if name not in types:
            raise ConfigError(f"field 'method.params.node_types': unknown node type {name!r} "
                              f"(known: {sorted(types)})")
    op_names = [o.name for o in config.operators]
    for name, spec in params.operators.items():
        if name not in op_names:
            raise ConfigError(f"field 'method.params.operators': unknown operator {name!r}")
        for n in spec.pin or ():
            if n not in {x.name for x in config.nodes}:
                raise ConfigError(f"field 'method.params.operators.{name}.pin': unknown node "
                                  f"{n!r}")
    fitted_nodes = model.nodes if model is not None else {}
    resources = []
    for n in config.nodes:
        t = types[n.type]
        spec = params.node_types.get(t.name)
        default = TIER_DEFAULTS[t.tier]
        fit = fitted_nodes.get(n.name)

        def pick(fitted_value, attr, _spec=spec, _default=default):
            if fitted_value is not None:
                return fitted_value
            value = getattr(_spec, attr) if _spec is not None else None
            return value if value is not None else _default[attr]

        slope = pick(fit.interference_slope if fit else None, "interference_slope")
        if t.tier == EDGE:
            battery = pick(fit.battery_wh if fit else None, "battery_wh")
            resources.append(Resource(
                n.name, EDGE, t.name, interference=slope,
                idle_w=pick(fit.idle_power_w if fit else None, "idle_power_w"),
                battery_j=battery * 3600.0, recharge_s=pick(None, "recharge_s"),
                net_j_per_byte=spec.net_j_per_byte if spec else 0.0))
        else:
            resources.append(Resource(n.name, CLOUD, t.name, interference=slope))
    node_index = {r.name: i for i, r in enumerate(resources)}
    node_type = {n.name: types[n.type] for n in config.nodes}
    current_nodes = model.deployment.placement if model is not None and \
        model.deployment.placement else config.deployment
    current = {op: entries[0][0] for op, entries in current_nodes.items()
               if entries and entries[0][0] in node_index}
    op_query = {o.name: o.query for o in config.operators}

    # λ and ε per operator (kind) and node
    n_ops, n_res = len(op_names), len(resources)
    service = np.zeros((n_ops, n_res))
    energy = np.zeros((n_ops, n_res))
    source_ops = {s for q in config.queries for s in q.sources}
    counts: dict[str, int] = {}  # m of each node under the current deployment (non-sources)
    for op, node in current.items():
        if op not in source_ops or not params.sources_free:
            counts[node] = counts.get(node, 0) + 1
    for k, op in enumerate(op_names):
        costs = model.placement_costs.get(op) if model is not None else None
        fitted_b = model.operators[op].service_mean_s if model is not None and \
            op in model.operators else 0.0
        spec = params.operators.get(op)
        sim = config.simulation.service.get(op) if config.simulation is not None else None
        for p, r in enumerate(resources):
            t = node_type[r.name]
            lam = costs.service_mean_s_by_type.get(t.name) if costs else None
            if lam is None and costs and costs.service_mean_s_by_type:
                lam = _scaled_service(costs.service_mean_s_by_type, types, t.speed)
            if lam is None and fitted_b > 0 and op in current:
                host = current[op]
                host_slope = resources[node_index[host]].interference
                lam = (fitted_b / (1 + host_slope * max(counts.get(host, 0) - 1, 0))
                       * node_type[host].speed / t.speed)
            if lam is None and spec is not None:
                ms = _per_type(spec.service_ms, t.name, t.speed)
                lam = ms / 1e3 if ms is not None else None
            if lam is None and sim is not None:
                lam = sim.mean_ms / 1e3 / t.speed
            if lam is None:
                raise ConfigError(
                    f"operator {op}: no service time on node type {t.name!r} (fitted model, "
                    f"'method.params.operators.{op}.service_ms' or 'simulation.service')")
            service[k, p] = lam
            e = costs.energy_j_per_event_by_type.get(t.name) if costs else None
            if e is None and spec is not None:
                e = _per_type(spec.energy_j_per_event, t.name, 1.0)
            if e is None:
                tspec = params.node_types.get(t.name)
                e = tspec.energy_j_per_event if tspec and tspec.energy_j_per_event is not None \
                    else TIER_DEFAULTS[t.tier]["energy_j_per_event"]
            energy[k, p] = e

    # links: tier figures, then fitted records (a record also serves the reverse direction
    # unless that direction has its own)
    links = _tier_links(params)
    lat = np.zeros((n_res, n_res))
    bw = np.full((n_res, n_res), np.inf)
    for p, a in enumerate(resources):
        for q, b in enumerate(resources):
            if p != q:
                spec = links["-".join(sorted((a.tier, b.tier), key=(EDGE, CLOUD).index))]
                lat[p, q] = spec.latency_ms / 1e3
                bw[p, q] = spec.bandwidth_mbps * 1e6 / 8
    fitted_links = model.links if model is not None else []
    direct = {(lk.src, lk.dst) for lk in fitted_links}
    for i, lk in enumerate(fitted_links):
        if lk.src not in node_index or lk.dst not in node_index or lk.src == lk.dst:
            continue
        if not lk.bandwidth_mbps > 0:
            raise EdgeCloudInputError(
                f"fitted model: links[{i}] ({lk.src} -> {lk.dst}) bandwidth_mbps must be > 0, "
                f"got {lk.bandwidth_mbps!r}")
        p, q = node_index[lk.src], node_index[lk.dst]
        pairs = [(p, q)] if (lk.dst, lk.src) in direct else [(p, q), (q, p)]
        for x, y in pairs:
            lat[x, y] = lk.latency_ms / 1e3
            bw[x, y] = lk.bandwidth_mbps * 1e6 / 8
    inst = Instance(
        tuple(resources), tuple(op_names), service, energy, lat, bw,
        Options(params.latency_mode, params.capacity_mode, params.include_sink_compute,
                params.sources_free),
    )

    # DAGs
    edges_of: dict[str, list[tuple[str, str]]] = {q.name: [] for q in config.queries}
    for i, (a, b) in enumerate(config.edges):
        if op_query[a] != op_query[b]:
            raise ConfigError(f"field 'edges[{i}]': edge ({a}, {b}) joins queries "
                              f"{op_query[a]!r} and {op_query[b]!r}; each query must be its "
                              f"own DAG for edge/cloud placement")
        edges_of[op_query[a]].append((a, b))
    dags = []
    for q in config.queries:
        ops = config.query_operators(q.name)
        has_in = {b for _, b in edges_of[q.name]}
        has_out = {a for a, _ in edges_of[q.name]}
        srcs = [o for o in ops if o not in has_in]
        snks = [o for o in ops if o not in has_out]
        if sorted(srcs) != sorted(q.sources) or sorted(snks) != sorted(q.sinks):
            raise ConfigError(
                f"field 'queries[{q.name}]': sources {q.sources} / sinks {q.sinks} differ from "
                f"the DAG's operators without inputs {srcs} / without outputs {snks}")
        verts = []
        for op in ops:
            spec = params.operators.get(op)
            costs = model.placement_costs.get(op) if model is not None else None
            sel = (model.operators[op].selectivity if model is not None and op in model.operators
                   else (spec.selectivity if spec and spec.selectivity is not None
                         else (config.simulation.selectivity.get(op, 1.0)
                               if config.simulation is not None else 1.0)))
            delta = (costs.event_bytes if costs and costs.event_bytes is not None
                     else (spec.event_bytes if spec and spec.event_bytes is not None
                           else params.event_bytes))
            pin = tuple(spec.pin) if spec and spec.pin else None
            if pin is None and op in srcs and op in current and \
                    resources[node_index[current[op]]].tier == EDGE:
                pin = (current[op],)
            verts.append(Vertex(op, op, selectivity=sel, event_bytes=delta, pin=pin))
        rates = _source_rates(config, params, model, q.name, srcs)
        dags.append(Dag(q.name, tuple(verts), tuple(edges_of[q.name]),
                        input_rate=sum(rates.values()), source_rates=rates))
    cur = {d.name: {v.name: current[v.name] for v in d.vertices if v.name in current}
           for d in dags}
    return Built(inst, dags, cur, op_query)


def _scaled_service(by_type: Mapping[str, float], types: Mapping, speed: float) -> float | None:
    """Exclusive λ on a node type without telemetry: the mean over the measured types of
    λ_u · speed_u / speed (service time inversely proportional to speed, as in the
    simulator); None when no measured type is in the catalogue."""
    known = [lam * types[u].speed / speed for u, lam in by_type.items() if u in types]
    return sum(known) / len(known) if known else None


def _tier_links(params: EdgeCloudParams):
    return {**DEFAULT_LINKS, **params.links}


def _source_rates(config: AppConfig, params: EdgeCloudParams, model: FittedModel | None,
                  query: str, srcs: Sequence[str]) -> dict[str, float]:
    if model is not None and all(s in model.operators for s in srcs):
        stat = model.rate_statistic
        rates = {s: getattr(model.operators[s], f"arrival_rate_{stat}") for s in srcs}
        if sum(rates.values()) > 0:
            return rates
    if params.input_rate is not None:
        total = params.input_rate
    elif config.simulation is not None and query in config.simulation.workload[0].rates:
        total = config.simulation.workload[0].rates[query]
    else:
        total = DEFAULT_INPUT_RATE
    return {s: total / len(srcs) for s in srcs}


# --- planning ----------------------------------------------------------------------------------
def plan_instance(built: Built, params: EdgeCloudParams, method: str, *,
                  start: float | None = None) -> Decision:
    """Plan every DAG of ``built`` with ``method`` and answer with a Decision."""
    start = time.perf_counter() if start is None else start
    inst = built.inst
    empty = inst.empty_edges()
    if empty:
        r = inst.resources[inst.index[empty[0]]]
        return _failed(method, "infeasible",
                       f"edge device {r.name} has an empty battery: C = {r.battery_j:g} J < idle "
                       f"drain τκ = {r.idle_drain_j:g} J, so E7 fails even with nothing on it"
                       + (f" (also {empty[1:]})" if len(empty) > 1 else ""), start)
    state = State(inst)
    arriving = list(built.dags)
    kept: list[str] = []
    if params.replan == "arrivals" and method != "gag":
        arriving = []
        for dag in built.dags:
            if _keep(state, dag, built.current.get(dag.name, {})):
                kept.append(dag.name)
            else:
                arriving.append(dag)
    ga = GaParams(population=params.ga.population, generations=params.ga.generations,
                  tournament=params.ga.tournament, crossover=params.ga.crossover,
                  mutation=params.ga.mutation, elitism=min(params.ga.elitism,
                                                           params.ga.population - 1),
                  min_generations=params.ga.min_generations,
                  time_limit_s=params.ga.time_limit_s, seed=params.seed)
    status, note, stats = "heuristic", "", {}
    try:
        if method in ("topset", "topset-p"):
            for dag in arriving:
                res = topset_place(state, dag, penalty=method == "topset-p")
                if not res.ok:
                    return _failed(method, "infeasible", res.reason, start)
        elif method == "gai":
            for dag in arriving:
                res, out = gai_place(state, dag, ga)
                if not res.ok:
                    return _failed(method, "infeasible", res.reason, start)
                stats["ga_generations"] = stats.get("ga_generations", 0) + out.generations
        elif method == "gag":
            infos = [compile_dag(d, inst) for d in built.dags]
            new, out = gag_replan(inst, infos, ga)
            if new is None:
                return _failed(method, "infeasible",
                               f"GAG found no valid placement in {out.generations} generations "
                               f"(best chromosome breaks {out.best_violations} constraints)",
                               start)
            state = new
            stats["ga_generations"] = out.generations
        elif method == "milp":
            infos = [compile_dag(d, inst) for d in arriving]
            if infos:
                res = solve_milp(inst, infos, MilpLimits(time_limit_s=params.milp_time_limit_s),
                                 background=state if kept else None)
                if res.mapping is None:
                    why = ("SCIP proved that no placement meets E4–E7"
                           if res.status == "infeasible"
                           else f"no solution found (SCIP status {res.scip_status})")
                    return _failed(method, res.status, why, start)
                for info in infos:
                    state.register(info)
                    state.place_all(info.name, res.mapping[info.name])
                status = res.status
                stats.update(gap=res.gap or 0.0, n_vars=res.n_vars, n_conss=res.n_conss)
        else:
            raise ValueError(f"unknown method {method!r}")
    except (GraphError, ValueError) as exc:  # e.g. MILP in interfered mode with kept DAGs
        return _failed(method, "error", str(exc), start)
    moves = 0
    if params.rebalance != "none" and method in ("topset", "topset-p", "gai"):
        rb = rebalance(state, params.rebalance)
        moves = len(rb.moves)
        note = f"; rebalance {params.rebalance}: {moves} moves, L̂ −{rb.gain_s * 1e3:.3f} ms"
    return _decision(built, state, method, status, kept, arriving, moves, note, stats, start)


def _keep(state: State, dag: Dag, current: Mapping[str, str]) -> bool:
    """Place ``dag`` at its current mapping if that is complete and keeps E4–E7."""
    inst = state.inst
    if any(v.name not in current for v in dag.vertices):
        return False
    info = state.register(dag)
    res = [inst.index[current[v.name]] for v in dag.vertices]
    if any(p not in set(info.allowed[i].tolist()) for i, p in enumerate(res)):
        state.unregister(dag.name)
        return False
    state.place_all(dag.name, res)
    if all(state.resource_ok(p) for p in set(res)) and not state.violations():
        return True
    state.unregister(dag.name)
    return False


def _decision(built: Built, state: State, method: str, status: str, kept: list[str],
              arriving: list[Dag], moves: int, note: str, stats: dict, start: float
              ) -> Decision:
    inst = state.inst
    assignment = state.assignment()
    claimed = {d: state.makespan(d) for d in state.dags}
    report = check_plan(inst, built.dags, assignment, claimed_s=claimed)
    if not report.ok:
        return _failed(method, "error", "plan failed the independent check: "
                       + "; ".join(report.violations[:5]), start)
    m = state.metrics()
    placement = {v: [Replicas(node=n, replicas=1)] for d in assignment.values()
                 for v, n in d.items()}
    migrated = sum(1 for d, mapping in assignment.items() for v, n in mapping.items()
                   if built.current.get(d, {}).get(v, n) != n)
    margins = [inst.resources[p].battery_j - inst.resources[p].recharge_s
               * state.battery_load_w(int(p)) for p in inst.edge_ids]
    paths = []
    for d in sorted(state.dags):
        info = state.dags[d]
        cp = state.critical_path(d)
        paths.append(f"{d}: " + " > ".join(
            f"{info.names[v]}@{inst.resources[state.mapping[d][v]].name}" for v in cp))
    extra = {
        "makespan_sum_ms": m.makespan_sum_s * 1e3,
        "edge_power_w": m.edge_power_w,
        "min_battery_margin_wh": (min(margins) / 3600.0) if margins else math.inf,
        "migrations": float(migrated),
        "rebalance_moves": float(moves),
        "kept_dags": float(len(kept)),
        "placed_dags": float(len(arriving)) if method != "gag" else float(len(built.dags)),
    }
    extra = {k: v for k, v in extra.items() if math.isfinite(v)}
    elapsed = time.perf_counter() - start
    return Decision(
        placement=placement,
        nodes={r.name: "keep" for r in inst.resources},
        node_types={r.name: r.type for r in inst.resources},
        predicted=Prediction(
            response_time_ms={d: s * 1e3 for d, s in m.makespan_s.items()},
            node_utilisation=m.utilisation,
            extra=extra,
        ),
        solver=SolverStats(
            name="scip" if method == "milp" else method,
            status=status,
            objective=m.makespan_sum_s * 1e3,
            gap=stats.get("gap"),
            time_s=elapsed,
            n_vars=stats.get("n_vars"),
            n_conss=stats.get("n_conss"),
            message=f"{method}: kept {len(kept)} DAGs, placed {len(arriving)}{note}; critical "
                    f"paths: " + "; ".join(paths),
            extra={k: float(v) for k, v in stats.items() if k in ("ga_generations",)},
        ),
    )
