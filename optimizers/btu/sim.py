"""A fast, exact-per-item simulation of the topology under a changing instance pool.

Why not ``streamplan.simulation``: that simulator starts every interval empty and takes a
fixed placement per interval, while seed 002's policies act every 60 s on queues that carry
over (a backlog *is* the scale-up signal) and on instances that start 5–10 s after the
decision. A replay of the paper's 120-minute runs has about 1.6 M item-hops and 120
decisions per run, so this module simulates items directly instead:

* every operator type is one FCFS queue served by its instances (a shared input queue, as
  with the paper's message broker): an M/M/c station whose c changes at the instants the
  policy decides, with exponential service of mean ``b_o`` plus a fixed hop delay
  (digest §8.1: unloaded mean processing time = o_slo);
* time advances in monitoring chunks (15 s). Within a chunk, items are dispatched in
  arrival order to the server that frees first (a heap of server free times), which is
  exact for FCFS with identical servers; an item whose start would fall after the chunk
  stays queued, so server changes at the chunk boundary apply to it;
* a new instance is a server that is busy until its ready time; a stopped instance is the
  server that frees first (it finishes its item and goes);
* outputs follow Table 2's ratios: one output per ``emit_every`` processed items, sent to
  every successor ``hop`` after the item finishes.

Each item's processing time (wait + service + hop) is compared with k·o_slo for the three
SLA levels as it starts (its finish is known then).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from .cost import LEVELS, SlaCounts
from .inputs import BtuInputError

__all__ = ["ChunkStats", "SimOperator", "SimSource", "StreamSim"]


@dataclass(frozen=True)
class SimOperator:
    """One operator type as the simulator sees it (times in seconds)."""

    name: str
    service_mean_s: float
    hop_s: float
    slo_s: float
    emit_every: int = 1
    successors: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.service_mean_s > 0:
            raise BtuInputError(
                f"operators[{self.name}].service_mean_s must be > 0, got {self.service_mean_s}"
            )
        if self.hop_s < 0:
            raise BtuInputError(f"operators[{self.name}].hop_s must be >= 0, got {self.hop_s}")
        if self.emit_every < 1:
            raise BtuInputError(
                f"operators[{self.name}].emit_every must be >= 1, got {self.emit_every}"
            )


@dataclass(frozen=True)
class SimSource:
    """A data source: Poisson items at ``rate_per_unit`` × load units (machines) per second."""

    name: str
    target: str
    rate_per_unit: float


@dataclass
class ChunkStats:
    """One operator over one monitoring chunk."""

    arrivals: int
    started: int
    sojourn_ms_sum: float
    service_ms_sum: float
    queue: int
    servers: int
    oldest_wait_s: float
    queue_mean: float = 0.0
    emitted: int = 0

    def mean_sojourn_ms(self, nominal_ms: float) -> float:
        """o_d: mean processing time of items started in the chunk; with none started, the
        nominal time plus the head-of-line wait (so a stalled queue reads as late)."""
        if self.started:
            return self.sojourn_ms_sum / self.started
        return nominal_ms + 1000.0 * self.oldest_wait_s


@dataclass
class _OpState:
    servers: list[float] = field(default_factory=list)
    queue: np.ndarray = field(default_factory=lambda: np.empty(0))
    future: list[np.ndarray] = field(default_factory=list)
    processed: int = 0
    removals: list[float] = field(default_factory=list)


class StreamSim:
    """Items through the operator DAG with a time-varying number of servers per operator."""

    def __init__(
        self,
        operators: Sequence[SimOperator],
        sources: Sequence[SimSource],
        *,
        seed: int = 0,
    ) -> None:
        self.ops = {o.name: o for o in operators}
        self.order = _topological(operators)
        for s in sources:
            if s.target not in self.ops:
                raise BtuInputError(f"sources[{s.name}].target: unknown operator {s.target!r}")
        self.sources = list(sources)
        self.state = {o: _OpState() for o in self.ops}
        self.rng = np.random.default_rng(seed)
        self.sla = SlaCounts()
        self.now = 0.0

    # --- control ------------------------------------------------------------------------
    def add_server(self, op: str, ready_at: float) -> None:
        """A new instance of ``op`` that serves from ``ready_at``."""
        heapq.heappush(self.state[op].servers, float(ready_at))

    def remove_server(self, op: str, at: float | None = None) -> None:
        """Stop one instance of ``op`` now (or at ``at``, applied at the next chunk start)."""
        st = self.state[op]
        if at is not None and at > self.now:
            st.removals.append(float(at))
            return
        if not st.servers:
            raise BtuInputError(f"operator {op!r} has no instance to stop")
        heapq.heappop(st.servers)

    def servers(self, op: str) -> int:
        """Instances of ``op`` (serving or starting)."""
        return len(self.state[op].servers) - len(self.state[op].removals)

    # --- one chunk ----------------------------------------------------------------------
    def run(self, t1: float, load: float) -> dict[str, ChunkStats]:
        """Advance from ``self.now`` to ``t1`` with ``load`` units (machines) emitting."""
        t0 = self.now
        if t1 <= t0:
            raise BtuInputError(f"chunk end {t1} must be after {t0}")
        for st in self.state.values():
            due = [r for r in st.removals if r <= t0 + 1e-9]
            st.removals = [r for r in st.removals if r > t0 + 1e-9]
            for _ in due:
                if len(st.servers) > 1:
                    heapq.heappop(st.servers)
        for s in self.sources:
            n = self.rng.poisson(s.rate_per_unit * load * (t1 - t0))
            self.state[s.target].future.append(np.sort(self.rng.uniform(t0, t1, n)))
        return {name: self._run_op(self.ops[name], t0, t1) for name in self.order}

    def _run_op(self, op: SimOperator, t0: float, t1: float) -> ChunkStats:
        st = self.state[op.name]
        fresh = np.concatenate(st.future) if st.future else np.empty(0)
        now_part = fresh[fresh < t1]
        st.future = [fresh[fresh >= t1]] if (fresh >= t1).any() else []
        arr = np.concatenate([st.queue, np.sort(now_part)])
        n = arr.size
        svc = self.rng.exponential(op.service_mean_s, n) if n else np.empty(0)
        heap = st.servers
        finish = np.empty(n)
        k = 0
        if heap:
            arr_list = arr.tolist()
            svc_list = svc.tolist()
            replace = heapq.heapreplace
            for k in range(n):  # noqa: B007 - k is used after the loop
                a = arr_list[k]
                f = heap[0]
                start = a if a > f else f
                if start >= t1:
                    break
                fin = start + svc_list[k]
                replace(heap, fin)
                finish[k] = fin
            else:
                k = n
        started = k
        st.queue = arr[started:]
        fin = finish[:started]
        sojourn_s = fin - arr[:started] + op.hop_s
        delayed = {lv: int(np.count_nonzero(sojourn_s > m * op.slo_s)) for lv, m in LEVELS.items()}
        self.sla.add(op.name, started, delayed)
        n_out = 0
        if op.successors and started:
            idx = np.arange(st.processed + 1, st.processed + started + 1)
            emitted = np.sort(fin[idx % op.emit_every == 0] + op.hop_s)
            for succ in op.successors:
                self.state[succ].future.append(emitted)
            n_out = int(emitted.size) * len(op.successors)
        st.processed += started
        self.now = t1
        # time-average of items waiting over the chunk: each item waits from max(a, t0)
        # until its start (or the chunk end when still queued)
        starts = fin - svc[:started] if started else np.empty(0)
        waited = np.clip(starts, t0, t1) - np.clip(arr[:started], t0, t1)
        still = t1 - np.clip(st.queue, t0, t1)
        queue_mean = max(0.0, float((waited.sum() + still.sum()) / (t1 - t0)))
        return ChunkStats(
            arrivals=int(now_part.size),
            started=started,
            sojourn_ms_sum=float(sojourn_s.sum() * 1000.0),
            service_ms_sum=float(svc[:started].sum() * 1000.0),
            queue=int(st.queue.size),
            servers=len(heap),
            oldest_wait_s=float(t1 - st.queue[0]) if st.queue.size else 0.0,
            queue_mean=queue_mean,
            emitted=n_out,
        )

    def backlog(self) -> dict[str, int]:
        """Items still queued per operator."""
        return {o: int(st.queue.size) for o, st in self.state.items()}

    def finish(self) -> SlaCounts:
        """Close the run: items still queued count as delayed at every level."""
        for o, st in self.state.items():
            left = int(st.queue.size)
            if left:
                self.sla.add(o, left, dict.fromkeys(LEVELS, left))
                st.queue = np.empty(0)
        return self.sla


def _topological(operators: Sequence[SimOperator]) -> list[str]:
    names = {o.name for o in operators}
    indeg = dict.fromkeys(names, 0)
    for o in operators:
        for s in o.successors:
            if s not in names:
                raise BtuInputError(f"operators[{o.name}].successors: unknown operator {s!r}")
            indeg[s] += 1
    succ: Mapping[str, tuple[str, ...]] = {o.name: o.successors for o in operators}
    ready = sorted(n for n, d in indeg.items() if d == 0)
    out = []
    while ready:
        n = ready.pop(0)
        out.append(n)
        for s in succ[n]:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
        ready.sort()
    if len(out) != len(names):
        raise BtuInputError("operators: the topology has a cycle")
    return out
