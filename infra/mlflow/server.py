"""An MLflow tracking server on 127.0.0.1: SQLite backend under its home by default, or any
SQLAlchemy URI (``postgresql://user:pass@host/db`` in production, see ``infra/production``);
artifacts proxied by the server into ``<home>/artifacts`` (or ``--artifacts-destination``,
e.g. ``s3://bucket/mlflow``). Used by ``tests/test_mlflow_server.py`` and by hand::

    .venv/bin/python -m infra.mlflow.server up [--port 5000] [--backend-store-uri URI]
    export STREAMPLAN_MLFLOW_URI=http://127.0.0.1:5000   # the pipeline logs there
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from infra.services import (
    ServiceGroup,
    free_port,
    interrupt_on_signals,
    serve_until_interrupted,
    wait_http,
)

VENV_BIN = Path(sys.executable).parent


@dataclass
class MlflowServer(ServiceGroup):
    """A running ``mlflow server``."""

    port: int = 0

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def start(home: Path, port: int | None = None, backend_store_uri: str | None = None,
          artifacts_destination: str | None = None, ready_timeout: float = 120) -> MlflowServer:
    """Start the server and return once ``/health`` answers."""
    home = Path(home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    server = MlflowServer(home=home, port=port or free_port())
    backend = backend_store_uri or f"sqlite:///{home / 'mlflow.db'}"
    artifacts = artifacts_destination or str(home / "artifacts")
    argv = [str(VENV_BIN / "mlflow"), "server", "--host", "127.0.0.1", "--port",
            str(server.port), "--backend-store-uri", backend, "--serve-artifacts",
            "--artifacts-destination", artifacts, "--workers", "1"]
    try:
        server.spawn("mlflow-server", argv, dict(os.environ))
        wait_http(f"{server.uri}/health", lambda r: r.status_code == 200, ready_timeout,
                  server.check_alive)
    except BaseException:
        server.stop()
        raise
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="MLflow tracking server on 127.0.0.1")
    parser.add_argument("command", choices=["up"])
    parser.add_argument("--home", default=".mlflow-server", help="SQLite DB, artifacts, log")
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument("--backend-store-uri", default=None)
    parser.add_argument("--artifacts-destination", default=None)
    args = parser.parse_args(argv)
    interrupt_on_signals()
    server = start(Path(args.home), args.port, args.backend_store_uri,
                   args.artifacts_destination)
    print(f"MLflow server: {server.uri}   (Ctrl-C stops it)")
    print(f"use it: export STREAMPLAN_MLFLOW_URI={server.uri}")
    return serve_until_interrupted(server)


if __name__ == "__main__":
    sys.exit(main())
