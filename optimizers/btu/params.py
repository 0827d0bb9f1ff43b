"""``method.params`` of the ``btu`` and ``btu-threshold`` methods, validated by pydantic.

Per-operator resource needs and targets (seed 002, Table 2) are not part of
:class:`streamplan.config.AppConfig`, so they live here; VM capacity, price and BTU come
from the config's node types (``cores`` × 1024 CPU shares, ``memory_gb`` × 1024 MB,
``price_per_hour`` × BTU/3600 per BTU, ``billing_unit_s``) unless ``btu_prices`` names a
price per BTU. Errors raise :class:`streamplan.config.ConfigError` naming the field and value.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from streamplan.config import AppConfig, ConfigError

from .inputs import SHARES_PER_CORE, BtuInputError, BtuParams, OperatorType, VmType

__all__ = ["BtuMethodParams", "OperatorParam", "parse_params", "vm_types"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OperatorParam(_Strict):
    """One operator type: o_slo, guaranteed CPU/memory per instance, image, hop delay."""

    slo_ms: float = Field(gt=0, description="o_slo: target processing time per item (ms)")
    cpu_shares: float = Field(gt=0, description="o_cpu (1 core = 1024 shares)")
    memory_mb: float = Field(gt=0, description="o_mem (MB)")
    image_mb: float = Field(default=0.0, ge=0, description="container image size (MB)")
    hop_ms: float | None = Field(
        default=None, ge=0, description="messaging part of o_d; default o_slo·(1 − 1/kappa)"
    )


class BtuMethodParams(_Strict):
    """Parameters of ``btu`` / ``btu-threshold`` (digest §5 defaults)."""

    operators: dict[str, OperatorParam]
    vm_type: str | None = Field(default=None, description="node type leased on demand")
    btu_prices: dict[str, float] = Field(
        default_factory=dict, description="node type -> price per BTU (overrides price_per_hour)"
    )
    kappa: float = Field(default=5.0, gt=1, description="o_slo / service mean (digest §8.1)")
    replan_interval_s: float = Field(default=60.0, gt=0, description="provisioning cycle")
    monitor_s: float = Field(default=15.0, gt=0)
    scaling_threshold: float = Field(default=50.0, ge=0)
    regression_n: int = Field(default=5, ge=2)
    cached_factor: float = Field(default=0.01, gt=0, le=1)
    empty_queue_bonus: float = Field(default=100.0, ge=0)
    weights: tuple[float, float, float, float] = (1.0, 1.0, 1.0, 1.0)
    penalty_per_item: float = Field(default=0.0001, ge=0)
    release_window_share: float = Field(default=0.05, gt=0, lt=1)
    removal_cap_share: float = Field(default=0.2, gt=0, le=1)
    baseline_up: float = Field(default=50.0, ge=0)
    baseline_up2: float = Field(default=250.0, ge=0)
    baseline_down: float = Field(default=1.0, ge=0)
    baseline_trigger: Literal["queue", "alg1"] = "queue"
    vm_start_s: float = Field(default=45.0, ge=0)
    instance_start_cached_s: float = Field(default=5.0, ge=0)
    instance_start_uncached_s: float = Field(default=10.0, ge=0)
    free_room: bool = True
    release_marking: Literal["per_type", "any"] = "per_type"
    max_cycles: int = Field(
        default=1, ge=1,
        description="provisioning cycles run on the predicted state per replan (stopping "
        "early when one makes no scaling action); 1 = one paper cycle per replan",
    )
    missing_lease: Literal["error", "window_start"] = Field(
        default="window_start",
        description="a deployed node without leased_at: fail, or assume it was leased at the "
        "fitted window's start (reported as a violation)",
    )
    exact: bool = Field(default=True, description="also solve the step MILP and report the gap")
    rho_max: float = Field(default=0.8, gt=0, le=1, description="n_o of the step MILP")
    drain_s: float = Field(default=300.0, gt=0, description="backlog drain time of n_o")
    time_limit_s: float = Field(default=10.0, gt=0)

    def policy_params(self) -> BtuParams:
        """The policy's parameter set."""
        try:
            return BtuParams(
                scaling_threshold=self.scaling_threshold,
                regression_n=self.regression_n,
                cached_factor=self.cached_factor,
                empty_queue_bonus=self.empty_queue_bonus,
                weights=self.weights,
                penalty=self.penalty_per_item,
                release_window_share=self.release_window_share,
                removal_cap_share=self.removal_cap_share,
                cycle_s=self.replan_interval_s,
                monitor_s=min(self.monitor_s, self.replan_interval_s),
                baseline_up=self.baseline_up,
                baseline_up2=self.baseline_up2,
                baseline_down=self.baseline_down,
                baseline_trigger=self.baseline_trigger,
                vm_start_s=self.vm_start_s,
                instance_start_cached_s=self.instance_start_cached_s,
                instance_start_uncached_s=self.instance_start_uncached_s,
                free_room=self.free_room,
                release_marking=self.release_marking,
            )
        except BtuInputError as exc:
            raise ConfigError(f"field 'method.params': {exc}") from exc

    def operator_types(self) -> dict[str, OperatorType]:
        """Operator types in the order of ``operators``."""
        try:
            return self._operator_types()
        except BtuInputError as exc:
            raise ConfigError(f"field 'method.params': {exc}") from exc

    def _operator_types(self) -> dict[str, OperatorType]:
        return {
            name: OperatorType(
                name,
                p.slo_ms,
                p.cpu_shares,
                p.memory_mb,
                p.image_mb,
                p.hop_ms if p.hop_ms is not None else p.slo_ms * (1 - 1 / self.kappa),
            )
            for name, p in self.operators.items()
        }


