"""Prediction fidelity (issue 10): each response-time model against two simulators.

For every scenario class (``optimizers/prediction/catalogue.py``) and utilisation ρ of the
busiest node, each model's predicted mean response time per query is compared with the mean
measured by the project's simulator (``streamplan/simulation``) and by an independent ``ciw``
simulation of the same scenario, both over several seeds with 95 % confidence intervals.

Run: ``.venv/bin/python -m pytest -m bench benchmarks/test_fidelity.py``. Size:
``FIDELITY_SEEDS`` (replications per simulator, default 3), ``FIDELITY_CIW_EVENTS`` (input
events per ciw run at ρ = 0.5, default 8000; scaled by min(4, 0.5/(1−ρ)) since the relative
CI of a mean wait grows like 1/(1−ρ)), ``FIDELITY_SIM_EVENTS`` (per project-simulator run,
default 100000), ``FIDELITY_RHOS`` (comma-separated, default the issue's seven). The
defaults take about 10 min of one core.
Results: ``benchmarks/results/fidelity.json`` and ``fidelity.png``; an MLflow run in the
experiment ``fidelity`` of the tracking store of ``streamplan.settings``.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import mlflow  # noqa: E402
import pytest  # noqa: E402

from benchmarks.conftest import RESULTS_DIR  # noqa: E402
from optimizers.prediction import MODELS  # noqa: E402
from optimizers.prediction.catalogue import scenario_classes  # noqa: E402
from optimizers.prediction.measure import measure  # noqa: E402
from streamplan.settings import load_settings  # noqa: E402

pytestmark = pytest.mark.bench

DEFAULT_RHOS = "0.1,0.3,0.5,0.7,0.8,0.9,0.95"
RHOS = [float(r) for r in os.environ.get("FIDELITY_RHOS", DEFAULT_RHOS).split(",")]
SEEDS = list(range(1, int(os.environ.get("FIDELITY_SEEDS", "3")) + 1))
CIW_EVENTS = int(os.environ.get("FIDELITY_CIW_EVENTS", "8000"))
SIM_EVENTS = int(os.environ.get("FIDELITY_SIM_EVENTS", "100000"))
TARGET_MAPE = 0.10  # issue 10: best model within 10 % of ciw up to ρ = 0.9
TARGET_RHO = 0.9


def ciw_events(rho: float) -> int:
    """ciw events per run: ``FIDELITY_CIW_EVENTS`` at ρ = 0.5, more in heavy traffic."""
    return round(CIW_EVENTS * min(4.0, 0.5 / (1.0 - rho)))


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def cell_rows() -> list[dict[str, Any]]:
    """One row per (class, scenario, ρ, query)."""
    rows = []
    for cls, scenarios in scenario_classes().items():
        for base in scenarios:
            for rho in RHOS:
                s = base.at_utilisation(rho)
                t0 = time.perf_counter()
                sim = measure(s, "project", SIM_EVENTS, SEEDS)
                t1 = time.perf_counter()
                ref = measure(s, "ciw", ciw_events(rho), SEEDS)
                t2 = time.perf_counter()
                preds = {name: m.predict(s) for name, m in MODELS.items()}
                for q in s.queries:
                    gap = abs(sim.mean_ms[q.name] - ref.mean_ms[q.name])
                    row: dict[str, Any] = {
                        "class": cls, "scenario": s.name, "rho": rho, "query": q.name,
                        "rate_per_s": q.rate,
                        "project_ms": sim.mean_ms[q.name], "project_ci_ms": sim.ci_ms[q.name],
                        "ciw_ms": ref.mean_ms[q.name], "ciw_ci_ms": ref.ci_ms[q.name],
                        "simulators_agree": gap <= sim.ci_ms[q.name] + ref.ci_ms[q.name],
                        "project_events": sim.events[q.name], "ciw_events": ref.events[q.name],
                        "project_time_s": t1 - t0, "ciw_time_s": t2 - t1,
                    }
                    for name, p in preds.items():
                        pred = p.rt_ms[q.name]
                        row[f"{name}_ms"] = _finite(pred)
                        row[f"{name}_unstable"] = p.unstable.get(q.name)
                        for sim_name in ("ciw", "project"):
                            err = (pred - row[f"{sim_name}_ms"]) / row[f"{sim_name}_ms"]
                            row[f"{name}_err_vs_{sim_name}"] = _finite(err)
                    rows.append(row)
    return rows


def mape(rows: list[dict[str, Any]], model: str, ref: str) -> float | None:
    """Mean absolute percentage error (fraction); None when a prediction is unstable."""
    errs = [r[f"{model}_err_vs_{ref}"] for r in rows]
    if not errs or any(e is None for e in errs):
        return None
    return statistics.fmean(abs(e) for e in errs)


def finite_mape(rows: list[dict[str, Any]], model: str, ref: str) -> float | None:
    """MAPE over the cells the model predicts as stable (None if there is none)."""
    return mape([r for r in rows if r[f"{model}_err_vs_{ref}"] is not None], model, ref)


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """MAPE per class and model (all ρ and ρ ≤ 0.9), vs ciw and vs the project simulator."""
    out: dict[str, Any] = {}
    for cls in dict.fromkeys(r["class"] for r in rows):
        mine = [r for r in rows if r["class"] == cls]
        upto = [r for r in mine if r["rho"] <= TARGET_RHO + 1e-9]
        entry: dict[str, Any] = {
            "cells": len(mine),
            "simulators_agree": sum(r["simulators_agree"] for r in mine),
        }
        for model in MODELS:
            for ref in ("ciw", "project"):
                entry[f"{model}_mape_vs_{ref}"] = mape(mine, model, ref)
                entry[f"{model}_mape_vs_{ref}_rho_le_0.9"] = mape(upto, model, ref)
            entry[f"{model}_mape_vs_ciw_stable_cells"] = finite_mape(mine, model, "ciw")
            entry[f"{model}_unstable_cells"] = sum(r[f"{model}_ms"] is None for r in mine)
        best = entry["qna_decomposition_mape_vs_ciw_rho_le_0.9"]
        entry["target_met_best_model"] = best is not None and best <= TARGET_MAPE
        out[cls] = entry
    return out


def scenario_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per scenario: each model's MAPE vs ciw up to ρ = 0.9 (stable cells for the seed's)."""
    out = []
    for name in dict.fromkeys(r["scenario"] for r in rows):
        mine = [r for r in rows if r["scenario"] == name and r["rho"] <= TARGET_RHO + 1e-9]
        entry: dict[str, Any] = {"scenario": name, "class": mine[0]["class"]}
        for model in MODELS:
            entry[f"{model}_mape_vs_ciw"] = finite_mape(mine, model, "ciw")
            entry[f"{model}_unstable_cells"] = sum(r[f"{model}_ms"] is None for r in mine)
        out.append(entry)
    return out


