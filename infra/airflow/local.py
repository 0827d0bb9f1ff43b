"""A local Airflow 3 for streamplan: api-server + scheduler + dag-processor, LocalExecutor,
SQLite metadata, everything on 127.0.0.1, in its own AIRFLOW_HOME.

Used by ``tests/test_airflow_scheduler.py`` and by hand::

    .venv/bin/python -m infra.airflow.local up [--port 8080] [--home .airflow]
    # prints the UI address and the admin password; Ctrl-C stops every component
    .venv/bin/python -m infra.airflow.local env   # the environment it runs with, as exports

Settings (all through ``AIRFLOW__*`` environment variables, no airflow.cfg to edit):

* API on 127.0.0.1:<port>, and task workers told where the execution API is
  (``AIRFLOW__API__BASE_URL`` and ``AIRFLOW__CORE__EXECUTION_API_SERVER_URL``): without
  them workers call localhost:8080 and fail on any other port.
* ``PARALLELISM=4``: LocalExecutor forks that many workers (32 by default; 2 cores here).
* Worker and trigger log servers on free ports: they bind 0.0.0.0:8793/8794 by default and
  a second instance on the machine would clash.
* DAG files are read at start and then every ``refresh_interval`` seconds (300 by default;
  30 here): put DAG files in place before starting.
* New DAGs start paused (Airflow's default is kept): unpause before a run can start.

Stopping: each component runs in its own session (``start_new_session``); ``stop`` sends
SIGTERM to each component's process group (component, its workers, task processes and the
Spark JVMs they started), waits, SIGKILLs what is left, and reports any survivor.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from infra.services import (
    ServiceGroup,
    free_port,
    interrupt_on_signals,
    serve_until_interrupted,
    wait_http,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
COMPONENTS = ("api-server", "scheduler", "dag-processor")
ADMIN = "admin"


def airflow_env(
    home: Path,
    port: int,
    dags_folder: Path = REPO_ROOT / "dags",
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """The environment every component runs with (on top of ``os.environ``)."""
    base = f"http://127.0.0.1:{port}"
    env = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base}/execution/",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN}:admin",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": base,
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "30",
        "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONUNBUFFERED": "1",
    }
    env.update(extra or {})
    return env


@dataclass
class LocalAirflow(ServiceGroup):
    """A running local Airflow: its components (a :class:`ServiceGroup`), REST access."""

    port: int = 0
    env: dict[str, str] = field(default_factory=dict)
    password: str = ""
    _token: str | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- REST --------------------------------------------------------------------------------
    def token(self) -> str:
        if self._token is None:
            r = httpx.post(f"{self.base_url}/auth/token",
                           json={"username": ADMIN, "password": self.password}, timeout=30)
            r.raise_for_status()
            self._token = r.json()["access_token"]
        return self._token

    def api(self, method: str, path: str, body: dict | None = None, **params: Any) -> Any:
        """Call ``/api/v2<path>``; raises on an HTTP error with the response text."""
        r = httpx.request(method, f"{self.base_url}/api/v2{path}", json=body, params=params,
                          headers={"Authorization": f"Bearer {self.token()}"}, timeout=30)
        if r.status_code >= 400:
            raise RuntimeError(f"{method} {path}: HTTP {r.status_code}: {r.text[:500]}")
        return r.json() if r.content else None

    def wait_ready(self, timeout: float = 120) -> None:
        """Until the API answers (a component that died meanwhile fails fast)."""
        wait_http(f"{self.base_url}/api/v2/monitor/health", lambda r: r.status_code == 200,
                  timeout, self.check_alive)

    def wait_dag(self, dag_id: str, timeout: float = 120) -> dict:
        """Until the dag-processor has parsed ``dag_id``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                return self.api("GET", f"/dags/{dag_id}")
            except RuntimeError:
                time.sleep(1)
        raise TimeoutError(f"DAG {dag_id} not parsed after {timeout:.0f} s; errors: "
                           f"{self.api('GET', '/importErrors')}")

    def unpause(self, dag_id: str) -> None:
        self.api("PATCH", f"/dags/{dag_id}", {"is_paused": False})

    def trigger(self, dag_id: str, logical_date: str, run_id: str,
                conf: dict | None = None) -> dict:
        return self.api("POST", f"/dags/{dag_id}/dagRuns",
                        {"dag_run_id": run_id, "logical_date": logical_date, "conf": conf or {}})

    def wait_run(self, dag_id: str, run_id: str, timeout: float) -> str:
        """Until the run finishes (success or failed) or ``timeout``; returns its state."""
        deadline = time.monotonic() + timeout
        state = "unknown"
        while time.monotonic() < deadline:
            self.check_alive()
            state = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}")["state"]
            if state in ("success", "failed"):
                return state
            time.sleep(2)
        raise TimeoutError(f"{dag_id} run {run_id} still {state} after {timeout:.0f} s: "
                           f"{self.task_states(dag_id, run_id)}")

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str]:
        tis = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
        return {t["task_id"] + (f"[{t['map_index']}]" if t["map_index"] >= 0 else ""): t["state"]
                for t in tis}

    def xcom(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> Any:
        entry = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}"
                         "/xcomEntries/return_value", map_index=map_index, deserialize=True)
        value = entry["value"]
        return json.loads(value) if isinstance(value, str) else value


def start(
    home: Path,
    port: int | None = None,
    dags_folder: Path = REPO_ROOT / "dags",
    extra_env: dict[str, str] | None = None,
    components: tuple[str, ...] = COMPONENTS,
    ready_timeout: float = 180,
) -> LocalAirflow:
    """Migrate the metadata DB, then start each component in its own session; returns once
    the API answers. DAG files must be in ``dags_folder`` already."""
    home = Path(home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    env = {**os.environ, **airflow_env(home, port, dags_folder, extra_env)}
    password_file = home / "simple_auth_manager_passwords.json.generated"
    if not password_file.exists():
        password_file.write_text(json.dumps({ADMIN: secrets.token_urlsafe(12)}) + "\n")
    password = json.loads(password_file.read_text())[ADMIN]
    airflow = str(VENV_BIN / "airflow")
    migrate = subprocess.run([airflow, "db", "migrate"], env=env, capture_output=True,
                             text=True, timeout=600)
    if migrate.returncode != 0:
        raise RuntimeError(f"airflow db migrate failed:\n{migrate.stdout[-2000:]}"
                           f"{migrate.stderr[-2000:]}")
    instance = LocalAirflow(home=home, port=port, env=env, password=password)
    try:
        for name in components:
            instance.spawn(name, [airflow, name], env)
        instance.wait_ready(ready_timeout)
    except BaseException:
        instance.stop()
        raise
    return instance


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="local Airflow for streamplan on 127.0.0.1")
    parser.add_argument("command", choices=["up", "env"])
    parser.add_argument("--home", default=str(REPO_ROOT / ".airflow"), help="AIRFLOW_HOME")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--dags", default=str(REPO_ROOT / "dags"), help="DAG folder")
    args = parser.parse_args(argv)
    interrupt_on_signals()
    home = Path(args.home).resolve()
    if args.command == "env":
        for k, v in airflow_env(home, args.port, Path(args.dags)).items():
            print(f"export {k}={v!r}")
        return 0
    airflow = start(home, args.port, Path(args.dags))
    print(f"Airflow UI: {airflow.base_url}  (user {ADMIN}, password {airflow.password})")
    print(f"logs: {home}/*.log; DAGs from {args.dags}; Ctrl-C stops everything")
    return serve_until_interrupted(airflow)


if __name__ == "__main__":
    sys.exit(main())
