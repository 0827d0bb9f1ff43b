"""Plots a person would rather look at than read."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def predicted_vs_measured(
    predicted_ms: dict[str, float],
    measured_ms: dict[str, float],
    targets_ms: dict[str, float],
    title: str,
    path: Path,
    labels: tuple[str, str] = ("predicted", "measured"),
) -> Path:
    """Bar chart per query: predicted vs measured mean response time (or any two series,
    e.g. two plans' predictions, named by ``labels``), with the target as a dashed line."""
    queries = sorted(set(predicted_ms) | set(measured_ms))
    x = range(len(queries))
    fig, ax = plt.subplots(figsize=(max(4, 1.6 * len(queries)), 3.5))
    ax.bar([i - 0.2 for i in x], [predicted_ms.get(q, 0) for q in queries], 0.4, label=labels[0])
    ax.bar([i + 0.2 for i in x], [measured_ms.get(q, 0) for q in queries], 0.4, label=labels[1])
    for i, q in enumerate(queries):
        if q in targets_ms:
            ax.hlines(targets_ms[q], i - 0.4, i + 0.4, colors="k", linestyles="dashed")
    ax.set_xticks(list(x), queries)
    ax.set_ylabel("mean response time (ms)")
    ax.set_title(title)
    ax.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
