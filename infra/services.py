"""Local services as child processes on 127.0.0.1: each in its own session, logged to a file
under its home, and stopped together (SIGTERM per process group, then what is left of each
session, SIGKILL after a timeout). Shared by ``infra/airflow``, ``infra/spark`` and
``infra/mlflow``; tests use them to start real servers and must stop what they start."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def wait_http(url: str, ready: Callable[[httpx.Response], bool], timeout: float,
              alive: Callable[[], None] = lambda: None) -> httpx.Response:
    """Poll ``url`` until ``ready(response)``; ``alive()`` raises when the service died."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        alive()
        try:
            response = httpx.get(url, timeout=5, follow_redirects=True)
            if ready(response):
                return response
            last = f"HTTP {response.status_code}: {response.text[:200]}"
        except httpx.HTTPError as exc:
            last = exc
        time.sleep(1)
    raise TimeoutError(f"{url} not ready after {timeout:.0f} s (last: {last})")


@dataclass
class ServiceGroup:
    """Child processes started with :meth:`spawn`, stopped together by :meth:`stop`."""

    home: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def spawn(self, name: str, argv: list[str], env: dict[str, str],
              cwd: Path | None = None) -> subprocess.Popen:
        """Start ``argv`` in a new session, stdout+stderr appended to ``<home>/<name>.log``."""
        self.home.mkdir(parents=True, exist_ok=True)
        with open(self.home / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, cwd=cwd or self.home,
            )
        self.procs[name] = proc
        return proc

    def check_alive(self) -> None:
        """Raise naming the first component that exited, with the end of its log."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with code {proc.returncode}:\n"
                                   f"{self.log_tail(name)}")

    def log_tail(self, name: str, lines: int = 30) -> str:
        """The last ``lines`` lines of a component's log."""
        path = self.home / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def pids(self) -> dict[str, list[int]]:
        """Live processes of each component's session (the component and its children)."""
        return {name: session_pids(p.pid) for name, p in self.procs.items()}

    def stop(self, timeout: float = 30) -> list[int]:
        """SIGTERM each component's process group, then whatever is left in the components'
        sessions, SIGKILL after ``timeout``. Returns the PIDs still alive (empty when all is
        gone)."""
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


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def interrupt_on_signals() -> None:
    """Turn SIGINT and SIGTERM into KeyboardInterrupt, so an ``up`` command stops what it
    started however it is ended (a background job inherits SIGINT as ignored). Call it
    before starting anything."""
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)


def serve_until_interrupted(group: ServiceGroup, poll_s: float = 2.0) -> int:
    """Keep ``group`` running until Ctrl-C or SIGTERM (see :func:`interrupt_on_signals`;
    or until a component dies), then stop it all; the exit code of an ``up`` command."""
    try:
        while True:
            group.check_alive()
            time.sleep(poll_s)
    except KeyboardInterrupt:
        pass
    finally:
        left = group.stop()
        print("stopped" + (f"; still alive: {left}" if left else ""))
    return 0
