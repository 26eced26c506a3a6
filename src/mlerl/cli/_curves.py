"""Learning curves of a run from ``RUN_DIR/metrics.jsonl``: the per-update split diagnostics
(``split/...``, see ``mlerl.learner._diagnostics``) against the update, raw points and a
trailing rolling mean, into ``RUN_DIR/plots/learning_curves.png``.

``read_learner_metrics`` and ``rolling_mean`` are pure and tested; the plot is one figure of
small panels, one line per group (all / scratch / improve, or per task).
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

# (panel title, metric suffix, group prefixes: "kind" -> all + scratch + improve, "task" -> per
# task)
PANELS: tuple[tuple[str, str, str], ...] = (
    ("valid fraction", "valid_frac", "kind"),
    ("mean reward", "reward_mean", "kind"),
    ("mean score of valid samples", "score_mean", "task"),
    ("not_run fraction", "status/not_run", "kind"),
    ("program_error fraction", "status/program_error", "kind"),
    ("mean execution time (s)", "exec_s_mean", "kind"),
    ("response tokens", "tokens_mean", "kind"),
    ("entropy (nats/token)", "entropy", "kind"),
    ("KL to reference (k3/token)", "kl", "kind"),
    ("value error V - G", "value_err", "kind"),
    ("advantage mean", "adv_mean", "kind"),
    ("advantage std", "adv_std", "kind"),
    ("share of pg from group", "pg_share", "kind"),
)
GLOBAL_PANELS: tuple[tuple[str, str], ...] = (
    ("share of pg from failed samples", "split/all/pg_share_failed"),
    ("policy grad norm (pre-clip)", "grad_norm/policy"),
)


def read_learner_metrics(path: Path, stream: str = "learner") -> list[dict[str, float]]:
    """One stream's rows of a metrics.jsonl (the learner's by default), in step order (later
    duplicates win)."""
    rows: dict[int, dict[str, float]] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line of a killed run
            if row.get("stream", "learner") == stream and "step" in row:
                rows[int(row["step"])] = row
    return [rows[k] for k in sorted(rows)]


def rolling_mean(xs: list[float], window: int) -> list[float]:
    """Trailing mean over the last ``window`` finite values (NaN entries are skipped; a point with
    no finite value in its window is NaN)."""
    out = []
    for i in range(len(xs)):
        vals = [x for x in xs[max(0, i - window + 1) : i + 1] if x is not None and math.isfinite(x)]
        out.append(sum(vals) / len(vals) if vals else math.nan)
    return out


def series(rows: list[dict[str, float]], key: str) -> tuple[list[int], list[float]]:
    steps = [int(r["step"]) for r in rows]
    return steps, [float(r.get(key, math.nan)) for r in rows]


def _groups(rows: list[dict[str, float]], kind: str) -> list[str]:
    if kind == "kind":
        return ["all", "kind/scratch", "kind/improve"]
    tasks = sorted({k.split("/")[2] for r in rows for k in r if k.startswith("split/task/")})
    return [f"task/{t}" for t in tasks]


_FONT_CACHE_NOTICE = "Matplotlib is building the font cache"


class _DropFontCacheNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(_FONT_CACHE_NOTICE)


def load_pyplot() -> Any:
    """``matplotlib.pyplot`` with the Agg backend, loaded without a line on the console.

    Matplotlib builds a font cache the first time it is imported on a machine (in
    ``MPLCONFIGDIR``, else ``~/.cache/matplotlib``; kept for later runs). When that takes more
    than 5 s, which it can on a loaded 2-core machine, it logs "Matplotlib is building the font
    cache" to the console of `mlerl train`. That one record is dropped while pyplot loads (the
    build is the same); every other matplotlib record still passes."""
    quiet = _DropFontCacheNotice()
    logger = logging.getLogger("matplotlib.font_manager")
    logger.addFilter(quiet)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # imports font_manager, which loads or builds the cache
    finally:
        logger.removeFilter(quiet)
    return plt


def plot_learning_curves(metrics_path: Path, out_dir: Path, window: int = 5) -> Path | None:
    """Write ``out_dir/learning_curves.png``; None when the run logged no split metrics."""
    rows = read_learner_metrics(metrics_path)
    if not rows or not any(k.startswith("split/") for r in rows for k in r):
        return None
    plt = load_pyplot()
    n = len(PANELS) + len(GLOBAL_PANELS)
    cols = 4
    fig, axes = plt.subplots(
        (n + cols - 1) // cols,
        cols,
        figsize=(4.2 * cols, 3.0 * ((n + cols - 1) // cols)),
        squeeze=False,
    )
    flat = list(axes.flat)
    for ax, (title, metric, kind) in zip(flat, PANELS, strict=False):  # more axes than panels
        for i, group in enumerate(_groups(rows, kind)):
            steps, ys = series(rows, f"split/{group}/{metric}")
            if all(math.isnan(y) for y in ys):
                continue
            color = f"C{i}"
            ax.plot(steps, ys, ".", color=color, alpha=0.35)
            ax.plot(steps, rolling_mean(ys, window), "-", color=color, label=group.split("/")[-1])
        ax.set_title(title, fontsize=9)
        if ax.lines:
            ax.legend(fontsize=6)
        else:  # e.g. the value error of a run without a critic
            ax.text(
                0.5,
                0.5,
                "not recorded in this run",
                ha="center",
                va="center",
                transform=ax.transAxes,
                fontsize=8,
                color="0.5",
            )
    for ax, (title, key) in zip(flat[len(PANELS) :], GLOBAL_PANELS, strict=False):
        steps, ys = series(rows, key)
        ax.plot(steps, ys, ".", color="C0", alpha=0.35)
        ax.plot(steps, rolling_mean(ys, window), "-", color="C0")
        ax.set_title(title, fontsize=9)
    for ax in flat[n:]:
        ax.axis("off")
    for ax in flat[:n]:
        ax.set_xlabel("update", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.suptitle(
        f"{metrics_path.parent.name}: per-update diagnostics (points) and rolling mean over "
        f"{window}",
        fontsize=10,
    )
    return _save(plt, fig, out_dir / "learning_curves.png")


def _save(plt, fig, path: Path) -> Path:
    """Lay ``fig`` out, write it to ``path`` (its directory made) and close it."""
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def probe_series(rows: list[dict[str, float]]) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """The ``probe`` stream's ``<task>/<key>`` shares as task -> key -> [(step, share)]; a key a
    probe did not report (no answer made that decision) counts 0 at that step."""
    keys = sorted({k for r in rows for k in r if "/" in k and k.split("/", 1)[0] != "time"})
    out: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for full in keys:
        task, key = full.split("/", 1)
        out.setdefault(task, {})[key] = [
            (int(r["step"]), float(r.get(full, 0.0))) for r in rows if f"{task}/parsed" in r
        ]
    return out


def plot_decision_probe(metrics_path: Path, out_dir: Path, top: int = 10) -> Path | None:
    """Write ``out_dir/decision_probe.png``: per task, the shares of the ``top`` decisions that
    reached the largest share at any probe, and the share of answers that parsed; None when the
    run was not probed."""
    by_task = probe_series(read_learner_metrics(metrics_path, stream="probe"))
    if not by_task:
        return None
    plt = load_pyplot()
    fig, axes = plt.subplots(len(by_task), 1, figsize=(9, 3.6 * len(by_task)), squeeze=False)
    for ax, (task, keys) in zip(axes[:, 0], sorted(by_task.items()), strict=True):
        ranked = sorted(
            (k for k in keys if k != "parsed"), key=lambda k: -max(s for _, s in keys[k])
        )
        for i, key in enumerate(ranked[:top]):
            steps, shares = zip(*keys[key], strict=True)
            ax.plot(steps, shares, "-o", ms=3, color=f"C{i % 10}", label=key[:60])
        if "parsed" in keys:
            steps, shares = zip(*keys["parsed"], strict=True)
            ax.plot(steps, shares, "--", color="black", label="parsed")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"{task}: share of sampled scratch answers making each decision", fontsize=9)
        ax.set_xlabel("update (0: the initial policy)", fontsize=8)
        ax.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return _save(plt, fig, out_dir / "decision_probe.png")
