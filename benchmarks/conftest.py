"""Shared benchmark helpers: results files that say which command and machine made them."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from streamplan.settings import REPO_ROOT

RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"

WriteResult = Callable[[str, dict[str, Any]], Path]


def machine_info() -> dict[str, Any]:
    """Platform, Python, CPU count and the 1-minute load (timings are on shared cores)."""
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "processor": platform.machine(),
        "cpu_count": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


@pytest.fixture
def write_result(request: pytest.FixtureRequest) -> WriteResult:
    """``write_result(name, payload)`` writes ``benchmarks/results/<name>.json`` with the
    command that reproduces it (from the calling benchmark file), the machine and the time."""
    test_file = Path(request.path).relative_to(REPO_ROOT)

    def write(name: str, payload: dict[str, Any]) -> Path:
        record = {
            "benchmark": name,
            "command": f"make bench | .venv/bin/python -m pytest -m bench {test_file}",
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine_info(),
            **payload,
        }
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        path = RESULTS_DIR / f"{name}.json"
        path.write_text(json.dumps(record, indent=2, allow_nan=False) + "\n")
        return path

    return write
