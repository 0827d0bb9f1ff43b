"""The exact counterpart of one replanning step on SCIP (digest §9, "Exact SCIP counterpart").

Over a horizon T (one provisioning cycle) choose instance counts per type and host, which
existing VMs to renew and how many new ones to lease, so that the predicted-load requirement
n_o is met at minimum cost. Paid BTU time is sunk: an existing VM whose paid time outlasts
T costs nothing more, one whose BTU ends inside T costs ``price·ceil((T − left)/BTU)`` if
kept, and a new VM costs ``price·ceil(T/BTU)``. That is what makes lazy release optimal.

Variables: ``x[o,h] ∈ Z≥0`` on existing hosts E and candidate hosts C; ``k[h]`` renew (E
with paid time left < T), ``z[c]`` lease (C); shortfall ``s[o] ≥ 0``; moves
``u[o,h] ≥ x − x0``, ``d[o,h] ≥ x0 − x``.

Constraints: ``Σ_o cpu_o x[o,h] ≤ cpu_h a_h`` and likewise memory (a_h = 1, k[h] or z[c]);
``Σ_h x[o,h] + s[o] ≥ n_o``; ``Σ_h x[o,h] ≥ 1``; optionally
``Σ_h d[o,h] ≤ max(1, floor(share · Σ_h x0[o,h]))``; ``z[c] ≥ z[c+1]`` (symmetry).

Objective: renewals + leases + ``P·Σ_o δ_o s[o]`` + ``ε Σ(u + d)`` + ``ε' Σ u`` on hosts
without the image cached. ``δ_o`` is the expected number of delayed items per missing
instance over T.

``build_model`` / ``solve`` / ``extract`` are the three solver steps; :func:`step_cost`
evaluates any solution (the heuristic's too) under the same objective, and
:func:`brute_force` enumerates tiny instances for the tests.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import pyscipopt
from pyscipopt import quicksum

from .inputs import BtuInputError, OperatorType, VmType
from .state import Cluster

__all__ = [
    "StepHost",
    "StepInstance",
    "StepResult",
    "StepSolution",
    "StepVars",
    "brute_force",
    "build_model",
    "demand",
    "extract",
    "ffd_bins",
    "instance_from_cluster",
    "solve",
    "solution_from_cluster",
    "solve_step",
    "step_cost",
]

_TOL = 1e-6


@dataclass(frozen=True)
class StepHost:
    """An existing VM: capacity, price per BTU, paid time left now, instances and images."""

    name: str
    cpu: float
    mem: float
    price: float
    btu_s: float
    paid_left_s: float
    x0: Mapping[str, int] = field(default_factory=dict)
    images: frozenset[str] = frozenset()


@dataclass(frozen=True)
class StepInstance:
    """One replanning step: types, existing hosts, the VM type to lease, the requirement."""

    types: Mapping[str, OperatorType]
    hosts: tuple[StepHost, ...]
    vm: VmType
    n_candidates: int
    demand: Mapping[str, int]
    delay_per_missing: Mapping[str, float]
    penalty: float
    horizon_s: float
    eps_move: float = 1e-4
    eps_uncached: float = 1e-5
    removal_cap_share: float | None = None

    def __post_init__(self) -> None:
        def bad(msg: str) -> None:
            raise BtuInputError(msg)

        if not self.types:
            bad("types must not be empty")
        for o in self.types:
            for name, values in (("demand", self.demand), ("delay_per_missing",
                                                            self.delay_per_missing)):
                v = values.get(o)
                if v is None or not math.isfinite(v) or v < 0:
                    bad(f"{name}[{o}] must be finite and >= 0, got {v!r}")
        for name, values in (("demand", self.demand), ("delay_per_missing",
                                                        self.delay_per_missing)):
            unknown = sorted(set(values) - set(self.types))
            if unknown:
                bad(f"{name}: operators {unknown} are not in the topology")
        if self.n_candidates < 0:
            bad(f"n_candidates must be >= 0, got {self.n_candidates}")
        if not (math.isfinite(self.horizon_s) and self.horizon_s > 0):
            bad(f"horizon_s must be > 0, got {self.horizon_s!r}")
        if not (math.isfinite(self.penalty) and self.penalty >= 0):
            bad(f"penalty must be finite and >= 0, got {self.penalty!r}")
        names = [h.name for h in self.hosts]
        if len(set(names)) != len(names):
            bad(f"hosts: duplicate names in {names}")
        for h in self.hosts:
            if not (math.isfinite(h.price) and h.price >= 0):
                bad(f"hosts[{h.name}].price must be finite and >= 0, got {h.price!r}")
            if h.paid_left_s < 0:
                bad(f"hosts[{h.name}].paid_left_s must be >= 0, got {h.paid_left_s}")
            for o, n in h.x0.items():
                if o not in self.types:
                    bad(f"hosts[{h.name}].x0: operator {o!r} is not in the topology")
                if n < 0:
                    bad(f"hosts[{h.name}].x0[{o}] must be >= 0, got {n}")

    # --- derived figures ------------------------------------------------------------------
    def renew_cost(self, h: StepHost) -> float:
        """What keeping ``h`` through the horizon costs (0 if its paid time outlasts it)."""
        if h.paid_left_s >= self.horizon_s:
            return 0.0
        return h.price * math.ceil((self.horizon_s - h.paid_left_s) / h.btu_s - _TOL)

    def lease_cost(self) -> float:
        """A new VM over the horizon."""
        return self.vm.price * max(1, math.ceil(self.horizon_s / self.vm.btu_s - _TOL))

    def candidate_names(self) -> list[str]:
        """Names of the candidate (new) VMs."""
        return [f"new-{c + 1}" for c in range(self.n_candidates)]

    def capacity(self, host: str) -> tuple[float, float]:
        """(CPU, memory) of an existing or candidate host."""
        for h in self.hosts:
            if h.name == host:
                return h.cpu, h.mem
        return self.vm.cpu, self.vm.mem

    def max_count(self, op: str, host: str) -> int:
        """Most instances of ``op`` that fit on an empty ``host``."""
        cpu, mem = self.capacity(host)
        t = self.types[op]
        return int(math.floor(min(cpu / t.cpu, mem / t.mem) + _TOL))


@dataclass(frozen=True)
class StepSolution:
    """Instances per (type, host), renewed existing hosts and leased candidates."""

    x: Mapping[tuple[str, str], int]
    renew: frozenset[str]
    leased: int

    def used_hosts(self) -> set[str]:
        """Hosts with at least one instance."""
        return {h for (_, h), n in self.x.items() if n > 0}


def step_cost(inst: StepInstance, sol: StepSolution) -> dict[str, float]:
    """The objective of a solution, broken down; raises naming a violated constraint."""
    cands = inst.candidate_names()
    existing = {h.name: h for h in inst.hosts}
    if sol.leased > inst.n_candidates:
        raise BtuInputError(f"solution leases {sol.leased} VMs, only {inst.n_candidates} allowed")
    active = {n for n, h in existing.items() if h.paid_left_s >= inst.horizon_s}
    active |= set(sol.renew) | set(cands[: sol.leased])
    for (o, h), n in sol.x.items():
        if n > 0 and h not in active:
            raise BtuInputError(f"x[{o},{h}] = {n} on a host that is neither kept nor leased")
    for h in active:
        cpu, mem = inst.capacity(h)
        used_c = sum(inst.types[o].cpu * n for (o, g), n in sol.x.items() if g == h)
        used_m = sum(inst.types[o].mem * n for (o, g), n in sol.x.items() if g == h)
        if used_c > cpu + _TOL or used_m > mem + _TOL:
            raise BtuInputError(f"host {h!r} over capacity: {used_c:g}/{cpu:g} CPU, "
                                f"{used_m:g}/{mem:g} MB")
    leasing = sum(inst.renew_cost(existing[h]) for h in sol.renew if h in existing)
    leasing += inst.lease_cost() * sol.leased
    penalty = moves = uncached = 0.0
    for o in inst.types:
        total = sum(n for (p, _), n in sol.x.items() if p == o)
        if total < 1:
            raise BtuInputError(f"operator {o!r} has no instance")
        penalty += inst.penalty * inst.delay_per_missing[o] * max(0, inst.demand[o] - total)
        if inst.removal_cap_share is not None:
            base = sum(h.x0.get(o, 0) for h in inst.hosts)
            cap = max(1, math.floor(inst.removal_cap_share * base))
            removed = sum(max(0, h.x0.get(o, 0) - sol.x.get((o, h.name), 0)) for h in inst.hosts)
            if removed > cap:
                raise BtuInputError(f"operator {o!r}: {removed} instances removed, cap {cap}")
        for h in [*existing, *cands]:
            x0 = existing[h].x0.get(o, 0) if h in existing else 0
            x = sol.x.get((o, h), 0)
            moves += abs(x - x0)
            imgs = existing[h].images if h in existing else frozenset()
            if o not in imgs:
                uncached += max(0, x - x0)
    total_cost = leasing + penalty + inst.eps_move * moves + inst.eps_uncached * uncached
    return {"total": total_cost, "leasing": leasing, "penalty": penalty, "moves": moves,
            "uncached_starts": uncached}


@dataclass
class StepVars:
    """Variable handles of a built model (PySCIPOpt's ``model.data`` pattern)."""

    x: dict[tuple[str, str], pyscipopt.scip.Variable]
    renew: dict[str, pyscipopt.scip.Variable]
    lease: list[pyscipopt.scip.Variable]
    shortfall: dict[str, pyscipopt.scip.Variable]


def build_model(inst: StepInstance) -> tuple[pyscipopt.Model, StepVars]:
    """The step MILP with named variables and constraints, not solved."""
    m = pyscipopt.Model("btu-step")
    m.hideOutput()
    cands = inst.candidate_names()
    ops = list(inst.types)
    x: dict[tuple[str, str], pyscipopt.scip.Variable] = {}
    renew: dict[str, pyscipopt.scip.Variable] = {}
    lease: list[pyscipopt.scip.Variable] = []
    active: dict[str, object] = {}
    cost_terms = []
    for h in inst.hosts:
        if h.paid_left_s >= inst.horizon_s:
            active[h.name] = 1
        else:
            k = m.addVar(vtype="B", name=f"k[{h.name}]")
            renew[h.name] = k
            active[h.name] = k
            cost_terms.append(inst.renew_cost(h) * k)
    for c in cands:
        z = m.addVar(vtype="B", name=f"z[{c}]")
        lease.append(z)
        active[c] = z
        cost_terms.append(inst.lease_cost() * z)
    for a, b in itertools.pairwise(lease):
        m.addCons(a >= b, name=f"sym[{a.name},{b.name}]")
    x0 = {(o, h.name): h.x0.get(o, 0) for h in inst.hosts for o in ops}
    images = {h.name: h.images for h in inst.hosts}
    move_terms = []
    uncached_terms = []
    for h in [*(g.name for g in inst.hosts), *cands]:
        for o in ops:
            x[o, h] = m.addVar(vtype="I", lb=0, ub=inst.max_count(o, h), name=f"x[{o},{h}]")
            base = x0.get((o, h), 0)
            u = m.addVar(lb=0, name=f"u[{o},{h}]")
            d = m.addVar(lb=0, name=f"d[{o},{h}]")
            m.addCons(u >= x[o, h] - base, name=f"up[{o},{h}]")
            m.addCons(d >= base - x[o, h], name=f"down[{o},{h}]")
            move_terms += [u, d]
            if o not in images.get(h, frozenset()):
                uncached_terms.append(u)
        cpu, mem = inst.capacity(h)
        m.addCons(quicksum(inst.types[o].cpu * x[o, h] for o in ops) <= cpu * active[h],
                  name=f"cpu[{h}]")
        m.addCons(quicksum(inst.types[o].mem * x[o, h] for o in ops) <= mem * active[h],
                  name=f"mem[{h}]")
    hosts_all = [*(g.name for g in inst.hosts), *cands]
    shortfall = {}
    for o in ops:
        s = m.addVar(lb=0, name=f"s[{o}]")
        shortfall[o] = s
        m.addCons(quicksum(x[o, h] for h in hosts_all) + s >= inst.demand[o], name=f"demand[{o}]")
        m.addCons(quicksum(x[o, h] for h in hosts_all) >= 1, name=f"one[{o}]")
        cost_terms.append(inst.penalty * inst.delay_per_missing[o] * s)
        if inst.removal_cap_share is not None:
            base = sum(h.x0.get(o, 0) for h in inst.hosts)
            cap = max(1, math.floor(inst.removal_cap_share * base))
            downs = [v for v in move_terms if v.name.startswith(f"d[{o},")]
            m.addCons(quicksum(downs) <= cap, name=f"cap[{o}]")
    m.setObjective(
        quicksum(cost_terms) + inst.eps_move * quicksum(move_terms)
        + inst.eps_uncached * quicksum(uncached_terms),
        "minimize",
    )
    return m, StepVars(x, renew, lease, shortfall)


@dataclass(frozen=True)
class StepResult:
    """Status, objective, bound, gap and time of one solve, with the solution if any."""

    status: str
    objective: float | None
    bound: float | None
    gap: float | None
    time_s: float
    build_s: float
    n_vars: int
    n_conss: int
    solution: StepSolution | None
    message: str = ""


def solve(m: pyscipopt.Model, *, time_limit_s: float = 30.0, gap: float = 0.0) -> str:
    """Optimise; returns SCIP's status string."""
    m.setParam("limits/time", time_limit_s)
    m.setParam("limits/gap", gap)
    m.optimize()
    return m.getStatus()


def extract(m: pyscipopt.Model, v: StepVars) -> StepSolution:
    """Read the incumbent with an epsilon."""
    x = {k: int(round(m.getVal(var))) for k, var in v.x.items()}
    x = {k: n for k, n in x.items() if n > 0}
    renew = frozenset(h for h, var in v.renew.items() if m.getVal(var) > 0.5)
    leased = sum(1 for var in v.lease if m.getVal(var) > 0.5)
    return StepSolution(x, renew, leased)


def solve_step(
    inst: StepInstance, *, time_limit_s: float = 30.0, gap: float = 0.0
) -> StepResult:
    """Build, solve and read back one step."""
    t0 = time.perf_counter()
    m, v = build_model(inst)
    build_s = time.perf_counter() - t0
    status = solve(m, time_limit_s=time_limit_s, gap=gap)
    has = m.getNSols() > 0
    sol = extract(m, v) if has else None
    mapped = {"optimal": "optimal", "infeasible": "infeasible"}.get(
        status, "feasible" if has else "error"
    )
    return StepResult(
        status=mapped,
        objective=m.getObjVal() if has else None,
        bound=m.getDualbound(),
        gap=m.getGap() if has else None,
        time_s=m.getSolvingTime(),
        build_s=build_s,
        n_vars=m.getNVars(),
        n_conss=m.getNConss(),
        solution=sol,
        message=f"SCIP status {status}",
    )


def demand(
    rate: float, queue: float, service_s: float, *, drain_s: float, rho_max: float
) -> int:
    """n_o = ceil((λ + q/T_drain)·b/ρ_max), at least 1.

    >>> demand(10.0, 0.0, 0.12, drain_s=60, rho_max=0.8)
    2
    >>> demand(10.0, 600.0, 0.12, drain_s=60, rho_max=0.8)
    3
    """
    return max(1, math.ceil((rate + queue / drain_s) * service_s / rho_max - _TOL))


def brute_force(inst: StepInstance) -> tuple[float, StepSolution]:
    """Enumerate every solution of a tiny instance (tests only): (optimum, argmin)."""
    ops = list(inst.types)
    existing = [h.name for h in inst.hosts]
    cands = inst.candidate_names()

    def fills(host: str) -> list[tuple[int, ...]]:
        cpu, mem = inst.capacity(host)
        ranges = [range(inst.max_count(o, host) + 1) for o in ops]
        out = []
        for combo in itertools.product(*ranges):
            c = sum(inst.types[o].cpu * n for o, n in zip(ops, combo, strict=True))
            mm = sum(inst.types[o].mem * n for o, n in zip(ops, combo, strict=True))
            if c <= cpu + _TOL and mm <= mem + _TOL:
                out.append(combo)
        return out

    best: tuple[float, StepSolution] | None = None
    per_host = [fills(h) for h in [*existing, *cands]]
    for choice in itertools.product(*per_host):
        x = {}
        for h, combo in zip([*existing, *cands], choice, strict=True):
            for o, n in zip(ops, combo, strict=True):
                if n:
                    x[o, h] = n
        used = {h for (_, h) in x}
        # a candidate in use must be leased; leases are a prefix (symmetry), so require it
        used_c = [c in used for c in cands]
        if any(b and not a for a, b in itertools.pairwise(used_c)):
            continue
        leased = sum(used_c)
        renew = frozenset(
            h.name for h in inst.hosts if h.paid_left_s < inst.horizon_s and h.name in used
        )
        sol = StepSolution(x, renew, leased)
        try:
            cost = step_cost(inst, sol)["total"]
        except BtuInputError:
            continue
        if best is None or cost < best[0] - 1e-12:
            best = (cost, sol)
    if best is None:
        raise BtuInputError("no feasible solution")
    return best


# --- bridging a policy's deployment and the step model -----------------------------------------
def instance_from_cluster(
    cluster: Cluster,
    now: float,
    *,
    demand_by_op: Mapping[str, int],
    delay_per_missing: Mapping[str, float],
    penalty: float,
    horizon_s: float,
    n_candidates: int | None = None,
) -> StepInstance:
    """The step instance for ``cluster`` at ``now`` (before the policy acts).

    ``n_candidates`` defaults to the first-fit-decreasing VM count of the whole requirement
    plus one, which is never binding in practice.
    """
    hosts = tuple(
        StepHost(
            name=h.name,
            cpu=h.vm.cpu,
            mem=h.vm.mem,
            price=h.vm.price,
            btu_s=h.vm.btu_s,
            paid_left_s=h.time_left(now),
            x0=dict(h.instances),
            images=frozenset(h.images),
        )
        for h in cluster.hosts.values()
    )
    if n_candidates is None:
        n_candidates = ffd_bins(cluster.types, demand_by_op, cluster.vm) + 1
    return StepInstance(
        types=cluster.types,
        hosts=hosts,
        vm=cluster.vm,
        n_candidates=n_candidates,
        demand=dict(demand_by_op),
        delay_per_missing=dict(delay_per_missing),
        penalty=penalty,
        horizon_s=horizon_s,
    )


def solution_from_cluster(inst: StepInstance, cluster: Cluster) -> StepSolution:
    """Read a policy's resulting deployment as a solution of ``inst``: hosts of ``inst``
    still leased are kept (renewed if their paid time ends inside the horizon), hosts
    leased by the step map onto the candidates in lease order."""
    existing = {h.name for h in inst.hosts}
    new = [h for h in cluster.hosts if h not in existing]
    if len(new) > inst.n_candidates:
        raise BtuInputError(
            f"the step leased {len(new)} VMs but the instance allows {inst.n_candidates}"
        )
    rename = dict(zip(new, inst.candidate_names(), strict=False))
    x: dict[tuple[str, str], int] = {}
    for h in cluster.hosts.values():
        for o, n in h.instances.items():
            if n > 0:
                x[o, rename.get(h.name, h.name)] = n
    renew = frozenset(
        h.name for h in inst.hosts if h.name in cluster.hosts and h.paid_left_s < inst.horizon_s
    )
    return StepSolution(x, renew, len(new))


def ffd_bins(
    types: Mapping[str, OperatorType], counts: Mapping[str, int], vm: VmType
) -> int:
    """VMs first-fit decreasing needs for ``counts`` instances (an upper bound on C).

    >>> t = {"a": OperatorType("a", 100, cpu=600, mem=500)}
    >>> ffd_bins(t, {"a": 13}, VmType("m", cpu=4096, mem=7168, price=1, btu_s=600))
    3
    """
    items = sorted(
        (o for o, n in counts.items() for _ in range(n)),
        key=lambda o: (-max(types[o].cpu / vm.cpu, types[o].mem / vm.mem), o),
    )
    bins: list[list[float]] = []
    for o in items:
        t = types[o]
        for b in bins:
            if b[0] >= t.cpu and b[1] >= t.mem:
                b[0] -= t.cpu
                b[1] -= t.mem
                break
        else:
            bins.append([vm.cpu - t.cpu, vm.mem - t.mem])
    return len(bins)
