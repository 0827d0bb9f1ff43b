"""A Spark standalone cluster on 127.0.0.1 from the pyspark distribution: one master and
``workers`` workers, each a JVM started with ``bin/spark-class`` (the pip package has no
``sbin/start-*.sh``). Used by ``tests/test_spark_cluster.py`` and by hand::

    .venv/bin/python -m infra.spark.standalone up [--workers 2] [--cores 1] [--memory 1g]
    # prints the master URL; STREAMPLAN_SPARK_MASTER=<url> makes streamplan use it;
    # Ctrl-C stops master and workers

The pipeline's driver hands the Delta jars to the executors (``spark.jars`` with local
paths), so the workers need nothing installed beyond the pyspark distribution.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pyspark

from infra.services import (
    ServiceGroup,
    free_port,
    interrupt_on_signals,
    serve_until_interrupted,
    wait_http,
)

SPARK_HOME = Path(pyspark.__file__).resolve().parent
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


@dataclass
class StandaloneCluster(ServiceGroup):
    """A running master and its workers."""

    port: int = 0
    ui_port: int = 0

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def status(self) -> dict:
        """The master's JSON status (workers, cores, running applications)."""
        return wait_http(f"http://127.0.0.1:{self.ui_port}/json", lambda r: r.is_success,
                         30).json()


def cluster_env() -> dict[str, str]:
    """Environment for the JVMs: loopback only, the distribution as SPARK_HOME, executors'
    Python = this interpreter."""
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_NO_DAEMONIZE": "1",
        "PYSPARK_PYTHON": sys.executable,
    }


def start(home: Path, workers: int = 2, cores: int = 1, memory: str = "1g",
          ready_timeout: float = 180) -> StandaloneCluster:
    """Start the master and ``workers`` workers; returns once all workers are ALIVE."""
    home = Path(home).resolve()
    cluster = StandaloneCluster(home=home, port=free_port(), ui_port=free_port())
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    env = cluster_env()
    try:
        cluster.spawn("master", [spark_class, MASTER_CLASS, "--host", "127.0.0.1",
                                 "--port", str(cluster.port),
                                 "--webui-port", str(cluster.ui_port)], env)
        for i in range(workers):
            work_dir = home / f"worker-{i}"
            work_dir.mkdir(parents=True, exist_ok=True)
            cluster.spawn(f"worker-{i}", [
                spark_class, WORKER_CLASS, "--host", "127.0.0.1", "--cores", str(cores),
                "--memory", memory, "--webui-port", str(free_port()), "--work-dir",
                str(work_dir), cluster.master_url,
            ], env)

        def all_alive(response) -> bool:
            if not response.is_success:
                return False
            alive = [w for w in response.json().get("workers", []) if w["state"] == "ALIVE"]
            return len(alive) == workers

        wait_http(f"http://127.0.0.1:{cluster.ui_port}/json", all_alive, ready_timeout,
                  cluster.check_alive)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Spark standalone cluster on 127.0.0.1")
    parser.add_argument("command", choices=["up"])
    parser.add_argument("--home", default=".spark-cluster", help="logs and work dirs")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1)
    parser.add_argument("--memory", default="1g")
    args = parser.parse_args(argv)
    interrupt_on_signals()
    cluster = start(Path(args.home), args.workers, args.cores, args.memory)
    print(f"master: {cluster.master_url}   UI: http://127.0.0.1:{cluster.ui_port}")
    print(f"use it: export STREAMPLAN_SPARK_MASTER={cluster.master_url}   (Ctrl-C stops it)")
    return serve_until_interrupted(cluster)


if __name__ == "__main__":
    sys.exit(main())
