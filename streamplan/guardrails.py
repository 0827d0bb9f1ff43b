"""Guardrails between a method's proposal and what is published (issue 11).

The Flink autoscaler's users complain most about oscillation and about scaling down an
operator that is still busy. Before a proposed per-operator parallelism is published:

- min/max parallelism clamp it;
- at most ``max_change`` subtasks are added or removed per replan;
- no change at all within ``stabilisation_s`` after the last change;
- a scale-down happens only after ``scale_down_after`` consecutive replans recommend one;
- hard goals (capacity: utilisation per subtask < 1; each query's predicted response time
  within its bound) must hold for the result, or the plan is not published. Cost is soft.

Every held-back change is returned with its reason. Between scheduled replans the state
(last change, scale-down streaks) is kept per app and interval (:func:`save_state`), so
re-planning an interval reads the same state and gives the same plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from optimizers.flink_parallelism import current_parallelism, predict
from streamplan.config import AppConfig
from streamplan.fitted import FittedModel
from streamplan.plan import Decision, Replicas
from streamplan.asof import load_as_of, save_as_of
from streamplan.settings import Settings


class Guardrails(BaseModel):
    """Guardrail settings (``method.params.guardrails``); the defaults are conservative."""

    model_config = ConfigDict(extra="forbid")
    stabilisation_s: float = Field(default=300.0, ge=0, description="no change this long after one")
    scale_down_after: int = Field(default=3, ge=1, description="consecutive down recommendations")
    max_change: int = Field(default=4, ge=1, description="subtasks added/removed per replan")
    min_parallelism: int = Field(default=1, ge=1)
    max_parallelism: int = Field(default=8, ge=1)


@dataclass
class GuardState:
    """What the guardrails remember between replans."""

    last_change_at: datetime | None = None
    down_streak: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """Parallelism to publish, why each operator changed or was held, and the new state."""

    parallelism: dict[str, int]
    reasons: dict[str, list[str]]
    state: GuardState


def apply_guardrails(
    proposed: dict[str, int],
    current: dict[str, int],
    state: GuardState,
    now: datetime,
    rules: Guardrails,
) -> Outcome:
    """Filter ``proposed`` (operator -> parallelism) against ``current`` under ``rules``."""
    if rules.min_parallelism > rules.max_parallelism:
        raise ValueError(
            f"guardrails: min_parallelism {rules.min_parallelism} > "
            f"max_parallelism {rules.max_parallelism}"
        )
    out, reasons, streak = {}, {}, dict(state.down_streak)
    since = None if state.last_change_at is None else (now - state.last_change_at).total_seconds()
    for op, want in sorted(proposed.items()):
        have, why = current.get(op, want), []
        p = min(max(want, rules.min_parallelism), rules.max_parallelism)
        if p != want:
            why.append(f"clamped {want} -> {p} by min/max parallelism "
                       f"[{rules.min_parallelism}, {rules.max_parallelism}]")
        streak[op] = streak.get(op, 0) + 1 if p < have else 0
        if p < have and streak[op] < rules.scale_down_after:
            why.append(f"scale-down {have} -> {p} held: recommended {streak[op]} of "
                       f"{rules.scale_down_after} consecutive replans")
            p = have
        if p != have and since is not None and since < rules.stabilisation_s:
            why.append(f"change {have} -> {p} held: {since:.0f} s since the last change < "
                       f"stabilisation {rules.stabilisation_s:.0f} s")
            p = have
        if abs(p - have) > rules.max_change:
            step = have + rules.max_change * (1 if p > have else -1)
            why.append(f"change {have} -> {p} limited to {step} "
                       f"(max change {rules.max_change} per replan)")
            p = step
        if p < have:
            streak[op] = 0
        out[op], reasons[op] = p, why
    changed = any(out[op] != current.get(op, out[op]) for op in out)
    return Outcome(out, reasons, GuardState(now if changed else state.last_change_at, streak))


def guard_from_params(model: FittedModel, params: dict) -> tuple[Guardrails, GuardState, datetime]:
    """Rules from ``params["guardrails"]``, state from ``params["guard_state"]``
    (``last_change_at`` ISO time or null, ``down_streak`` op -> count), and the model's
    window end as the time of the decision."""
    state = state_from_params(params.get("guard_state") or {})
    return Guardrails(**params["guardrails"]), state, datetime.fromisoformat(model.window_end)


def state_params(state: GuardState) -> dict:
    """``guard_state`` for the method's params (inverse of :func:`state_from_params`)."""
    last = state.last_change_at.isoformat() if state.last_change_at else None
    return {"last_change_at": last, "down_streak": dict(state.down_streak)}


