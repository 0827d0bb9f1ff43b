"""A broken configuration fails fast with a message naming the field and the value."""

from pathlib import Path

import pytest
import yaml

from streamplan.config import ConfigError, load_config
from tests.conftest import DEMO_CONFIG


def _write(tmp_path: Path, mutate) -> Path:
    raw = yaml.safe_load(DEMO_CONFIG.read_text())
    mutate(raw)
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_demo_config_is_valid() -> None:
    config = load_config(DEMO_CONFIG)
    assert config.query_operators("spoon") == ["spoon_window", "spoon_features", "spoon_match"]
    assert len(config.config_hash()) == 16


def test_not_yaml(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("app: [unclosed\n  - x: :")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "nope.yaml")


def test_top_level_not_mapping(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="top level must be a mapping, got list"):
        load_config(path)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda r: r["queries"][0].update(target_rt_ms="fast"),
         r"field 'queries\.0\.target_rt_ms'.*value: 'fast'"),
        (lambda r: r["queries"][1].update(target_rt_ms=-1),
         r"field 'queries\.1\.target_rt_ms'.*greater than 0.*value: -1"),
        (lambda r: r["edges"].append(["spoon_window", "ghost"]),
         r"edges\[6\]\[1\]: unknown name 'ghost'"),
        (lambda r: r["deployment"].update(spoon_match=[["vm-9", 1]]),
         r"deployment\[spoon_match\]\.node: unknown name 'vm-9'"),
        (lambda r: r["simulation"]["workload"][0]["rates"].update(spoon=-3),
         r"simulation\.workload\[0\]\.rates\[spoon\] must be >= 0, got -3"),
        (lambda r: r.update(colour="blue"), r"field 'colour': Extra inputs are not permitted"),
        (lambda r: r["deployment"].pop("fork_match"), r"deployment is missing .*fork_match"),
        (lambda r: r["simulation"].update(output_types={"spoon_match": {"A": 0.7, "B": 0.2}}),
         r"simulation\.output_types\[spoon_match\]: shares must sum to 1, got 0\.9"),
        (lambda r: r["simulation"].update(output_types={"spoon_match": {"A": 1.5, "B": -0.5}}),
         r"simulation\.output_types\[spoon_match\]\[B\] must be >= 0, got -0\.5"),
        (lambda r: r["simulation"].update(event_bytes={"spoon_match": 0.0}),
         r"simulation\.event_bytes\[spoon_match\] must be > 0, got 0\.0"),
        (lambda r: r["simulation"].update(event_bytes={"ghost": 10.0}),
         r"simulation\.event_bytes: unknown name 'ghost'"),
        (lambda r: r["simulation"].update(output_types={"ghost": {"A": 1.0}}),
         r"simulation\.output_types: unknown name 'ghost'"),
    ],
)
def test_bad_field_is_named(tmp_path: Path, mutate, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_config(_write(tmp_path, mutate))
