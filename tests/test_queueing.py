"""Seed 000's multi-class M/G/1 model: digest checks C1 and C4, invariant 6 (model sanity)."""

from __future__ import annotations

import math

import pytest

from optimizers.queueing import (
    EpnLoad,
    calibrate_low_load,
    node_load,
    queueing_delay,
    relative_deviation,
    residual_work,
    response_times,
    second_moment,
)


def exp_load(name: str, rate: float, b: float, target: float = 1.0) -> EpnLoad:
    return EpnLoad(name, rate, b, second_moment(b), target)


@pytest.fixture
def c1() -> list[EpnLoad]:
    return [exp_load("EPN1", 200, 0.002, 0.008), exp_load("EPN2", 100, 0.003, 0.0065)]


def test_c1_formula(c1: list[EpnLoad]) -> None:
    assert node_load(c1) == pytest.approx(0.7)
    assert residual_work(c1) == pytest.approx(1.7e-3)
    assert queueing_delay(c1) == pytest.approx(1.7e-3 / 0.3)
    w = response_times(c1)
    assert w["EPN1"] == pytest.approx(7.6667e-3, abs=1e-7)
    assert w["EPN2"] == pytest.approx(8.6667e-3, abs=1e-7)
    assert relative_deviation(w["EPN1"], 0.008) == pytest.approx(-0.0417, abs=1e-4)
    assert relative_deviation(w["EPN2"], 0.0065) == pytest.approx(0.3333, abs=1e-4)


def test_c4_calibration() -> None:
    # Ratios 2.1, 1.95, 2.1 ms: mean 2.05 ms (the digest's "2.025" is an arithmetic slip).
    b = calibrate_low_load([10, 20, 30], [0.021, 0.039, 0.063])
    assert b == pytest.approx(2.05e-3)
    assert second_moment(b) == pytest.approx(8.405e-6)


def test_calibration_regression_removes_background_load() -> None:
    rates = [5.0, 10.0, 20.0, 30.0]
    utils = [0.05 + 0.002 * r for r in rates]
    assert calibrate_low_load(rates, utils, "regression") == pytest.approx(0.002)
    assert calibrate_low_load(rates, utils) > 0.002  # the paper's ratio absorbs ρ_0


@pytest.mark.parametrize(
    ("rates", "utils", "estimator", "match"),
    [
        ([], [], "mean_ratio", "at least one"),
        ([1.0], [0.1, 0.2], "mean_ratio", "utilisations has 2"),
        ([0.0], [0.1], "mean_ratio", r"rates\[0\]"),
        ([10.0], [-0.1], "mean_ratio", r"utilisations\[0\]"),
        ([10.0, 10.0], [0.1, 0.2], "regression", "two distinct"),
        ([10.0], [0.1], "median", "estimator"),
    ],
)
def test_calibration_rejects_bad_input(rates, utils, estimator, match) -> None:
    with pytest.raises(ValueError, match=match):
        calibrate_low_load(rates, utils, estimator)


def test_mm1_closed_form() -> None:
    for rho in (0.1, 0.5, 0.9):
        b = 0.004
        (w,) = response_times([exp_load("q", rho / b, b)]).values()
        assert w == pytest.approx(b / (1 - rho))


def test_w_at_least_b_and_tends_to_b() -> None:
    for scale in (1.0, 1e-3, 1e-6):
        classes = [exp_load("a", 100 * scale, 0.002), exp_load("b", 50 * scale, 0.005)]
        w = response_times(classes)
        assert w["a"] >= 0.002 and w["b"] >= 0.005
    assert w["a"] == pytest.approx(0.002, rel=1e-5)
    assert w["b"] == pytest.approx(0.005, rel=1e-5)


def test_w_increases_strictly_with_every_rate() -> None:
    base = [exp_load("a", 100, 0.002), exp_load("b", 50, 0.005)]
    w0 = response_times(base)
    for k in range(2):
        bumped = list(base)
        c = bumped[k]
        bumped[k] = EpnLoad(c.name, c.rate * 1.1, c.service_mean_s, c.service_m2_s2, 1.0)
        w1 = response_times(bumped)
        assert all(w1[n] > w0[n] for n in w0)


def test_overload_is_infinite_and_out_of_band() -> None:
    classes = [exp_load("a", 300, 0.002), exp_load("b", 100, 0.004)]  # ρ = 1
    assert all(math.isinf(w) for w in response_times(classes).values())
    assert relative_deviation(math.inf, 0.01) > 0.2


def test_speed_scaling() -> None:
    load = EpnLoad("q", 100, 0.002, 1e-5, 0.01)
    fast = load.on_speed(2.0)
    assert fast.service_mean_s == pytest.approx(0.001)
    assert fast.service_m2_s2 == pytest.approx(2.5e-6)
    assert fast.rho == pytest.approx(load.rho / 2)
    assert load.on_speed(1.0) is load


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"rate": -1.0}, "rate"),
        ({"service_mean_s": math.nan}, "service_mean_s"),
        ({"service_m2_s2": math.inf}, "service_m2_s2"),
        ({"target_s": 0.0}, "target_s"),
    ],
)
def test_epn_load_validation_names_field(kwargs: dict, field: str) -> None:
    args = {"rate": 1.0, "service_mean_s": 0.001, "service_m2_s2": 2e-6, "target_s": 0.01}
    with pytest.raises(ValueError, match=rf"EpnLoad\[x\]\.{field}"):
        EpnLoad("x", **(args | kwargs))