def state_from_params(raw: dict) -> GuardState:
    """The state a ``guard_state`` dict describes (missing fields: no change, no streaks)."""
    last = raw.get("last_change_at")
    since = datetime.fromisoformat(last) if last else None
    return GuardState(since, dict(raw.get("down_streak", {})))


def guard_decision(
    decision: Decision,
    model: FittedModel,
    config: AppConfig,
    state: GuardState,
    now: datetime,
    rules: Guardrails,
) -> tuple[Decision, GuardState]:
    """A method's decision with the guardrails applied to its parallelism (replicas per
    operator on its first node), predictions redone for what remains, reasons added to the
    explanations, and the hard goals checked: capacity (λS/c < 1 per operator) and each
    query's response-time bound. A decision that breaks one gets status ``infeasible`` so
    it is never published; the previous plan stays current."""
    current = {o: c for o, c in current_parallelism(model).items() if c}
    proposed = {op: sum(r.replicas for r in reps) for op, reps in decision.placement.items()}
    outcome = apply_guardrails(proposed, current, state, now, rules)
    par = outcome.parallelism
    rt, util = predict(model, config, par)
    broken = [f"capacity: {o} utilisation {u:.2f} >= 1 at parallelism {par[o]}"
              for o, u in sorted(util.items()) if u >= 1]
    broken += [f"response time: query {q.name} predicted {rt[q.name]:.2f} ms > bound "
               f"{q.target_rt_ms} ms" for q in config.queries if rt[q.name] > q.target_rt_ms]
    explanations = {
        o: [*decision.explanations.get(o, []), *outcome.reasons.get(o, [])] for o in par
    }
    solver = decision.solver
    if broken:
        message = "hard goal broken: " + "; ".join(broken)
        solver = solver.model_copy(update={"status": "infeasible", "message": message})
    extra = {**decision.predicted.extra, **{f"utilisation.{o}": u for o, u in util.items()}}
    guarded = decision.model_copy(update={
        "placement": {o: [Replicas(node=reps[0].node, replicas=par[o])]
                      for o, reps in decision.placement.items()},
        "predicted": decision.predicted.model_copy(update={"response_time_ms": rt, "extra": extra}),
        "solver": solver,
        "explanations": {o: e for o, e in explanations.items() if e},
    })
    return guarded, outcome.state


def next_state(model: FittedModel, config: AppConfig, params: dict, published: bool
               ) -> GuardState:
    """The state after a replan with ``params`` (rules and ``guard_state``): the streaks
    count the method's own recommendation; the last change moves only if the plan was
    published (a plan that was not changed nothing)."""
    from optimizers.flink_parallelism import propose_parallelism

    rules, state, now = guard_from_params(model, params)
    new = guard_decision(propose_parallelism(model, config), model, config, state, now, rules)[1]
    return new if published else GuardState(state.last_change_at, new.down_streak)


def state_dir(settings: Settings, app: str) -> Path:
    """Where an app's guardrail states are kept, one file per replanned interval end."""
    return settings.home / "guardrails" / app


def save_state(settings: Settings, app: str, at: datetime, state: GuardState) -> Path:
    """Keep ``state`` as the state after the replan of the interval ending at ``at``."""
    return save_as_of(state_dir(settings, app), at, state_params(state))


def state_at(settings: Settings, app: str, at: datetime) -> GuardState:
    """The state kept for the latest interval ending at or before ``at`` (empty if none)."""
    found = load_as_of(state_dir(settings, app), at)
    return GuardState() if found is None else state_from_params(found[1])
