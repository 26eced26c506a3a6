"""The discovery study's pictures: the best score so far against executions beside the
baselines (mean over seeds, a band of ± 1 s.e.) with the probe's shares per update, and one
run's own probe plot."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from _common import mean_se


def _band(curves: list[list[float | None]]) -> tuple[list[float], list[float]]:
    n = max((len(c) for c in curves), default=0)
    means, ses = [], []
    for i in range(n):
        xs = [c[i] for c in curves if i < len(c) and c[i] is not None]
        stats = mean_se(xs)
        means.append(math.nan if stats["mean"] is None else stats["mean"])
        ses.append(stats["se"] or 0.0)
    return means, ses


def plot(result: dict[str, Any], out: Path, keys: tuple[str, ...]) -> Path:
    """``NAME.png``: one panel of best-so-far curves, one per probe key (``keys``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    task = result["task"]
    arms = result["arms"]
    fig, axes = plt.subplots(1, 1 + len(keys), figsize=(5 + 4 * len(keys), 4), squeeze=False)
    ax = axes[0][0]
    curves = {a: [s["curve"] for s in by_seed.values() if s] for a, by_seed in arms.items()}
    curves.update(
        {
            b: [s["curve"] for s in by_seed.values() if s]
            for b, by_seed in result["baselines"].items()
        }
    )
    for i, (name, cs) in enumerate(curves.items()):
        if not cs:
            continue
        m, s = _band(cs)
        xs = range(1, len(m) + 1)
        ax.plot(xs, m, color=f"C{i}", label=f"{name} ({len(cs)} seeds)", drawstyle="steps-post")
        ax.fill_between(
            xs,
            [a - b for a, b in zip(m, s, strict=False)],
            [a + b for a, b in zip(m, s, strict=False)],
            color=f"C{i}",
            alpha=0.15,
            step="post",
        )
    ax.set_xlabel("program executions")
    ax.set_title(f"{task}: private score of the best public so far", fontsize=9)
    ax.legend(fontsize=7)
    for ax, key in zip(axes[0][1:], keys, strict=True):
        for i, (name, by_seed) in enumerate(arms.items()):
            per_step: dict[int, list[float]] = {}
            for s in by_seed.values():
                for step, shares in (s or {}).get("probe", {}).get("series", {}).items():
                    per_step.setdefault(int(step), []).append(shares[key])
            if per_step:
                steps = sorted(per_step)
                ax.plot(
                    steps,
                    [sum(per_step[t]) / len(per_step[t]) for t in steps],
                    "-o",
                    ms=3,
                    color=f"C{i}",
                    label=name,
                )
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"probe: {key[:48]}", fontsize=8)
        ax.set_xlabel("update (0: initial policy)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def probe_plot(run_dir: Path, out: Path) -> Path | None:
    """The run's decision probe (``plots/decision_probe.png`` of ``mlerl train``) at ``out``."""
    import shutil
    import tempfile

    from mlerl.cli import plot_decision_probe

    with tempfile.TemporaryDirectory() as tmp:
        made = plot_decision_probe(run_dir / "metrics.jsonl", Path(tmp))
        return None if made is None else Path(shutil.move(made, out))  # across filesystems


def pooled_plot(result: dict[str, Any], out: Path) -> Path:
    """``NAME.png`` of ``discovery_pool.py``: per task, each held-out seed's difference between
    the arm and each baseline (positive = the arm better), with their mean ± 2 s.e."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(result["paired"])
    fig, axes = plt.subplots(1, len(tasks), figsize=(6 * len(tasks), 4), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        rows = [r for r in result["rows"] if r["task"] == task]
        sign = 1 if rows[0]["direction"] == "lower" else -1
        for i, (b, d) in enumerate(result["paired"][task].items()):
            pts = [
                (r["seed"] + 0.15 * (i - 1), sign * (r[f"{b}_private"] - r["rl_private"]))
                for r in rows
                if r.get(f"{b}_private") is not None and r.get("rl_private") is not None
            ]
            if not pts or d["mean"] is None:
                continue
            mean, se = d["mean"], d["se"] or 0.0
            label = f"{result['arm']} - {b}: {mean:+.4f} ± {se:.4f} ({d['n']} seeds)"
            ax.plot(*zip(*pts, strict=True), "o", ms=4, color=f"C{i}", label=label)
            lo, hi = min(p[0] for p in pts), max(p[0] for p in pts)
            ax.hlines(mean, lo, hi, color=f"C{i}", lw=1)
            ax.fill_between([lo, hi], mean - 2 * se, mean + 2 * se, color=f"C{i}", alpha=0.12)
        ax.axhline(0, color="k", lw=0.6)
        ax.set_xlabel("held-out seed")
        ax.set_ylabel(f"{result['arm']} ahead by (private)")
        ax.set_title(f"{task}, {result['executions']} executions: mean ± 2 s.e.", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out
