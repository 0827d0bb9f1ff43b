"""What each `streamplan` subcommand does, and the demo's summary."""

from __future__ import annotations

import argparse
import time
from datetime import timedelta
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from streamplan import stages
from streamplan.config import AppConfig
from streamplan.fitted import FittedModel
from streamplan.plan import Plan, plan_id_for
from streamplan.publish import current_plan
from streamplan.settings import Settings
from streamplan.stages import Interval

console = Console()


def _deployment_now(settings: Settings, config: AppConfig) -> tuple[dict, dict]:
    live = current_plan(settings.publish_dir, config.app)
    types = {n.name: n.type for n in config.nodes}
    if live is None:
        return dict(config.deployment), types
    placement = {op: [(e.node, e.replicas) for e in es] for op, es in live.placement.items()}
    return placement, {**types, **live.node_types}


def cmd_simulate(settings: Settings, config: AppConfig, args, interval: Interval) -> int:
    stages.set_workload_epoch(settings, config, interval.start)
    offset = (interval.start - stages.workload_epoch(settings, config)).total_seconds()
    placement, types = _deployment_now(settings, config)
    path = stages.simulate_telemetry(settings, config, placement, types, interval, offset)
    console.print(f"landed {path}")
    return 0


def cmd_ingest(settings: Settings, config: AppConfig, args, interval: Interval) -> int:
    with stages.spark_session(settings) as spark:
        report = stages.run_ingest(spark, settings, config, interval)
    console.print(f"bronze: {report.rows_landed} rows from {len(report.files_new)} new files "
                  f"({len(report.files_skipped)} already ingested)")
    return 0


def cmd_validate(settings: Settings, config: AppConfig, args, interval: Interval) -> int:
    with stages.spark_session(settings) as spark:
        report = stages.run_validate(spark, settings, config, interval)
    _print_validation(report)
    return 0


def cmd_fit(settings: Settings, config: AppConfig, args, interval: Interval) -> int:
    with stages.spark_session(settings) as spark:
        model = stages.run_fit(spark, settings, config, interval)
    _print_model(model)
    console.print(f"model: {stages.model_path(settings, model.model_id)}")
    return 0


def _load_model(settings: Settings, config: AppConfig, interval: Interval) -> FittedModel:
    path = stages.model_path(settings, f"{config.app}-{interval.tag}")
    if not path.exists():
        raise SystemExit(f"error: no fitted model at {path}; run `streamplan fit` first")
    return FittedModel.model_validate_json(path.read_text())


def cmd_plan(settings: Settings, config: AppConfig, args, interval: Interval) -> int:
    plan = stages.run_plan(settings, config, _load_model(settings, config, interval), interval)
    _print_plan(plan, config)
    console.print(f"plan: {stages.plan_path(settings, config.app, plan.plan_id)}")
    return 0 if plan.feasible else 1


def _interval_plan(settings: Settings, config: AppConfig, interval: Interval) -> Plan:
    plan_id = plan_id_for(config.app, interval.end.isoformat(), config.method.name)
    path = stages.plan_path(settings, config.app, plan_id)
    if not path.exists():
        raise SystemExit(f"error: no plan {plan_id} at {path}; run `streamplan plan` first")
    return Plan.model_validate_json(path.read_text())


def cmd_publish(settings: Settings, config: AppConfig, args, interval: Interval) -> int:
    result = stages.run_publish(settings, _interval_plan(settings, config, interval))
    console.print(f"{result.reason}: {result.plan_path}"
                  + (f" → {result.current_path}" if result.became_current else ""))
    return 0 if result.became_current else 1


def cmd_measure(settings: Settings, config: AppConfig, args, interval: Interval) -> int:
    plan = current_plan(settings.publish_dir, config.app)
    if plan is None:
        raise SystemExit("error: no published plan to measure")
    with stages.spark_session(settings) as spark:
        measured = stages.run_measure(spark, settings, config, plan, interval)
    for q, v in sorted(measured.items()):
        console.print(f"{q}: measured {v:.3f} ms, predicted "
                      f"{plan.predicted.response_time_ms.get(q, float('nan')):.3f} ms")
    return 0