def vm_types(config: AppConfig, params: BtuMethodParams) -> dict[str, VmType]:
    """Every node type of the config as a :class:`VmType`; refuses negative or missing
    prices and a replanning interval longer than a BTU, naming the field and value."""
    out = {}
    for i, t in enumerate(config.node_types):
        if t.name in params.btu_prices:
            price = params.btu_prices[t.name]
            where = f"method.params.btu_prices.{t.name}"
        else:
            price = t.price_per_hour * t.billing_unit_s / 3600.0
            where = f"node_types[{i}].price_per_hour"
        if price is None or not math.isfinite(price) or price < 0:
            raise ConfigError(f"field '{where}': BTU price must be finite and >= 0, got {price!r}")
        if price == 0 and t.name not in params.btu_prices:
            raise ConfigError(
                f"field 'method.params.btu_prices.{t.name}': missing BTU price for node type "
                f"{t.name!r} (node_types[{i}].price_per_hour is 0; set one of them)"
            )
        if params.replan_interval_s > t.billing_unit_s:
            raise ConfigError(
                f"field 'method.params.replan_interval_s': {params.replan_interval_s:g} s is "
                f"longer than the BTU of node type {t.name!r} ({t.billing_unit_s} s); a VM "
                "could pass its release window unseen"
            )
        out[t.name] = VmType(t.name, t.cores * SHARES_PER_CORE, t.memory_gb * 1024.0, price,
                             float(t.billing_unit_s))
    return out


def parse_params(config: AppConfig) -> BtuMethodParams:
    """Validate ``config.method.params`` against the config; raises ConfigError naming the
    field and the value."""
    raw: dict[str, Any] = dict(config.method.params)
    try:
        params = BtuMethodParams.model_validate(raw)
    except ValidationError as exc:
        parts = [
            f"field 'method.params.{'.'.join(str(p) for p in err['loc'])}': {err['msg']} "
            f"(value: {err.get('input')!r})"
            for err in exc.errors()
        ]
        raise ConfigError("; ".join(parts)) from exc
    ops = [o.name for o in config.operators]
    unknown = sorted(set(params.operators) - set(ops))
    if unknown:
        raise ConfigError(f"field 'method.params.operators': unknown operators {unknown} "
                          f"(topology has {ops})")
    missing = [o for o in ops if o not in params.operators]
    if missing:
        raise ConfigError(f"field 'method.params.operators': no resources/SLO for {missing}")
    for name in params.btu_prices:
        if name not in {t.name for t in config.node_types}:
            raise ConfigError(f"field 'method.params.btu_prices': unknown node type {name!r}")
    if params.vm_type is not None and params.vm_type not in {t.name for t in config.node_types}:
        raise ConfigError(f"field 'method.params.vm_type': unknown node type {params.vm_type!r}")
    return params
