"""The one interface every response-time model implements."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from optimizers.prediction.scenarios import Scenario

__all__ = ["ResponseTimeModel", "RtPrediction"]


@dataclass(frozen=True)
class RtPrediction:
    """Predicted mean response time per query (ms). An unstable query gets ``inf`` and a
    reason in ``unstable``; a prediction is never negative or NaN."""

    model: str
    rt_ms: dict[str, float]
    unstable: dict[str, str] = field(default_factory=dict)


class ResponseTimeModel(Protocol):
    """A named model mapping a scenario to per-query mean response times."""

    name: str

    def predict(self, scenario: Scenario) -> RtPrediction:
        """Predict the mean response time of every query of ``scenario``."""
        ...

    def job_moments(self, scenario: Scenario, query: str) -> tuple[float, float]:
        """Mean (s) and second moment (s²) of the work one input event of ``query`` brings
        when all its operators share one node (seed 000's EPN on one M/G/1 node)."""
        ...