def cmd_history(settings: Settings, config: AppConfig, args, interval) -> int:
    from streamplan.history import plan_history

    rows = plan_history(settings, config.app, args.limit)
    table = Table(title=f"plans of {config.app} (MLflow {settings.tracking_uri})")
    for col in ("interval end", "plan", "method", "status", "objective", "predicted ms",
                "measured ms", "live"):
        table.add_column(col)
    for r in rows:
        table.add_row(r.interval_end, r.plan_id, r.method, r.status, _num(r.objective),
                      _per_query(r.predicted_ms), _per_query(r.measured_ms),
                      "yes" if r.live else "")
    console.print(table)
    return 0


def find_plan(settings: Settings, app: str, ref: str) -> Plan:
    """A plan by path, by published plan id or by saved plan id."""
    candidates = [Path(ref), settings.publish_dir / app / "plans" / f"{ref}.json",
                  stages.plan_path(settings, app, ref)]
    for path in candidates:
        if path.is_file():
            return Plan.model_validate_json(path.read_text())
    raise SystemExit(f"error: plan {ref!r} not found (tried {[str(c) for c in candidates]})")


def cmd_diff(settings: Settings, config: AppConfig, args, interval) -> int:
    from streamplan.plan_diff import diff_plans
    from streamplan.plots import predicted_vs_measured

    a, b = (find_plan(settings, config.app, ref) for ref in (args.plan_a, args.plan_b))
    d = diff_plans(a, b)
    table = Table(title=f"{a.plan_id} → {b.plan_id}")
    for col in ("what", "before", "after"):
        table.add_column(col)
    for op, (before, after) in d.moved.items():
        table.add_row(f"operator {op}", str(before), str(after))
    for node, (before, after) in d.nodes.items():
        table.add_row(f"node {node}", str(before), str(after))
    for op, (before, after) in d.shedding.items():
        table.add_row(f"shedding {op}", str(before), str(after))
    for q, (before, after) in d.response_time_ms.items():
        table.add_row(f"predicted RT {q} (ms)", _num(before), _num(after))
    console.print(table)
    plot = predicted_vs_measured(
        a.predicted.response_time_ms, b.predicted.response_time_ms,
        {q.name: q.target_rt_ms for q in config.queries}, f"{a.plan_id} → {b.plan_id}",
        settings.reports / f"diff-{a.plan_id}-{b.plan_id}.png",
        labels=("before", "after"),
    )
    console.print(f"plot: {plot}")
    return 0


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"


def _per_query(values: dict[str, float]) -> str:
    return ", ".join(f"{q} {v:.2f}" for q, v in sorted(values.items())) or "-"


def _print_validation(report: stages.ValidateReport) -> None:
    table = Table(title="ingest + validation")
    table.add_column("table")
    table.add_column("rows", justify="right")
    for name, n in report.silver.items():
        table.add_row(f"silver.{name}", str(n))
    table.add_row("quarantine", str(report.quarantined))
    for rule, n in sorted(report.rules.items()):
        table.add_row(f"  rule {rule}", str(n))
    table.add_row("[b]rows landed[/b]", f"[b]{report.rows_in}[/b]")
    console.print(table)


def _print_model(model: FittedModel) -> None:
    table = Table(title=f"fitted model {model.model_id} (rate statistic: {model.rate_statistic})")
    for col in ("query", "rate ev/s", "b ms", "SCV", "source", "low-load b ms", "measured RT ms"):
        table.add_column(col, justify="right")
    for q in model.queries.values():
        b = q.service_mean_s
        scv = q.service_m2_s2 / (b * b) - 1 if b else 0.0
        table.add_row(
            q.query, f"{model.query_rate(q.query):.1f}", f"{b * 1000:.3f}", f"{scv:.2f}",
            q.calibration, "-" if q.cal_service_mean_s is None else f"{q.cal_service_mean_s*1e3:.3f}",
            "-" if q.measured_rt_ms is None else f"{q.measured_rt_ms:.3f}",
        )
    console.print(table)


def _print_plan(plan: Plan, config: AppConfig) -> None:
    table = Table(title=f"plan {plan.plan_id} ({plan.method}, {plan.solver.status})")
    for col in ("node", "action", "type", "operators", "predicted util"):
        table.add_column(col)
    for node, action in sorted(plan.nodes.items()):
        ops = sorted(op for op, es in plan.placement.items() if any(e.node == node for e in es))
        table.add_row(node, action, plan.node_types.get(node, "?"), ", ".join(ops) or "-",
                      _num(plan.predicted.node_utilisation.get(node)))
    console.print(table)


