"""Planning methods by name: ``config.method.name`` -> function(fitted model, config).

Add a method by adding one entry to :data:`METHODS`.
"""

from __future__ import annotations

from collections.abc import Callable

from optimizers.binpack import plan_binpack
from optimizers.binpack_milp import plan_binpack_milp
from optimizers.btu import plan_btu, plan_btu_threshold
from optimizers.edgecloud.adapter import (
    plan_edgecloud_milp,
    plan_gag,
    plan_gai,
    plan_topset,
    plan_topset_p,
)
from optimizers.edrp import plan_edrp, plan_redrp
from optimizers.flink_parallelism import plan_flink_parallelism
from optimizers.shedding import plan_shedding
from streamplan.config import AppConfig
from streamplan.fitted import FittedModel
from streamplan.plan import Decision

__all__ = ["METHODS", "Method", "run_method"]

Method = Callable[[FittedModel, AppConfig], Decision]

METHODS: dict[str, Method] = {
    "binpack": plan_binpack,
    "binpack-milp": plan_binpack_milp,
    "shedding": plan_shedding,
    "edrp": plan_edrp,
    "redrp": plan_redrp,
    "flink-parallelism": plan_flink_parallelism,
    "topset": plan_topset,
    "topset-p": plan_topset_p,
    "gai": plan_gai,
    "gag": plan_gag,
    "edgecloud-milp": plan_edgecloud_milp,
    "btu": plan_btu,
    "btu-threshold": plan_btu_threshold,
}


def run_method(model: FittedModel, config: AppConfig) -> Decision:
    """Plan with the method named by ``config.method.name``.

    Raises
    ------
    ValueError
        When no method has that name.
    """
    name = config.method.name
    if name not in METHODS:
        raise ValueError(f"method.name: unknown method {name!r} (known: {sorted(METHODS)})")
    return METHODS[name](model, config)