def plot(rows: list[dict[str, Any]], path: os.PathLike) -> None:
    """Per class: signed error of each model against ciw vs ρ, clipped to ±100 % (an
    unstable prediction is drawn at +100 %), over the band of ciw's 95 % CI."""
    classes = list(dict.fromkeys(r["class"] for r in rows))
    fig, axes = plt.subplots(1, len(classes), figsize=(4 * len(classes), 3.6), sharey=True)
    styles = {"mg1_single_server": ("tab:red", "--"), "qna_decomposition": ("tab:blue", "-")}
    for ax, cls in zip(axes, classes):
        mine = [r for r in rows if r["class"] == cls]
        for key in dict.fromkeys((r["scenario"], r["query"]) for r in mine):
            cell = [r for r in mine if (r["scenario"], r["query"]) == key]
            rhos = [r["rho"] for r in cell]
            band = [min(100.0, 100 * r["ciw_ci_ms"] / r["ciw_ms"]) for r in cell]
            ax.fill_between(rhos, [-b for b in band], band, color="0.85", lw=0)
            for model, (color, ls) in styles.items():
                err = [r[f"{model}_err_vs_ciw"] for r in cell]
                ys = [100.0 if e is None else max(-100.0, min(100.0, 100 * e)) for e in err]
                ax.plot(rhos, ys, color=color, ls=ls, marker=".", lw=1)
        ax.axhline(10, color="k", lw=0.5, ls=":")
        ax.axhline(-10, color="k", lw=0.5, ls=":")
        ax.set_ylim(-105, 105)
        ax.set_title(cls)
        ax.set_xlabel("ρ (busiest node)")
    axes[0].set_ylabel("prediction error vs ciw (%)")
    axes[0].plot([], [], color="tab:red", ls="--", label="seed 000 M/G/1 (unstable: +100)")
    axes[0].plot([], [], color="tab:blue", label="QNA decomposition")
    axes[0].fill_between([], [], [], color="0.85", label="ciw 95 % CI")
    axes[0].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def log_mlflow(payload: dict[str, Any], files: list[os.PathLike]) -> str:
    """One MLflow run with the size parameters, MAPE per class and model, and the files."""
    mlflow.set_tracking_uri(load_settings().tracking_uri)
    mlflow.set_experiment("fidelity")
    with mlflow.start_run(run_name="fidelity-benchmark") as run:
        mlflow.log_params(payload["run"])
        for cls, entry in payload["summary"].items():
            for key, value in entry.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    mlflow.log_metric(f"{cls}.{key}".replace("<=", "le"), float(value))
        for f in files:
            mlflow.log_artifact(str(f))
        return run.info.run_id


