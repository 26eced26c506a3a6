"""``compare``: run metrics -> best-of-K / mean@K tables beside the paper, and plots.

Input: one or more metrics JSONL files, one record per graded sample (docs/bench.md):
``{"method": str, "seed": int, "step": int, "task_id": str, "score": float | null,
"valid": bool, "duration_s": float, "t": float}``; ``method`` defaults to the file's stem and
``seed`` to 0. Protocol (the paper's): per (method, task, seed) take the first K samples in
time order; best@K is the best valid score, mean@K the mean of valid scores; across seeds
report mean +- standard error. A medal flag is computed for the best@K score of each seed
from the task's thresholds (when the task is known to the registry).

Public and private leaderboards: ``score`` is the public score (what the reward read); an
optional ``private_score`` is the private one. The best of K is chosen on the public score and
reported on the private one (``best``), with its public score (``best_public``) and the gap
(private - public) beside it; ``mean`` is the mean private score. Records without
``private_score`` report their public score.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mlerl.bench._medals import rank_score
from mlerl.bench._paper import SOURCE, TABLE1, TABLE2
from mlerl.bench._task import Registry, TaskError

FIELDS = ("step", "task_id", "score", "valid", "duration_s", "t")


def read_metrics(paths: list[Path]) -> pd.DataFrame:
    """All records of all files; a malformed line raises ``ValueError`` naming file and line."""
    rows = []
    for path in paths:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                row = {k: rec[k] for k in FIELDS}
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ValueError(
                    f"{path}:{n}: bad metrics record ({exc}); fields {FIELDS}"
                ) from None
            row["method"] = str(rec.get("method") or path.stem)
            row["seed"] = int(rec.get("seed", 0))
            row["private_score"] = rec.get("private_score")
            rows.append(row)
    frame = pd.DataFrame(rows, columns=[*FIELDS, "method", "seed", "private_score"])
    frame["score"] = pd.to_numeric(frame["score"], errors="coerce")
    frame["valid"] = frame["valid"].astype(bool) & frame["score"].notna()
    private = pd.to_numeric(frame["private_score"], errors="coerce")
    frame["private_score"] = private.where(private.notna(), frame["score"])
    return frame


def best_reported(public: pd.Series, private: pd.Series, lower: bool) -> pd.Series:
    """After each row, the private score of the best public score so far (NaN before any)."""
    out, best, shown = [], math.nan, math.nan
    for p, q in zip(public.to_numpy(dtype=float), private.to_numpy(dtype=float), strict=True):
        if not math.isnan(p) and (math.isnan(best) or (p < best if lower else p > best)):
            best, shown = p, q
        out.append(shown)
    return pd.Series(out, index=public.index)


def mean_se(values: list[float]) -> tuple[float, float]:
    """Mean and standard error (sample std / sqrt(n)); se is NaN for fewer than 2 values."""
    v = np.asarray([x for x in values if not math.isnan(x)], dtype=float)
    if len(v) == 0:
        return math.nan, math.nan
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else math.nan


def _direction(task_id: str, registry: Registry | None) -> tuple[bool, Any]:
    try:
        task = registry.get(task_id) if registry else None
    except TaskError:
        task = None
    return (task.lower_is_better if task else False), task


def per_seed(frame: pd.DataFrame, k: int | None, registry: Registry | None) -> pd.DataFrame:
    """One row per (method, task, seed): best@K, mean@K, valid rate, medal of best@K."""
    from mlerl.bench._grade import task_thresholds

    out = []
    for (method, task_id, seed), g in frame.groupby(["method", "task_id", "seed"], sort=True):
        g = g.sort_values(["t", "step"]).head(k) if k else g.sort_values(["t", "step"])
        lower, task = _direction(task_id, registry)
        scores = g.loc[g["valid"], "score"]
        private = g.loc[g["valid"], "private_score"]
        best_public = (scores.min() if lower else scores.max()) if len(scores) else math.nan
        best = float(best_reported(scores, private, lower).iloc[-1]) if len(scores) else math.nan
        medal = math.nan
        if task is not None and (task.thresholds is not None or task.leaderboard is not None):
            gold, silver, bronze, median = task_thresholds(task)
            medal = float(
                rank_score(
                    None if math.isnan(best) else float(best), gold, silver, bronze, median, lower
                ).any_medal
            )
        out.append(
            {
                "method": method,
                "task_id": task_id,
                "seed": seed,
                "best": best,
                "best_public": best_public,
                "gap": best - best_public,
                "mean": float(private.mean()) if len(scores) else math.nan,
                "mean_public": float(scores.mean()) if len(scores) else math.nan,
                "valid_rate": float(g["valid"].mean()),
                "medal": medal,
                "lower": lower,
            }
        )
    return pd.DataFrame(out)


def summary_table(seeds: pd.DataFrame) -> pd.DataFrame:
    """Mean +- s.e. over seeds per (task, method), with the paper's Table 1/2 columns."""
    rows = []
    for task_id, g in seeds.groupby("task_id", sort=True):
        row: dict[str, Any] = {
            "task_id": task_id,
            "direction": "min" if g["lower"].iloc[0] else "max",
        }
        for method, h in g.groupby("method", sort=True):
            for col, name in (
                ("best", "best@K"),
                ("best_public", "public best@K"),
                ("gap", "gap@K"),
                ("mean", "mean@K"),
                ("valid_rate", "valid_rate"),
                ("medal", "medal"),
            ):
                m, se = mean_se(h[col].tolist())
                row[f"{method} {name}"] = m
                row[f"{method} {name} se"] = se
            row[f"{method} seeds"] = len(h)
        for table, name in ((TABLE1, "paper T1"), (TABLE2, "paper T2")):
            for col, val in table.get(task_id, {}).items():
                row[f"{name} {col}"] = val
        rows.append(row)
    return pd.DataFrame(rows)


