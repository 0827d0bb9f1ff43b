"""Publish a plan atomically: schema-checked file, then ``current.json`` replaced only for a
feasible plan (design.md, Plan artifact)."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import jsonschema

from streamplan.plan import Plan, plan_json_schema


@dataclass(frozen=True)
class PublishResult:
    """Where the plan went and whether it became current."""

    plan_path: Path
    current_path: Path
    became_current: bool
    reason: str


def atomic_write(path: Path, text: str) -> Path:
    """Write ``text`` to a temp file beside ``path``, fsync it, then rename over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def validate_plan_document(document: dict) -> None:
    """Check a plan document against the generated JSON Schema; raises with the field path."""
    try:
        jsonschema.validate(document, plan_json_schema())
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "<root>"
        raise ValueError(f"plan does not match {plan_json_schema()['$id']}: {where}: "
                         f"{exc.message}") from exc


def publish(plan: Plan, publish_dir: Path) -> PublishResult:
    """Write ``<publish>/<app>/plans/<plan_id>.json``; replace ``current.json`` if feasible."""
    text = plan.to_json()
    validate_plan_document(json.loads(text))
    app_dir = publish_dir / plan.app
    atomic_write(publish_dir / "plan.schema.json", json.dumps(plan_json_schema(), indent=2))
    plan_path = atomic_write(app_dir / "plans" / f"{plan.plan_id}.json", text)
    current = app_dir / "current.json"
    if not plan.feasible:
        reason = f"plan status {plan.solver.status!r}: {plan.solver.message or 'not feasible'}"
        return PublishResult(plan_path, current, False, reason)
    atomic_write(current, text)
    return PublishResult(plan_path, current, True, "published")


def current_plan(publish_dir: Path, app: str) -> Plan | None:
    """The live plan of ``app``, if any."""
    path = publish_dir / app / "current.json"
    return Plan.model_validate_json(path.read_text()) if path.exists() else None