def _print_response_times(
    config: AppConfig, model: FittedModel, plan: Plan, measured: dict[str, float]
) -> None:
    table = Table(title="response time per query (ms)")
    for col in ("query", "target", "measured before", "predicted", "measured after", "error"):
        table.add_column(col, justify="right")
    for q in config.queries:
        pred = plan.predicted.response_time_ms.get(q.name)
        after = measured.get(q.name)
        err = f"{(pred - after) / after:+.1%}" if pred is not None and after else "-"
        table.add_row(q.name, f"{q.target_rt_ms:.2f}", _num(model.queries[q.name].measured_rt_ms),
                      _num(pred), _num(after), err)
    console.print(table)


def cmd_demo(settings: Settings, config: AppConfig, args: argparse.Namespace, _=None) -> int:
    """The whole loop once: simulate → ingest → validate → fit → plan → publish → measure."""
    from streamplan.cli import DEMO_START
    from streamplan.faults import duplicated, fault_lines
    from streamplan.publish import atomic_write

    if config.simulation is None:
        raise SystemExit(f"error: {args.config} has no simulation section; the demo needs one")
    started = time.monotonic()
    interval = Interval(DEMO_START, DEMO_START + timedelta(seconds=config.simulation.duration_s))
    stages.set_workload_epoch(settings, config, interval.start)
    steps = ["simulate", "start Spark", "ingest", "validate", "fit", "plan", "publish", "measure"]
    progress = Progress(TextColumn("{task.description:<28}"), BarColumn(), TextColumn(
        "{task.completed}/{task.total}"), TimeElapsedColumn(), console=console)
    with progress:
        task = progress.add_task("simulate", total=len(steps))

        def step(name: str) -> None:
            progress.update(task, description=name)

        placement, types = dict(config.deployment), {n.name: n.type for n in config.nodes}
        stages.simulate_telemetry(settings, config, placement, types, interval, 0.0)
        if not args.no_faults:
            faults = list(fault_lines(config, interval.end).values())
            faults += duplicated(faults[-1])
            atomic_write(stages.landing_dir(settings, config.app) / f"faults-{interval.tag}.ndjson",
                         "\n".join(faults) + "\n")
            atomic_write(stages.landing_dir(settings, config.app) / f"binary-{interval.tag}.bin",
                         "\x00\x01streamplan\x00")
        progress.advance(task)
        step("start Spark")
        with stages.spark_session(settings) as spark:
            progress.advance(task)
            step("ingest → bronze")
            stages.run_ingest(spark, settings, config, interval)
            progress.advance(task)
            step("validate → silver")
            validation = stages.run_validate(spark, settings, config, interval)
            progress.advance(task)
            step("fit (Spark)")
            model = stages.run_fit(spark, settings, config, interval)
            progress.advance(task)
            step(f"plan ({config.method.name})")
            plan = stages.run_plan(settings, config, model, interval,
                                   {"validation": validation.report_path})
            progress.advance(task)
            step("publish")
            published = stages.run_publish(settings, plan)
            progress.advance(task)
            step("measure next interval")
            measured = stages.run_measure(spark, settings, config, plan, interval.next())
            progress.advance(task)
    _print_validation(validation)
    _print_model(model)
    _print_plan(plan, config)
    _print_response_times(config, model, plan, measured)
    where = Table(title=f"where to look (demo took {time.monotonic() - started:.0f} s)",
                  show_header=False)
    where.add_column("what")
    where.add_column("path")
    where.add_row("published plan", str(published.plan_path))
    where.add_row("current plan", str(published.current_path) if published.became_current
                  else f"unchanged: {published.reason}")
    where.add_row("MLflow run", f"{plan.mlflow_run_id} in experiment streamplan-{config.app}")
    where.add_row("MLflow UI", f"mlflow ui --backend-store-uri {settings.tracking_uri}")
    where.add_row("validation report", str(validation.report_path))
    where.add_row("predicted vs measured",
                  str(settings.reports / f"predicted-vs-measured-{plan.plan_id}.png"))
    where.add_row("Delta lake", str(settings.lake))
    console.print(where)
    return 0