def _fmt(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def to_markdown(table: pd.DataFrame) -> str:
    """A markdown table: "mean ± se" cells for the run columns, paper values as reported."""
    cols = [c for c in table.columns if not c.endswith(" se")]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in table.iterrows():
        cells = []
        for c in cols:
            se = r.get(f"{c} se")
            cell = _fmt(r[c])
            if se is not None and not (isinstance(se, float) and math.isnan(se)) and cell != "–":
                cell += f" ± {_fmt(se)}"
            cells.append(cell)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + (
        f"\n\nPaper columns: {SOURCE}. K = samples per task and seed; ± = s.e. over "
        "seeds. best@K: the private score of the sample with the best public score; "
        "gap@K: private - public of that sample; mean@K: mean private score.\n"
    )


def _axes_grid(n: int) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    return fig, axes.ravel()


def plot_best_vs_time(frame: pd.DataFrame, registry: Registry | None, path: Path) -> Path:
    """Figure 7: best valid score so far (chosen on public, shown on private) vs wall-clock
    (hours), mean over seeds, per task."""
    tasks = sorted(frame["task_id"].unique())
    fig, axes = _axes_grid(len(tasks))
    for ax, task_id in zip(axes, tasks, strict=False):
        lower, _ = _direction(task_id, registry)
        for method, g in frame[frame["task_id"] == task_id].groupby("method", sort=True):
            curves = []
            for _, s in g.groupby("seed"):
                s = s.sort_values("t")
                best = best_reported(s["score"].where(s["valid"]), s["private_score"], lower)
                curves.append(pd.Series(best.to_numpy(), index=s["t"].to_numpy() / 3600))
            joined = pd.concat(curves, axis=1).sort_index().ffill()
            ax.step(joined.index, joined.mean(axis=1), where="post", label=method)
        ax.set_title(task_id, fontsize=9)
        ax.set_xlabel("wall-clock time (hours)")
        ax.set_ylabel(f"best score ({'lower' if lower else 'higher'} is better)")
        ax.legend(fontsize=8)
    fig.suptitle("Best score vs wall-clock time (mean over seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def plot_vs_step(
    frame: pd.DataFrame, column: str, path: Path, per_task: bool, registry: Registry | None = None
) -> Path:
    """Figures 2/8 (``duration_s``, all tasks pooled) and 10 (``score``, per task) vs step."""
    tasks = sorted(frame["task_id"].unique()) if per_task else ["all tasks"]
    fig, axes = _axes_grid(len(tasks))
    label = "mean execution time (s)" if column == "duration_s" else "mean valid private score"
    for ax, task_id in zip(axes, tasks, strict=False):
        sub = frame if not per_task else frame[frame["task_id"] == task_id]
        if column == "score":
            sub = sub[sub["valid"]]
        shown = "private_score" if column == "score" else column  # reports show the private board
        for method, g in sub.groupby("method", sort=True):
            means = g.groupby("step")[shown].mean()
            ax.plot(means.index, means.to_numpy(), marker=".", label=method)
        ax.set_title(task_id, fontsize=9)
        ax.set_xlabel("training step")
        ax.xaxis.get_major_locator().set_params(integer=True)
        direction = ""
        if column == "score":
            direction = (
                " (lower is better)" if _direction(task_id, registry)[0] else " (higher is better)"
            )
        ax.set_ylabel(label + direction)
        ax.legend(fontsize=8)
    title = (
        "Mean execution time vs training step"
        if column == "duration_s"
        else "Mean score vs training step"
    )
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def compare_runs(
    paths: list[Path], out: Path, k: int | None = None, registry: Registry | None = None
) -> list[Path]:
    """Write table.md, table.csv, per_seed.csv and three PNG plots into ``out``."""
    frame = read_metrics(paths)
    if frame.empty:
        raise ValueError("no metrics records in the given files")
    registry = registry or Registry.load()
    out.mkdir(parents=True, exist_ok=True)
    seeds = per_seed(frame, k, registry)
    table = summary_table(seeds)
    written = [out / "per_seed.csv", out / "table.csv", out / "table.md"]
    seeds.to_csv(written[0], index=False)
    table.to_csv(written[1], index=False)
    written[2].write_text(to_markdown(table), encoding="utf-8")
    written.append(plot_best_vs_time(frame, registry, out / "best_score_vs_time.png"))
    written.append(plot_vs_step(frame, "duration_s", out / "duration_vs_step.png", per_task=False))
    written.append(
        plot_vs_step(frame, "score", out / "score_vs_step.png", per_task=True, registry=registry)
    )
    return written
