"""Where things live: one settings object, overridable by STREAMPLAN_* environment variables."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, Field

REPO_ROOT = Path(__file__).resolve().parent.parent


class Settings(BaseModel):
    """Paths and service endpoints. Every field has an embedded default for local runs."""

    home: Path = Field(description="data directory (lake, landing, plans, MLflow store, reports)")
    spark_master: str = Field(default="local[2]", description="Spark master URL")
    spark_shuffle_partitions: int = Field(default=2, ge=1)
    jars_dir: Path = Field(default=REPO_ROOT / ".cache" / "jars", description="Delta jars")
    mlflow_tracking_uri: str | None = Field(
        default=None, description="defaults to a SQLite store under home"
    )

    @property
    def landing(self) -> Path:
        return self.home / "landing"

    @property
    def lake(self) -> Path:
        return self.home / "lake"

    @property
    def publish_dir(self) -> Path:
        return self.home / "published"

    @property
    def reports(self) -> Path:
        return self.home / "reports"

    @property
    def tracking_uri(self) -> str:
        return self.mlflow_tracking_uri or f"sqlite:///{(self.home / 'mlflow.db').resolve()}"

    @property
    def artifact_root(self) -> str:
        return (self.home / "mlartifacts").resolve().as_uri()


def load_settings(home: str | Path | None = None) -> Settings:
    """Settings from the environment (STREAMPLAN_HOME, STREAMPLAN_SPARK_MASTER,
    STREAMPLAN_MLFLOW_URI, STREAMPLAN_JARS_DIR), with ``home`` taking precedence."""
    env = os.environ
    values: dict[str, object] = {
        "home": Path(home or env.get("STREAMPLAN_HOME", REPO_ROOT / ".streamplan")).resolve()
    }
    if "STREAMPLAN_SPARK_MASTER" in env:
        values["spark_master"] = env["STREAMPLAN_SPARK_MASTER"]
    if "STREAMPLAN_MLFLOW_URI" in env:
        values["mlflow_tracking_uri"] = env["STREAMPLAN_MLFLOW_URI"]
    if "STREAMPLAN_JARS_DIR" in env:
        values["jars_dir"] = Path(env["STREAMPLAN_JARS_DIR"])
    return Settings(**values)
