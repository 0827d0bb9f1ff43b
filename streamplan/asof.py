"""Small JSON documents kept by time: one file per time in a directory, and the one in force
at a given time (the newest at or before it). The planner reads them without Spark: the
prediction corrections and the guardrail states."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from streamplan.publish import atomic_write


def save_as_of(directory: Path, at: datetime, doc: dict[str, Any]) -> Path:
    """Keep ``doc`` as the document of time ``at`` (saving at the same time overwrites)."""
    name = at.strftime("%Y%m%dT%H%M%SZ") + ".json"
    return atomic_write(directory / name, json.dumps({"at": at.isoformat(), **doc}, indent=2))


def load_as_of(directory: Path, at: datetime) -> tuple[datetime, dict[str, Any]] | None:
    """The time and document in force at ``at``: the newest kept at or before it."""
    docs = [json.loads(p.read_text()) for p in directory.glob("*.json")]
    timed = [(datetime.fromisoformat(d.pop("at")), d) for d in docs]
    usable = [(t, d) for t, d in timed if t <= at]
    return max(usable, key=lambda td: td[0]) if usable else None
