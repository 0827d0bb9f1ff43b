"""Plain typed inputs of the BTU-aware provisioning method (seed 002, Hochreiner et al.).

Units: CPU in shares (1 core = 1024), memory and images in MB, times in seconds (the
paper's per-item targets ``slo_ms`` in milliseconds), prices in cost units per billing time
unit (BTU). Every constructor validates its fields and raises :class:`BtuInputError` naming
the field and the offending value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "SHARES_PER_CORE",
    "BtuInputError",
    "BtuParams",
    "OperatorType",
    "VmType",
    "check_fits",
]

SHARES_PER_CORE = 1024.0


class BtuInputError(ValueError):
    """Inputs that cannot describe a BTU provisioning problem; the message names the field."""


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise BtuInputError(message)


def _positive(name: str, value: float) -> None:
    _check(
        isinstance(value, int | float) and math.isfinite(value) and value > 0,
        f"{name} must be finite and > 0, got {value!r}",
    )


def _nonneg(name: str, value: float) -> None:
    _check(
        isinstance(value, int | float) and math.isfinite(value) and value >= 0,
        f"{name} must be finite and >= 0, got {value!r}",
    )


@dataclass(frozen=True)
class OperatorType:
    """One operator type o of the topology (seed 002, Table 2).

    ``slo_ms`` is o_slo, the target processing time of one item; ``cpu``/``mem`` the
    guaranteed reservation per instance; ``image_mb`` the container image (only its being
    cached matters); ``hop_ms`` the fixed messaging part of the measured processing time.
    """

    name: str
    slo_ms: float
    cpu: float
    mem: float
    image_mb: float = 0.0
    hop_ms: float = 0.0

    def __post_init__(self) -> None:
        _check(bool(self.name), f"operator name must be non-empty, got {self.name!r}")
        _positive(f"operators[{self.name}].slo_ms", self.slo_ms)
        _positive(f"operators[{self.name}].cpu", self.cpu)
        _positive(f"operators[{self.name}].mem", self.mem)
        _nonneg(f"operators[{self.name}].image_mb", self.image_mb)
        _nonneg(f"operators[{self.name}].hop_ms", self.hop_ms)
        _check(
            self.hop_ms < self.slo_ms,
            f"operators[{self.name}].hop_ms must be < slo_ms ({self.slo_ms}), got {self.hop_ms}",
        )


@dataclass(frozen=True)
class VmType:
    """A leasable VM type: capacity, price per BTU and BTU length (seed 002, §5)."""

    name: str
    cpu: float
    mem: float
    price: float
    btu_s: float

    def __post_init__(self) -> None:
        _positive(f"vm_types[{self.name}].cpu", self.cpu)
        _positive(f"vm_types[{self.name}].mem", self.mem)
        _check(
            self.price is not None,
            f"vm_types[{self.name}].price (cost per BTU) is missing",
        )
        _nonneg(f"vm_types[{self.name}].price", self.price)
        _positive(f"vm_types[{self.name}].btu_s", self.btu_s)


@dataclass(frozen=True)
class BtuParams:
    """Every tunable of the BTU-aware policy and the threshold baseline (digest §5, §8).

    Attributes
    ----------
    scaling_threshold : queue gate of Alg. 1 (items).
    regression_n : N, the regression window of Alg. 1 (monitoring points).
    cached_factor : CF of Alg. 2.
    empty_queue_bonus : QL of Alg. 3.
    weights : W1..W4 of Alg. 3.
    penalty : P, cost per delayed item.
    release_window_share : release window as a share of the BTU (last 5 %).
    removal_cap_share : per-type cap on instances removed by one release (20 %).
    cycle_s : provisioning interval (decisions).
    monitor_s : monitoring interval (measurements).
    baseline_up, baseline_up2, baseline_down : queue thresholds of the baseline.
    baseline_trigger : ``queue`` (the thresholds) or ``alg1`` (Alg. 1 as the up-trigger).
    vm_start_s : time from lease to a usable VM.
    instance_start_cached_s, instance_start_uncached_s : container start latencies.
    free_room : Fig. 4 step 2 (drop an instance of a type with U > 0 to make room before
        leasing); ``False`` is an ablation that leases at once.
    release_marking : Fig. 5 phase 1. ``per_type`` (digest §4): the instances of each type
        with U > 0 are marked; ``any`` (the paper's literal sentence, "if any of the
        operator types has a positive utility value, all operator instances (up to 20 %
        ...) running on this host are marked"): every type on the host is marked once one
        type has U > 0. The per-type cap and "never the last instance" apply to both.
    """

    scaling_threshold: float = 50.0
    regression_n: int = 5
    cached_factor: float = 0.01
    empty_queue_bonus: float = 100.0
    weights: tuple[float, float, float, float] = (1.0, 1.0, 1.0, 1.0)
    penalty: float = 0.0001
    release_window_share: float = 0.05
    removal_cap_share: float = 0.2
    cycle_s: float = 60.0
    monitor_s: float = 15.0
    baseline_up: float = 50.0
    baseline_up2: float = 250.0
    baseline_down: float = 1.0
    baseline_trigger: str = "queue"
    vm_start_s: float = 45.0
    instance_start_cached_s: float = 5.0
    instance_start_uncached_s: float = 10.0
    free_room: bool = True
    release_marking: str = "per_type"

    def __post_init__(self) -> None:
        _nonneg("scaling_threshold", self.scaling_threshold)
        _check(
            isinstance(self.regression_n, int) and self.regression_n >= 2,
            f"regression_n must be an integer >= 2, got {self.regression_n!r}",
        )
        _check(
            0 < self.cached_factor <= 1,
            f"cached_factor must be in (0, 1], got {self.cached_factor!r}",
        )
        _nonneg("empty_queue_bonus", self.empty_queue_bonus)
        _check(len(self.weights) == 4, f"weights must have 4 entries, got {self.weights!r}")
        for k, w in enumerate(self.weights):
            _nonneg(f"weights[{k}]", w)
        _nonneg("penalty", self.penalty)
        _check(
            0 < self.release_window_share < 1,
            f"release_window_share must be in (0, 1), got {self.release_window_share!r}",
        )
        _check(
            0 < self.removal_cap_share <= 1,
            f"removal_cap_share must be in (0, 1], got {self.removal_cap_share!r}",
        )
        _positive("cycle_s", self.cycle_s)
        _positive("monitor_s", self.monitor_s)
        _check(
            self.monitor_s <= self.cycle_s,
            f"monitor_s must be <= cycle_s ({self.cycle_s}), got {self.monitor_s}",
        )
        _check(
            0 <= self.baseline_down <= self.baseline_up <= self.baseline_up2,
            "need 0 <= baseline_down <= baseline_up <= baseline_up2, got "
            f"{self.baseline_down}, {self.baseline_up}, {self.baseline_up2}",
        )
        _check(
            self.baseline_trigger in ("queue", "alg1"),
            f"baseline_trigger must be 'queue' or 'alg1', got {self.baseline_trigger!r}",
        )
        _check(
            self.release_marking in ("per_type", "any"),
            f"release_marking must be 'per_type' or 'any', got {self.release_marking!r}",
        )
        for name in ("vm_start_s", "instance_start_cached_s", "instance_start_uncached_s"):
            _nonneg(name, getattr(self, name))

    def release_window_s(self, btu_s: float) -> float:
        """The release window before a BTU end: max(5 % of the BTU, one cycle) (digest §8.7).

        >>> BtuParams().release_window_s(600), BtuParams().release_window_s(3600)
        (60.0, 180.0)
        """
        return max(self.release_window_share * btu_s, self.cycle_s)

    def check_interval(self, btu_s: float, field_name: str = "cycle_s") -> None:
        """A replanning interval longer than the BTU would skip whole BTUs: refuse it."""
        _check(
            self.cycle_s <= btu_s,
            f"{field_name} must be <= the BTU ({btu_s:g} s), got {self.cycle_s:g}",
        )


def check_fits(types: Mapping[str, OperatorType], vm: VmType) -> list[str]:
    """Operators no VM of type ``vm`` can host even when empty (one message each).

    >>> vm = VmType("m", cpu=4096, mem=7168, price=6, btu_s=3600)
    >>> check_fits({"big": OperatorType("big", 100, cpu=5000, mem=10)}, vm)
    ["operator 'big' needs 5000 CPU shares / 10 MB, but VM type 'm' has 4096 / 7168"]
    """
    out = []
    for o in types.values():
        if o.cpu > vm.cpu or o.mem > vm.mem:
            out.append(
                f"operator {o.name!r} needs {o.cpu:g} CPU shares / {o.mem:g} MB, but VM type "
                f"{vm.name!r} has {vm.cpu:g} / {vm.mem:g}"
            )
    return out
