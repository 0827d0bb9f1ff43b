"""Solve an EDRP instance end to end and answer with a :class:`streamplan.plan.Decision`.

Infeasibility is reported, never raised: a disconnected network, an operator without any
feasible multiset, too little capacity or a proven-infeasible ILP all give status
``infeasible`` with the reason; a cyclic operator graph gives ``error``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace

from streamplan.plan import Decision, NodeAction, Prediction, Replicas, SolverStats

from ..graphs import GraphError, operator_dag
from .check import evaluate
from .inputs import EdrpInputs, Multiset
from .model import Limits, build_model, extract, solve, warm_start
from .multisets import action, placement_of

__all__ = ["plan"]


def plan(
    inputs: EdrpInputs,
    *,
    restricted: bool = False,
    limits: Limits = Limits(),
    y_binary: bool = False,
) -> Decision:
    """EDRP (or rEDRP with ``restricted``) for one instance; U_0 = ``inputs.current``."""
    name = "redrp" if restricted and inputs.current is not None else "edrp"
    start = time.perf_counter()
    try:
        operator_dag([o.name for o in inputs.operators], [(s.src, s.dst) for s in inputs.streams])
    except GraphError as exc:
        return _failed("error", str(exc), start)
    capacity = sum(n.capacity for n in inputs.nodes)
    needed = sum(o.resources for o in inputs.operators)
    if needed > capacity:
        return _failed(
            "infeasible",
            f"capacity too small: one replica per operator needs {needed:g} resources, "
            f"the nodes offer {capacity:g}",
            start,
        )
    try:
        model, handles = build_model(inputs, restricted=restricted, y_binary=y_binary)
    except GraphError as exc:
        return _failed("infeasible", str(exc), start)
    empty = handles.space.empty_operators()
    if empty:
        reasons = "; ".join(f"{op} (dropped: {why})" for op, why in empty.items())
        return _failed("infeasible", f"no feasible deployment for operator {reasons}", start)
    if inputs.current is not None and warm_start(model, handles, inputs.current):
        limits = replace(limits, heuristics=False)  # U_0 is a feasible incumbent already
    result = solve(model, limits)
    stats = dict(
        name="scip",
        version=result.version,
        objective=result.objective,
        bound=result.bound,
        gap=result.gap,
        time_s=result.time_s,
        n_vars=handles.n_vars,
        n_conss=handles.n_conss,
        extra={
            "build_s": handles.build_s,
            "n_x": sum(len(v) for v in handles.x.values()),
            "n_y": sum(len(v) for v in handles.y.values()),
            "n_paths": len(handles.space.paths),
            "n_pruned": sum(sum(c.values()) for c in handles.space.pruned.values()),
            "bb_nodes": result.bb_nodes,
        },
    )
    if result.status in ("infeasible", "error"):
        reason = (
            "SCIP proved the instance infeasible: the bounds R_max, C_max, T_D,max and the "
            "node capacities cannot all be met"
            if result.status == "infeasible"
            else f"no solution found (SCIP status {result.scip_status})"
        )
        return Decision(
            placement={},
            nodes={},
            predicted=Prediction(),
            solver=SolverStats(status=result.status, message=reason, **stats),
        )
    chosen = extract(model, handles)
    return _decision(inputs, chosen, result.status, result.scip_status, name, stats)


def _failed(status: str, message: str, start: float) -> Decision:
    return Decision(
        placement={},
        nodes={},
        predicted=Prediction(),
        solver=SolverStats(
            name="scip", status=status, time_s=time.perf_counter() - start, message=message
        ),
    )


def _decision(
    inputs: EdrpInputs,
    chosen: Mapping[str, Multiset],
    status: str,
    scip_status: str,
    method: str,
    stats: dict,
) -> Decision:
    ev = evaluate(inputs, chosen)
    current = inputs.current or {}
    before = {u for ms in current.values() for u in ms}
    after = {u for ms in chosen.values() for u in ms}
    nodes: dict[str, NodeAction] = {u: "keep" if u in before else "hire" for u in after}
    nodes.update({u: "release" for u in before - after})
    by_name = {n.name: n for n in inputs.nodes}
    load: Counter[str] = Counter()
    res_i = {o.name: o.resources for o in inputs.operators}
    for i, ms in chosen.items():
        for u, n in Counter(ms).items():
            load[u] += n * res_i[i]
    actions = {i: action(current.get(i), ms) for i, ms in chosen.items()}
    moved = {i: a for i, a in actions.items() if a not in ("none", "deploy")}
    w, b = inputs.weights, inputs.bounds
    return Decision(
        placement={
            i: [Replicas(node=u, replicas=n) for u, n in placement_of(ms)]
            for i, ms in chosen.items()
        },
        nodes=nodes,
        node_types={u: by_name[u].type for u in after},
        predicted=Prediction(
            response_time_ms={q: s * 1e3 for q, s in ev.query_s.items()},
            node_utilisation={u: load[u] / by_name[u].capacity for u in sorted(after)},
            cost_per_hour=ev.cost,
            downtime_s=ev.downtime_s,
            extra={
                "response_time_ms": ev.response_s * 1e3,
                "cost_replicas_per_hour": ev.cost_replicas,
                "cost_network_per_hour": ev.cost_network,
                "objective_F": ev.objective,
                "term_response": w.r * ev.response_s / b.r_max_s,
                "term_cost": w.c * ev.cost / b.c_max,
                "term_downtime": w.d * ev.downtime_s / b.td_max_s,
                "replicas": float(sum(len(ms) for ms in chosen.values())),
                "reconfigured_operators": float(len(moved)),
            },
        ),
        solver=SolverStats(
            status=status,
            message=f"{method}: SCIP {scip_status}"
            + (f"; {', '.join(f'{i} {a}' for i, a in sorted(moved.items()))}" if moved else ""),
            **stats,
        ),
    )
