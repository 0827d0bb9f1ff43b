"""The fitted model: what the Spark fit stage produces and every optimizer consumes."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OperatorModel(_Model):
    """Per-operator queueing parameters fitted from telemetry windows."""

    operator: str
    query: str
    arrival_rate_mean: float = Field(ge=0, description="records_in/s, mean over windows")
    arrival_rate_p95: float = Field(ge=0)
    arrival_rate_max: float = Field(ge=0)
    service_mean_s: float = Field(ge=0, description="b: mean CPU time per record (s)")
    service_m2_s2: float = Field(ge=0, description="M2: second moment of service time (s^2)")
    service_scv: float = Field(ge=0, description="c_s^2 = M2/b^2 - 1")
    service_mean_ci: tuple[float, float] | None = Field(
        default=None, description="95% confidence interval of b over windows"
    )
    selectivity: float = Field(ge=0, description="records_out / records_in")
    selectivity_by_type: dict[str, float] = Field(default_factory=dict)
    utilisation: float = Field(ge=0, description="busy time / wall time, mean over windows")
    calibration: Literal["direct", "busy_time", "low_load"]
    samples: int = Field(ge=0, description="telemetry windows used")


class QueryModel(_Model):
    """Per-query (EPN) parameters: the EPN as one M/G/1 'super operator' (seed 000 §3)."""

    query: str
    arrival_rate_mean: float = Field(ge=0, description="input events/s into the EPN")
    arrival_rate_p95: float = Field(ge=0)
    arrival_rate_max: float = Field(ge=0)
    service_mean_s: float = Field(ge=0, description="b_i: CPU time per input event (s)")
    service_m2_s2: float = Field(ge=0, description="M_2,i (s^2)")
    service_mean_ci: tuple[float, float] | None = None
    calibration: Literal["direct", "busy_time", "low_load"] = "busy_time"
    cal_service_mean_s: float | None = Field(
        default=None, description="seed 000 low-load calibration of b_i (mean of rho/AR)"
    )
    cal_windows: int = Field(default=0, ge=0, description="windows used by the calibration")
    measured_rt_ms: float | None = Field(default=None, description="mean RT over the horizon")
    events: int = Field(ge=0)


class NodeModel(_Model):
    """Per-node observations."""

    node: str
    cpu_util_mean: float = Field(ge=0)
    power_w_mean: float | None = None
    interference_slope: float | None = Field(
        default=None, ge=0,
        description="parallelism overhead pi(m) = slope*(m-1) for m co-located operators "
        "(seed 004); fitted from utilisation vs. co-located vertices",
    )
    idle_power_w: float | None = Field(
        default=None, ge=0, description="kappa: power draw with nothing running (W)"
    )
    battery_wh: float | None = Field(
        default=None, ge=0, description="battery energy left at the end of the window (Wh)"
    )


class PlacementCosts(_Model):
    """Per-operator costs by node type for edge/cloud placement (seed 004); optional."""

    service_mean_s_by_type: dict[str, float] = Field(
        default_factory=dict, description="exclusive service time per node type (s/event)"
    )
    energy_j_per_event_by_type: dict[str, float] = Field(
        default_factory=dict, description="extra energy per input event per node type (J)"
    )
    event_bytes: float | None = Field(default=None, ge=0, description="mean output event size")


class LinkModel(_Model):
    """Per-link network figures."""

    src: str
    dst: str
    latency_ms: float = Field(ge=0)
    bandwidth_mbps: float = Field(ge=0)


class NodeState(_Model):
    """A machine of the current deployment."""

    type: str
    leased_at: str | None = None
    billing_unit_s: int | None = None


class Deployment(_Model):
    """The deployment in force: operator -> [(node, replicas)] and the nodes it uses."""

    placement: dict[str, list[tuple[str, int]]]
    nodes: dict[str, NodeState]


class FittedModel(_Model):
    """Everything an optimizer needs about the running system, versioned by ``model_id``."""

    model_id: str
    app: str
    window_start: str
    window_end: str
    rate_statistic: Literal["max", "p95", "mean"] = "max"
    operators: dict[str, OperatorModel]
    queries: dict[str, QueryModel]
    nodes: dict[str, NodeModel] = Field(default_factory=dict)
    links: list[LinkModel] = Field(default_factory=list)
    placement_costs: dict[str, PlacementCosts] = Field(
        default_factory=dict, description="operator -> per-node-type costs (seed 004)"
    )
    deployment: Deployment
    delta_versions: dict[str, int] = Field(default_factory=dict)

    def query_rate(self, query: str) -> float:
        """Arrival rate of a query under the configured statistic (seed 000 A7)."""
        q = self.queries[query]
        return {
            "max": q.arrival_rate_max,
            "p95": q.arrival_rate_p95,
            "mean": q.arrival_rate_mean,
        }[self.rate_statistic]
