"""Start and stop the embedded Flink load job (``infra/flink``) as a child process.

The job runs on a MiniCluster with its REST API on 127.0.0.1; :class:`FlinkJob` starts it
with a :class:`JobSpec`, waits until every task is RUNNING and, on exit, kills the whole
process group.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from streamplan.flink.rest import FlinkRest, FlinkRestError
from streamplan.settings import REPO_ROOT

JOB_JAR = REPO_ROOT / ".cache" / "flink" / "streamplan-flink-job.jar"
OPERATORS = ("parse", "enrich", "aggregate")
OVERRIDES_KEY = "pipeline.jobvertex-parallelism-overrides"
# The REST handlers serve metrics fetched at most this often (Flink's default is 10 s).
DEFAULT_FLINK_CONF = {"metrics.fetcher.update-interval": "1s"}
PROMETHEUS_FACTORY = "org.apache.flink.metrics.prometheus.LoopbackPrometheusReporterFactory"


class FlinkJobError(RuntimeError):
    """The load job could not be started, or did not reach RUNNING in time."""


@dataclass(frozen=True)
class JobSpec:
    """What to run: source rate (records/s), default parallelism of the non-source vertices,
    per-operator wall-time cost (µs per record) and selectivity, vertex overrides
    (job vertex id -> parallelism) and extra Flink configuration."""

    rate: float = 1000.0
    parallelism: int = 1
    cost_us: dict[str, int] = field(default_factory=dict)
    selectivity: dict[str, float] = field(default_factory=dict)
    overrides: dict[str, int] = field(default_factory=dict)
    slots: int = 8
    flink_conf: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.rate <= 0:
            raise ValueError(f"JobSpec.rate must be > 0, got {self.rate}")
        for name in (*self.cost_us, *self.selectivity):
            if name not in OPERATORS:
                raise ValueError(f"JobSpec operator {name!r} is not one of {OPERATORS}")
        for vertex, p in {"parallelism": self.parallelism, **self.overrides}.items():
            if not 1 <= p <= self.slots:
                raise ValueError(
                    f"JobSpec parallelism of {vertex!r} must be in [1, {self.slots}], got {p}"
                )

    def arguments(self, port: int) -> list[str]:
        """Command-line arguments of ``streamplan.flink.LoadJob``."""
        args = [f"port={port}", f"rate={self.rate}", f"parallelism={self.parallelism}",
                f"slots={self.slots}"]
        args += [f"{op}.cost_us={int(us)}" for op, us in sorted(self.cost_us.items())]
        args += [f"{op}.selectivity={s}" for op, s in sorted(self.selectivity.items())]
        conf = {**DEFAULT_FLINK_CONF, **self.flink_conf}
        if self.overrides:
            conf[OVERRIDES_KEY] = ",".join(f"{v}:{p}" for v, p in sorted(self.overrides.items()))
        return args + [f"-D{k}={v}" for k, v in sorted(conf.items())]


def prometheus_conf(port: int, host: str = "127.0.0.1") -> dict[str, str]:
    """Flink configuration for its Prometheus reporter on ``host:port`` (the job jar's
    loopback variant of Flink's reporter, ``infra/flink``)."""
    prefix = "metrics.reporter.prom."
    return {prefix + "factory.class": PROMETHEUS_FACTORY, prefix + "host": host,
            prefix + "port": str(port)}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FlinkJob:
    """The load job as a child process; use as a context manager."""

    def __init__(self, spec: JobSpec, log_path: Path, port: int | None = None,
                 jar: Path = JOB_JAR, heap_mb: int = 512, prometheus: bool = False) -> None:
        if not jar.is_file():
            raise FlinkJobError(f"Flink job jar {jar} is missing: run infra/flink/build.sh")
        self.spec, self.log_path, self.jar, self.heap_mb = spec, log_path, jar, heap_mb
        self.port = port or free_port()
        self.rest = FlinkRest(f"http://127.0.0.1:{self.port}")
        self.prometheus_port = free_port() if prometheus else None
        self.job_id: str | None = None
        self._proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 90.0) -> str:
        """Start the JVM and wait until all tasks run; returns the job id."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        spec = self.spec
        if self.prometheus_port is not None:
            spec = replace(spec, flink_conf={**spec.flink_conf,
                                             **prometheus_conf(self.prometheus_port)})
        cmd = ["java", f"-Xmx{self.heap_mb}m", "-jar", str(self.jar), *spec.arguments(self.port)]
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True)
        self.job_id = self.wait_running(timeout_s)
        return self.job_id

    @property
    def prometheus_url(self) -> str | None:
        """The job's Prometheus exposition, if started with ``prometheus=True``."""
        if self.prometheus_port is None:
            return None
        return f"http://127.0.0.1:{self.prometheus_port}/metrics"

    def wait_running(self, timeout_s: float) -> str:
        """Poll ``/jobs/overview`` until one job has every task RUNNING."""
        deadline = time.monotonic() + timeout_s
        last = "no answer"
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise FlinkJobError(
                    f"Flink job exited with {self._proc.returncode}; see {self.log_path}"
                )
            try:
                for job in self.rest.get("/jobs/overview")["jobs"]:
                    tasks = job["tasks"]
                    last = (f"job {job['jid']} {job['state']}, "
                            f"{tasks['running']}/{tasks['total']} tasks running")
                    if job["state"] == "RUNNING" and tasks["running"] == tasks["total"]:
                        return job["jid"]
            except FlinkRestError as exc:
                last = str(exc)
            time.sleep(0.25)
        raise FlinkJobError(
            f"Flink job not RUNNING after {timeout_s:.0f} s ({last}); see {self.log_path}"
        )

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM the process group, SIGKILL it if it lingers."""
        proc, self._proc, self.job_id = self._proc, None, None
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def restart(self, spec: JobSpec, timeout_s: float = 90.0) -> float:
        """Stop, start with ``spec`` on the same port; returns the downtime in seconds (from
        the stop until every task of the new job runs)."""
        t0 = time.monotonic()
        self.stop()
        self.spec = spec
        self.start(timeout_s)
        return time.monotonic() - t0

    def __enter__(self) -> FlinkJob:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
