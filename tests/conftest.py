"""Shared fixtures: one real Spark+Delta session for the whole run, fresh dirs per test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamplan.config import AppConfig, load_config
from streamplan.settings import REPO_ROOT, Settings, load_settings

os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

DEMO_CONFIG = REPO_ROOT / "configs" / "demo.yaml"


@pytest.fixture(scope="session")
def spark_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("spark-home")


@pytest.fixture(scope="session")
def spark(spark_home: Path):
    """A real local[2] SparkSession with Delta, shared by all tests (JVM start is ~10 s)."""
    from pipelines.spark import get_spark

    session = get_spark(load_settings(spark_home), app_name="streamplan-tests")
    yield session
    session.stop()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings rooted in a fresh temporary home (lake, landing, MLflow store, plans)."""
    return load_settings(tmp_path / "home")


@pytest.fixture
def demo_config() -> AppConfig:
    return load_config(DEMO_CONFIG)


@pytest.fixture
def tmp_cwd(tmp_path: Path) -> Iterator[Path]:
    old = Path.cwd()
    os.chdir(tmp_path)
    yield tmp_path
    os.chdir(old)
