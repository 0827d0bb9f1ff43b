"""Multi-class FIFO M/G/1 model of one node hosting several EPNs (seed 000, §5).

Every EPN (a query's whole operator DAG) is one class of customers: Poisson events at rate
``AR_i`` with service time mean ``b_i`` and second moment ``M_2,i``. All events on a node share
one FIFO queue, so every class sees the same mean wait (Pollaczek–Khinchine). The paper's
equation bodies were lost in our copy; the formulas below are the digest's reconstruction.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

__all__ = [
    "EpnLoad",
    "calibrate_low_load",
    "node_load",
    "queueing_delay",
    "relative_deviation",
    "residual_work",
    "response_times",
    "second_moment",
]


@dataclass(frozen=True)
class EpnLoad:
    """One EPN as a single M/G/1 class (seed 000, §3 "single-EPN abstraction").

    Parameters
    ----------
    name : str
        EPN (query) id.
    rate : float
        ``AR_i``, input events/s.
    service_mean_s : float
        ``b_i``, CPU seconds per input event on the calibration host.
    service_m2_s2 : float
        ``M_2,i``, second moment of the service time (s²).
    target_s : float
        ``T_i``, target mean response time (s).
    measured_rt_s : float or None
        ``RT_i``, measured mean response time on the current placement, if known.
    """

    name: str
    rate: float
    service_mean_s: float
    service_m2_s2: float
    target_s: float
    measured_rt_s: float | None = None

    def __post_init__(self) -> None:
        for field in ("rate", "service_mean_s", "service_m2_s2"):
            value = getattr(self, field)
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(
                    f"EpnLoad[{self.name}].{field} must be finite and >= 0, got {value}"
                )
        if not self.target_s > 0:
            raise ValueError(f"EpnLoad[{self.name}].target_s must be > 0, got {self.target_s}")

    @property
    def rho(self) -> float:
        """CPU share ``ρ_i = AR_i·b_i``."""
        return self.rate * self.service_mean_s

    def on_speed(self, speed: float) -> EpnLoad:
        """The same EPN on a host ``speed`` times as fast as the calibration host
        (seed 000 A11: ``b / speed``, ``M_2 / speed²``)."""
        if speed == 1.0:
            return self
        return replace(
            self,
            service_mean_s=self.service_mean_s / speed,
            service_m2_s2=self.service_m2_s2 / speed**2,
        )


def second_moment(mean_s: float, scv: float = 1.0) -> float:
    """Second moment ``M_2 = (1 + c²)·b²`` of a service time with mean ``b`` and SCV ``c²``.

    Examples
    --------
    The exponential case of seed 000 (``c² = 1``, so ``M_2 = 2b²``):

    >>> second_moment(0.002)
    8e-06
    >>> second_moment(0.002, scv=0.0)  # deterministic
    4e-06
    """
    return (1.0 + scv) * mean_s**2


def node_load(classes: Iterable[EpnLoad]) -> float:
    """Node load ``ρ = Σ_i AR_i·b_i`` (seed 000, Eq. (5.1), reconstructed).

    Examples
    --------
    Digest check C1: EPN1 (200/s, 2 ms) and EPN2 (100/s, 3 ms) on one node.

    >>> c1 = [EpnLoad("EPN1", 200, 0.002, 8e-6, 0.008), EpnLoad("EPN2", 100, 0.003, 1.8e-5, 0.0065)]
    >>> round(node_load(c1), 12)
    0.7
    """
    return sum(c.rho for c in classes)


def residual_work(classes: Iterable[EpnLoad]) -> float:
    """Mean residual work seen by an arrival, ``W_0 = Σ_j AR_j·M_2,j / 2`` (s).

    Seed 000, Eq. (5.2) (reconstructed, P-K).

    Examples
    --------
    >>> c1 = [EpnLoad("EPN1", 200, 0.002, 8e-6, 0.008), EpnLoad("EPN2", 100, 0.003, 1.8e-5, 0.0065)]
    >>> round(residual_work(c1), 12)
    0.0017
    """
    return sum(c.rate * c.service_m2_s2 for c in classes) / 2.0


def queueing_delay(classes: Sequence[EpnLoad]) -> float:
    """Mean FIFO wait shared by all classes, ``W_q = W_0 / (1 − ρ)``; ``inf`` when ``ρ ≥ 1``.

    Seed 000, Eq. (5.2) (reconstructed, P-K).

    Examples
    --------
    >>> c1 = [EpnLoad("EPN1", 200, 0.002, 8e-6, 0.008), EpnLoad("EPN2", 100, 0.003, 1.8e-5, 0.0065)]
    >>> round(queueing_delay(c1) * 1000, 4)  # ms
    5.6667
    >>> queueing_delay([EpnLoad("hot", 600, 0.002, 8e-6, 0.008)])
    inf
    """
    rho = node_load(classes)
    if rho >= 1.0:
        return math.inf
    return residual_work(classes) / (1.0 - rho)


def response_times(classes: Sequence[EpnLoad]) -> dict[str, float]:
    """Mean response time of each class on one node, ``W_i = b_i + W_q`` (s).

    Seed 000, Eq. (5.2) (reconstructed, P-K). ``inf`` for every class when ``ρ ≥ 1``.

    Parameters
    ----------
    classes : sequence of EpnLoad
        The EPNs hosted together on the node (``Z_x``), already scaled to its speed.

    Returns
    -------
    dict
        EPN name -> ``W_i`` in seconds.

    Examples
    --------
    M/M/1 (one exponential class): ``W = b / (1 − ρ)``; here ``ρ = 0.5``, so ``W = 2b``.

    >>> response_times([EpnLoad("q", 250, 0.002, second_moment(0.002), 0.01)])
    {'q': 0.004}

    Digest check C1: ``W_1 = 7.6667`` ms and ``W_2 = 8.6667`` ms.

    >>> c1 = [EpnLoad("EPN1", 200, 0.002, 8e-6, 0.008), EpnLoad("EPN2", 100, 0.003, 1.8e-5, 0.0065)]
    >>> {k: round(v * 1000, 4) for k, v in response_times(c1).items()}
    {'EPN1': 7.6667, 'EPN2': 8.6667}
    """
    wq = queueing_delay(classes)
    return {c.name: c.service_mean_s + wq for c in classes}


def relative_deviation(w: float, target: float) -> float:
    """Relative deviation ``δ = (W − T) / T`` of a response time from its target.

    Seed 000, Eq. (4.1) for measured ``RT`` and Eq. (5.3) for estimated ``W`` (reconstructed).

    Examples
    --------
    Digest check C1 (ms): EPN1 is inside the ±20 % band, EPN2 is above it.

    >>> round(relative_deviation(7.6667, 8.0), 4)
    -0.0417
    >>> round(relative_deviation(26 / 3, 6.5), 4)
    0.3333
    >>> relative_deviation(float("inf"), 6.5)
    inf
    """
    return (w - target) / target


def calibrate_low_load(
    rates: Sequence[float],
    utilisations: Sequence[float],
    estimator: Literal["mean_ratio", "regression"] = "mean_ratio",
) -> float:
    """Mean service time ``b`` from low-load runs of one EPN alone on a reference node.

    Seed 000, §3 "calibration": ``b = mean_r(ρ_r / AR_r)``. ``estimator="regression"`` uses
    the least-squares slope of ``ρ = ρ_0 + b·AR`` instead, which removes a constant
    background load ``ρ_0`` (digest A8).

    Parameters
    ----------
    rates : sequence of float
        ``AR_r`` per run (events/s, > 0).
    utilisations : sequence of float
        ``ρ_r`` per run (CPU share, >= 0).
    estimator : {"mean_ratio", "regression"}
        Paper estimator or regression slope.

    Returns
    -------
    float
        ``b`` in seconds per event; the exponential model then uses ``M_2 = 2b²``.

    Raises
    ------
    ValueError
        On empty or unequal inputs, a non-positive rate, or fewer than two distinct rates
        for the regression.

    Examples
    --------
    Digest check C4: three runs with ratios 2.1, 1.95 and 2.1 ms give ``b = 2.05`` ms
    (the digest prints 2.025 ms, an arithmetic slip: 6.15 / 3 = 2.05).

    >>> b = calibrate_low_load([10, 20, 30], [0.021, 0.039, 0.063])
    >>> round(b * 1000, 6), round(second_moment(b), 16)
    (2.05, 8.405e-06)
    >>> round(calibrate_low_load([10, 20, 30], [0.03, 0.05, 0.07], "regression"), 12)
    0.002
    """
    if len(rates) != len(utilisations):
        raise ValueError(f"rates has {len(rates)} values but utilisations has {len(utilisations)}")
    if not rates:
        raise ValueError("rates: at least one low-load run is needed")
    for i, (r, u) in enumerate(zip(rates, utilisations, strict=True)):
        if not r > 0:
            raise ValueError(f"rates[{i}] must be > 0, got {r}")
        if not u >= 0:
            raise ValueError(f"utilisations[{i}] must be >= 0, got {u}")
    n = len(rates)
    if estimator == "mean_ratio":
        return sum(u / r for r, u in zip(rates, utilisations, strict=True)) / n
    if estimator == "regression":
        mean_r = sum(rates) / n
        mean_u = sum(utilisations) / n
        sxx = sum((r - mean_r) ** 2 for r in rates)
        if sxx == 0:
            raise ValueError("rates: the regression needs at least two distinct rates")
        sxy = sum((r - mean_r) * (u - mean_u) for r, u in zip(rates, utilisations, strict=True))
        return sxy / sxx
    raise ValueError(f"estimator must be 'mean_ratio' or 'regression', got {estimator!r}")


def erlang_c(c: int, a: float) -> float:
    """Probability of waiting in M/M/c with offered load ``a = λ/μ`` (1 if a ≥ c): Erlang B
    by its stable recursion B_k = aB_{k-1}/(k + aB_{k-1}), then C = B/(1 − ρ(1 − B)), ρ = a/c
    (Kleinrock, Queueing Systems vol. 1, 1975, eqs. 3.40 and 3.46).

    >>> erlang_c(1, 0.5), round(erlang_c(2, 1.0), 6)
    (0.5, 0.333333)
    """
    if c < 1:
        raise ValueError(f"c must be >= 1, got {c}")
    if a <= 0:
        return 0.0
    if a >= c:
        return 1.0
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    rho = a / c
    return b / (1 - rho * (1 - b))


def mgc_response_time_s(rate: float, service_s: float, scv: float, c: int) -> float:
    """Mean sojourn of M/G/c: the Allen–Cunneen approximation
    W_q ≈ C(c, a)·S/(c − a)·(1 + c_s²)/2 (Allen, Probability, Statistics and Queueing Theory,
    2nd ed. 1990, §6.3) plus S; ``inf`` at or above capacity. Exact for M/M/c (c_s² = 1)."""
    a = rate * service_s
    if a >= c:
        return math.inf
    return erlang_c(c, a) * service_s / (c - a) * (1 + scv) / 2 + service_s
