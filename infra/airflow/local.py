"""A local Airflow 3 for streamplan: api-server + scheduler + dag-processor, LocalExecutor,
SQLite metadata, everything on 127.0.0.1, in its own AIRFLOW_HOME.

Used by ``tests/test_airflow_scheduler.py`` and by hand::

    .venv/bin/python infra/airflow/local.py up [--port 8080] [--home .airflow]
    # prints the UI address and the admin password; Ctrl-C stops every component
    .venv/bin/python infra/airflow/local.py env   # the environment it runs with, as exports

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
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO_ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
COMPONENTS = ("api-server", "scheduler", "dag-processor")
ADMIN = "admin"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
class LocalAirflow:
    """A running local Airflow: its components, REST access and a clean stop."""

    home: Path
    port: int
    env: dict[str, str]
    password: str
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
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
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                health = httpx.get(f"{self.base_url}/api/v2/monitor/health", timeout=5)
                if health.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1)
        raise TimeoutError(f"Airflow API not ready on {self.base_url} after {timeout:.0f} s")

    def wait_dag(self, dag_id: str, timeout: float = 120) -> dict:
        """Until the dag-processor has parsed ``dag_id``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
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
            self._check_alive()
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

    # --- processes -----------------------------------------------------------------------------
    def _check_alive(self) -> None:
        dead = {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}
        if dead:
            raise RuntimeError(f"Airflow components exited: {dead}; logs in {self.home}/*.log:\n"
                               + self.log_tail())

    def log_tail(self, lines: int = 30) -> str:
        out = []
        for name in self.procs:
            path = self.home / f"{name}.log"
            if path.exists():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {name}.log\n" + "\n".join(text))
        return "\n".join(out)

    def pids(self) -> dict[str, list[int]]:
        """Live processes of each component's session (component, workers, tasks, JVMs)."""
        return {name: session_pids(p.pid) for name, p in self.procs.items()}

    def stop(self, timeout: float = 30) -> list[int]:
        """SIGTERM each component's process group (the scheduler stops its executor's
        workers), then SIGTERM whatever is left in the components' sessions (task processes
        run in process groups of their own, Spark JVMs with them), SIGKILL after
        ``timeout``. Returns the PIDs still alive afterwards (empty when all is gone)."""
        sessions = [p.pid for p in self.procs.values()]
        deadline = time.monotonic() + timeout
        for pid in sessions:
            _signal_group(pid, signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=max(0.1, deadline - timeout / 2 - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for pid in (left for s in sessions for left in session_pids(s)):
            _kill(pid, signal.SIGTERM)
        while time.monotonic() < deadline and any(session_pids(s) for s in sessions):
            time.sleep(0.5)
        for pid in (left for s in sessions for left in session_pids(s)):
            _kill(pid, signal.SIGKILL)
        for p in self.procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        time.sleep(0.5)
        return [pid for s in sessions for pid in session_pids(s)]


def session_pids(sid: int) -> list[int]:
    """PIDs whose session id is ``sid`` (zombies excluded)."""
    out = subprocess.run(["ps", "-eo", "pid=,sid=,stat="], capture_output=True, text=True).stdout
    pids = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and int(parts[1]) == sid and not parts[2].startswith("Z"):
            pids.append(int(parts[0]))
    return pids


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


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
            log = open(home / f"{name}.log", "ab")  # noqa: SIM115 - owned by the child
            instance.procs[name] = subprocess.Popen(
                [airflow, name], env=env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True, cwd=home,
            )
            log.close()
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
    home = Path(args.home).resolve()
    if args.command == "env":
        for k, v in airflow_env(home, args.port, Path(args.dags)).items():
            print(f"export {k}={v!r}")
        return 0
    airflow = start(home, args.port, Path(args.dags))
    print(f"Airflow UI: {airflow.base_url}  (user {ADMIN}, password {airflow.password})")
    print(f"logs: {home}/*.log; DAGs from {args.dags}; Ctrl-C stops everything")
    try:
        while True:
            airflow._check_alive()
            time.sleep(2)
    except KeyboardInterrupt:
        pass
    finally:
        left = airflow.stop()
        print("stopped" + (f"; still alive: {left}" if left else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
