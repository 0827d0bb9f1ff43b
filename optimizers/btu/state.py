"""The deployment a policy acts on: leased VMs with their BTU clock, instances per VM.

A :class:`Host` is one leased VM. Its billing follows seed 002 §3: every started BTU is
paid, so a VM leased at ``leased_at`` and released at ``t`` costs
``price · max(1, ceil((t − leased_at)/BTU))``. "Renewal" is implicit: a VM still running
when its paid BTU ends starts (and pays) the next one.

Examples
--------
>>> vm = VmType("m", cpu=4096, mem=7168, price=1.0, btu_s=600)
>>> h = Host("vm-1", vm, leased_at=0.0, ready_at=45.0)
>>> h.paid_btus(0.0), h.paid_btus(600.0), h.paid_btus(600.5)
(1, 1, 2)
>>> h.paid_end(590.0), h.time_left(590.0)
(600.0, 10.0)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .inputs import BtuInputError, OperatorType, VmType

__all__ = ["Action", "Cluster", "Host", "Observation"]

_EPS = 1e-6


@dataclass
class Host:
    """One leased VM: instances per operator type (running or starting) and cached images."""

    name: str
    vm: VmType
    leased_at: float
    ready_at: float
    instances: dict[str, int] = field(default_factory=dict)
    images: set[str] = field(default_factory=set)

    def paid_btus(self, now: float) -> int:
        """BTUs paid if the VM is released at ``now`` (at least one)."""
        return max(1, math.ceil((now - self.leased_at) / self.vm.btu_s - _EPS))

    def paid_end(self, now: float) -> float:
        """End of the BTU that is paid at ``now``."""
        return self.leased_at + self.paid_btus(now) * self.vm.btu_s

    def time_left(self, now: float) -> float:
        """h_BTU*: paid time left at ``now`` (s)."""
        return self.paid_end(now) - now

    def btu_start(self, now: float) -> float:
        """Start of the BTU that is paid at ``now``."""
        return self.paid_end(now) - self.vm.btu_s

    def used(self, types: Mapping[str, OperatorType]) -> tuple[float, float]:
        """Reserved (CPU shares, MB)."""
        cpu = sum(types[o].cpu * n for o, n in self.instances.items())
        mem = sum(types[o].mem * n for o, n in self.instances.items())
        return cpu, mem

    def free(self, types: Mapping[str, OperatorType]) -> tuple[float, float]:
        """h_cpu*, h_mem*: capacity not yet reserved."""
        cpu, mem = self.used(types)
        return self.vm.cpu - cpu, self.vm.mem - mem

    def count(self) -> int:
        """Instances on the host."""
        return sum(self.instances.values())

    def add(self, op: str, n: int = 1) -> None:
        """Reserve ``n`` more instances of ``op`` and cache its image."""
        self.instances[op] = self.instances.get(op, 0) + n
        self.images.add(op)

    def remove(self, op: str, n: int = 1) -> None:
        """Drop ``n`` instances of ``op``; raises if the host has fewer."""
        have = self.instances.get(op, 0)
        if have < n:
            raise BtuInputError(f"host {self.name!r} has {have} instances of {op!r}, not {n}")
        if have == n:
            del self.instances[op]
        else:
            self.instances[op] = have - n


@dataclass(frozen=True)
class Observation:
    """What monitoring says about one operator type at decision time.

    ``history_ms`` holds the last measurements of o_d, oldest first (x = 1..N, digest §8.2);
    ``d_ms`` is the newest (o_d); ``queue`` is o_queue.
    """

    d_ms: float
    queue: float
    history_ms: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        for name in ("d_ms", "queue"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                raise BtuInputError(f"observation.{name} must be finite and >= 0, got {v!r}")


@dataclass(frozen=True)
class Action:
    """One change a policy makes at ``time``; ``ready_at`` is when a new instance serves.

    kind: ``up`` (new instance of ``op`` on ``host``), ``down`` (stop one), ``migrate``
    (start on ``host``, stop on ``src`` once ready), ``lease``, ``release``, ``renew``
    (a VM in its release window kept for another BTU).
    """

    kind: str
    time: float
    op: str | None = None
    host: str | None = None
    src: str | None = None
    ready_at: float | None = None
    reason: str = ""


@dataclass
class Cluster:
    """The deployment: operator types, the VM type leased on demand, hosts in lease order,
    the scaling actions o_s per type so far, and every host ever leased (for billing)."""

    types: dict[str, OperatorType]
    vm: VmType
    hosts: dict[str, Host] = field(default_factory=dict)
    scaling_actions: dict[str, int] = field(default_factory=dict)
    released: dict[str, tuple[Host, float]] = field(default_factory=dict)
    next_id: int = 1
    prefix: str = "vm"

    def count(self, op: str) -> int:
        """o_#: running (or starting) instances of ``op``."""
        return sum(h.instances.get(op, 0) for h in self.hosts.values())

    def counts(self) -> dict[str, int]:
        """o_# for every type."""
        return {o: self.count(o) for o in self.types}

    def lease(self, now: float, params_vm_start_s: float) -> Host:
        """Lease a new VM of the cluster's type (billing starts now)."""
        while f"{self.prefix}-{self.next_id}" in self.hosts or (
            f"{self.prefix}-{self.next_id}" in self.released
        ):
            self.next_id += 1
        host = Host(f"{self.prefix}-{self.next_id}", self.vm, now, now + params_vm_start_s)
        self.next_id += 1
        self.hosts[host.name] = host
        return host

    def release(self, name: str, now: float) -> Host:
        """Release an (empty) VM now."""
        host = self.hosts[name]
        if host.count():
            raise BtuInputError(f"host {name!r} still runs {host.instances}; empty it first")
        del self.hosts[name]
        self.released[name] = (host, now)
        return host

    def note_scaling(self, op: str, n: int = 1) -> None:
        """Count a scaling action of ``op`` (o_s)."""
        self.scaling_actions[op] = self.scaling_actions.get(op, 0) + n

    def placement(self) -> dict[str, list[tuple[str, int]]]:
        """operator -> [(host, instances)] in host lease order."""
        out: dict[str, list[tuple[str, int]]] = {o: [] for o in self.types}
        for h in self.hosts.values():
            for o, n in h.instances.items():
                if n > 0:
                    out[o].append((h.name, n))
        return out

    def check(self) -> None:
        """Invariants: capacity per host and at least one instance per type (digest §10)."""
        for h in self.hosts.values():
            cpu, mem = h.free(self.types)
            if cpu < -_EPS or mem < -_EPS:
                raise BtuInputError(f"host {h.name!r} over capacity: free cpu {cpu}, mem {mem}")
        for o in self.types:
            if self.count(o) < 1:
                raise BtuInputError(f"operator {o!r} has no instance")

    def billing(self, end: float) -> Iterable[tuple[Host, float, float]]:
        """(host, lease start, lease end) of every VM, running ones ending at ``end``."""
        for host, at in self.released.values():
            yield host, host.leased_at, at
        for host in self.hosts.values():
            yield host, host.leased_at, end
