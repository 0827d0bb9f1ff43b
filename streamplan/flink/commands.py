"""`streamplan apply` and `streamplan explain`: a published plan against a running Flink job,
and why each operator changed."""

from __future__ import annotations

from streamplan.config import AppConfig
from streamplan.flink.actuate import (
    changes,
    deployment_patch,
    format_changes,
    overrides_value,
    render_overrides,
)
from streamplan.flink.cluster import OVERRIDES_KEY
from streamplan.flink.rest import FlinkRest, FlinkRestError, running_job, scrape
from streamplan.plan import Plan
from streamplan.publish import atomic_write, current_plan
from streamplan.settings import Settings


def _plan(settings: Settings, app: str, ref: str | None) -> Plan:
    from streamplan.commands import find_plan

    if ref:
        return find_plan(settings, app, ref)
    plan = current_plan(settings.publish_dir, app)
    if plan is None:
        raise SystemExit(f"error: app {app!r} has no published plan")
    return plan


def cmd_apply(settings: Settings, config: AppConfig, args, interval) -> int:
    """Print the plan's change against the running job; without --dry-run also write the
    rendered overrides and FlinkDeployment patch next to the published plan."""
    plan = _plan(settings, config.app, args.plan)
    rest = FlinkRest(args.flink_url)
    try:
        running = scrape(rest, args.job or running_job(rest))
    except FlinkRestError as exc:
        print(f"error: {exc}")
        return 1
    print(f"plan {plan.plan_id} against job {running.job_name} ({running.job_id}):")
    print(format_changes(changes(plan, running)))
    overrides = render_overrides(plan, running)
    patch = deployment_patch(overrides, args.deployment_name)
    print(f"{OVERRIDES_KEY}: {overrides_value(overrides)}")
    print(patch, end="")
    if not args.dry_run:
        out = settings.publish_dir / config.app / "flink"
        line = f"{OVERRIDES_KEY}: {overrides_value(overrides)}\n"
        atomic_write(out / f"{plan.plan_id}.conf", line)
        atomic_write(out / f"{plan.plan_id}.yaml", patch)
        print(f"wrote {out}/{plan.plan_id}.conf and .yaml: restart the job with them "
              "(kubectl patch for the Flink Kubernetes operator)")
    return 0


def cmd_explain(settings: Settings, config: AppConfig, args, interval) -> int:
    """Print why each operator of a plan changed or was held back."""
    plan = _plan(settings, config.app, args.plan)
    print(f"plan {plan.plan_id} ({plan.method}): status {plan.solver.status}"
          + (f" — {plan.solver.message}" if plan.solver.message else ""))
    for op, reps in sorted(plan.placement.items()):
        where = ", ".join(f"{r.node}×{r.replicas}" for r in reps)
        print(f"{op}: {where}")
        for reason in plan.explanations.get(op, []) or ["unchanged: nothing to explain"]:
            print(f"  - {reason}")
    for v in plan.violations:
        print(f"violation: {v}")
    return 0