@pytest.mark.timeout(3600)  # ~10 min of one core; more on a shared machine
def test_fidelity(write_result) -> None:
    t0 = time.perf_counter()
    rows = cell_rows()
    payload: dict[str, Any] = {
        "run": {"rhos": RHOS, "seeds": len(SEEDS),
                "ciw_events_per_run": {str(r): ciw_events(r) for r in RHOS},
                "project_events_per_run": SIM_EVENTS},
        "models": list(MODELS),
        "target": f"MAPE <= {TARGET_MAPE:.0%} vs ciw for every class up to rho = {TARGET_RHO} "
                  "with the best model (issue 10)",
        "paper": "seed 000 gives no values (Fig. 3 only: W tracks RT up to ~250 events/s, then "
                 "underestimates); its single-server model is reported here as mg1_single_server",
        "notes": [
            "rho = load of the busiest node; error = (predicted - measured) / measured",
            "CI = 95 % Student-t half-width over the per-seed means (seeds = replications)",
            "mg1_single_server puts a whole query on one server (seed 000), so a query spread "
            "over several nodes can look unstable to it (null prediction, counted as unstable)",
            "windowing is drawn as Bernoulli(1/32) window firing (the project simulator's "
            "selectivity law), not a deterministic count every 32 events",
            "not run: forks of one event across nodes (the ciw builder supports job chains); "
            "closing-the-loop correction and deviation detection of issue 10",
        ],
        "summary": summary(rows),
        "scenarios_rho_le_0.9": scenario_table(rows),
        "cells": rows,
        "elapsed_s": None,
    }
    payload["elapsed_s"] = time.perf_counter() - t0
    plot(rows, RESULTS_DIR / "fidelity.png")
    path = write_result("fidelity", payload)
    payload["mlflow_run_id"] = log_mlflow(payload, [path, RESULTS_DIR / "fidelity.png"])
    write_result("fidelity", payload)
    agree = sum(r["simulators_agree"] for r in rows)
    assert agree >= 0.8 * len(rows), f"simulators agree in only {agree}/{len(rows)} cells"
