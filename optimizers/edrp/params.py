"""``method.params`` of the ``edrp`` / ``redrp`` methods, validated by pydantic.

The network (physical links with delays), the DataStore and the per-operator EDRP attributes
(pins, k_i, state and code size) are not part of :class:`streamplan.config.AppConfig`, so they
live here. Node capacity Res_u and speed-up S_u come from the config's node types
(``cores`` and ``speed``). Errors raise :class:`streamplan.config.ConfigError` naming the field.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from streamplan.config import ConfigError

from .inputs import Weights

__all__ = ["WEIGHT_PRESETS", "EdrpParams", "parse_params"]

# seed 003, Section 7.2 / Table III: (w_r, w_c, w_d) of the four objective configurations.
WEIGHT_PRESETS: dict[str, tuple[float, float, float]] = {
    "baseline": (0.5, 0.5, 0.0),
    "balanced": (0.3, 0.3, 0.4),
    "response_time": (0.6, 0.0, 0.4),
    "cost": (0.0, 0.6, 0.4),
}
Preset = Literal["baseline", "balanced", "response_time", "cost"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WeightsParam(_Strict):
    """w_r, w_c, w_d ≥ 0 summing to 1 (seed 003, Eq. (12))."""

    r: float = Field(ge=0, le=1)
    c: float = Field(ge=0, le=1)
    d: float = Field(ge=0, le=1)

    @model_validator(mode="after")
    def _sums_to_one(self) -> WeightsParam:
        if abs(self.r + self.c + self.d - 1) > 1e-9:
            raise ValueError(f"r + c + d must be 1, got {self.r + self.c + self.d:g}")
        return self


class BoundsParam(_Strict):
    """R_max, C_max, T_D,max (seed 003, Eqs. (15)–(17)); defaults from Section 7.2."""

    r_max_ms: float = Field(default=175.0, gt=0)
    c_max_per_hour: float = Field(default=30.0, gt=0)
    td_max_s: float = Field(default=7.5, gt=0)


class DataStoreParam(_Strict):
    """Delay and rate between every node and the DataStore (seed 003, Table II)."""

    delay_ms: float = Field(default=5.0, ge=0)
    rate_mbps: float = Field(default=100.0, gt=0)


class LinkParam(_Strict):
    """A physical link; logical links follow shortest-delay routes over these."""

    src: str
    dst: str
    delay_ms: float = Field(ge=0)


class NetworkParam(_Strict):
    """Physical links and the cost C_(u,v) of inter-node traffic ($/h per tuple/s)."""

    links: list[LinkParam] = Field(default_factory=list)
    link_cost_per_tps: float = Field(default=0.0, ge=0)


class OperatorParam(_Strict):
    """EDRP attributes of one operator; unset values fall back to the method-wide ones."""

    pin: list[str] | None = Field(default=None, min_length=1, description="V_res^i")
    max_replicas: int | None = Field(default=None, ge=1, description="k_i")
    state_bytes: float = Field(default=0.0, ge=0, description="I_S,i")
    code_bytes: float | None = Field(default=None, ge=0, description="I_C,i")
    resources: float = Field(default=1.0, gt=0, description="Res_i")


class EdrpParams(_Strict):
    """Parameters of the ``edrp`` and ``redrp`` methods (seed 003 digest §9, "Config")."""

    weights: WeightsParam | Preset = "balanced"
    max_replicas: int = Field(default=2, ge=1, description="k for operators without their own")
    time_limit_s: float = Field(default=60.0, gt=0)
    gap: float = Field(default=0.0, ge=0, description="relative gap at which SCIP stops")
    bounds: BoundsParam = BoundsParam()
    replica_price_per_hour: float = Field(default=1.0, ge=0, description="C_i")
    t_syn_s: float = Field(default=0.25, ge=0)
    spawn_s: float = Field(default=0.5, ge=0, description="t_s,u")
    code_bytes: float = Field(default=300 * 1024, ge=0, description="I_C,i default")
    datastore: DataStoreParam = DataStoreParam()
    network: NetworkParam = NetworkParam()
    operators: dict[str, OperatorParam] = Field(default_factory=dict)

    def weight_values(self) -> Weights:
        """The weights, resolving a Table III preset name."""
        if isinstance(self.weights, str):
            return Weights(*WEIGHT_PRESETS[self.weights])
        return Weights(self.weights.r, self.weights.c, self.weights.d)


def parse_params(params: dict[str, Any]) -> EdrpParams:
    """Validate ``method.params``; raises ConfigError naming each offending field."""
    try:
        return EdrpParams.model_validate(params)
    except ValidationError as exc:
        parts = [
            f"field 'method.params.{'.'.join(str(p) for p in err['loc'])}': {err['msg']}"
            for err in exc.errors()
        ]
        raise ConfigError("; ".join(parts)) from exc
