"""`streamplan` command line: each stage on its own, and `demo` for the whole loop once."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from streamplan.config import ConfigError, load_config
from streamplan.settings import REPO_ROOT, load_settings
from streamplan.stages import Interval

DEMO_CONFIG = REPO_ROOT / "configs" / "demo.yaml"
DEMO_START = datetime(2026, 1, 1, tzinfo=UTC)


def _parse_time(text: str) -> datetime:
    t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def _interval(args: argparse.Namespace) -> Interval:
    end = _parse_time(args.end)
    return Interval(end - timedelta(seconds=args.duration_s), end)


def build_parser() -> argparse.ArgumentParser:
    """All subcommands with their arguments."""
    parser = argparse.ArgumentParser(
        prog="streamplan",
        description="Replan stream-processing deployments from their own telemetry.",
    )
    parser.add_argument("--home", help="data directory (default: $STREAMPLAN_HOME or .streamplan)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")

    def stage(name: str, help_text: str, interval: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--config", default=str(DEMO_CONFIG), help="application YAML")
        if interval:
            p.add_argument("--end", required=name != "demo", help="interval end (ISO-8601 UTC)")
            p.add_argument("--duration-s", type=float, default=600.0, help="interval length")
        return p

    demo = stage("demo", "run the whole loop once on the sample app and print where it all is",
                 interval=False)
    demo.add_argument("--no-faults", action="store_true", help="do not land the bad-line file")
    stage("simulate", "simulate the interval under the current deployment into the landing dir")
    stage("ingest", "landing files → bronze Delta (new files only)")
    stage("validate", "pending bronze rows → Great Expectations → silver + quarantine")
    stage("fit", "silver telemetry of the interval → fitted model (gold + JSON)")
    stage("plan", "fitted model of the interval → plan (method from config), logged to MLflow")
    stage("publish", "publish the interval's plan atomically (current.json if feasible)")
    stage("measure", "measure the live plan over the interval after it: RT logged to MLflow")
    diff = sub.add_parser("diff", help="what changed between two plans (ids or file paths)")
    diff.add_argument("--config", default=str(DEMO_CONFIG))
    diff.add_argument("plan_a")
    diff.add_argument("plan_b")
    hist = sub.add_parser("history", help="plans of an app from MLflow, newest first")
    hist.add_argument("--config", default=str(DEMO_CONFIG))
    hist.add_argument("--limit", type=int, default=20)
    apply = sub.add_parser("apply", help="render a plan as Flink parallelism overrides against a running job")
    apply.add_argument("--config", default=str(DEMO_CONFIG))
    apply.add_argument("--flink-url", default="http://127.0.0.1:8081", help="Flink REST API")
    apply.add_argument("--job", help="job id (default: the one running job)")
    apply.add_argument("--deployment-name", default="streamplan-job", help="FlinkDeployment name")
    apply.add_argument("--dry-run", action="store_true", help="only print the change")
    apply.add_argument("plan", nargs="?", help="plan id or file (default: the current plan)")
    explain = sub.add_parser("explain", help="why each operator of a plan changed")
    explain.add_argument("--config", default=str(DEMO_CONFIG))
    explain.add_argument("plan", nargs="?", help="plan id or file (default: the current plan)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `streamplan` command."""
    args = build_parser().parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    settings = load_settings(args.home)
    from streamplan import commands
    from streamplan.flink import commands as flink_commands

    handler = getattr(commands, f"cmd_{args.command}", None) or getattr(
        flink_commands, f"cmd_{args.command}"
    )
    return handler(settings, config, args, _interval(args) if getattr(args, "end", None) else None)


if __name__ == "__main__":
    sys.exit(main())
