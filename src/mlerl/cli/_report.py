"""The closing report of `mlerl train`: plots of the run and trained vs bootstrapped policy.

Writes into the run directory:
- ``plots/``: ``learning_curves.png`` (the learner's per-update diagnostics split by prompt kind
  and task, with a rolling mean), best score vs wall-clock, execution time per step, score per
  step, and the best-of-K / mean tables (``mlerl tasks compare`` over ``samples.jsonl``);
- ``report.json`` and ``report.md``: best-of-K of the trained policy (``RUN_DIR/policy``)
  next to the initial policy, each given the same K samples per task with the same seed and
  the paper's test-time protocol (scratch and improve, best of both), and (``aide``) the
  AIDE-style tree search driven by the initial policy at the same K program executions per
  task (same seed, prompts, sampling, sandbox, instrumentation and grader; it optimises the
  graded score). Every best is chosen on the public leaderboard and shown on the private one,
  with its public score and the gap (private - public) beside it. Stated as measured, whatever
  it shows;
- ``plots/rl_vs_aide.png``: best score so far against executions and against wall-clock
  seconds, per task: trained and initial best-of-K, and AIDE (the paper's Figure 1 in
  miniature; the best-of-K samples run several at a time, AIDE's steps one after the other,
  and the three evaluations run at once, sharing the machine's cores).

The same closing tables (each table of ``report.md``, as a ``wandb.Table`` under
``report/<its heading>``) and every plot (``report/<file stem>`` images) go to the run's W&B
run (``logging.wandb_mode``: offline by default), which the learner's process started: the
report continues it through ``<run dir>/wandb/mlerl-run-id``.
"""

from __future__ import annotations

import asyncio
import csv
import json
import math
import re
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from mlerl.cli._config import TrainConfig
from mlerl.cli._console import console_summary
from mlerl.cli._curves import load_pyplot
from mlerl.cli._eval import evaluate_policy
from mlerl.cli._progress import Progress


def write_report(
    train: TrainConfig, run_dir: Path, initial_model: Path, progress: Progress
) -> Path:
    task_ids = list(train.tasks.ids)
    found = run_best(run_dir, task_ids, progress.directions)
    lead = best_markdown(found, task_ids, run_dir)
    plots = _plots(run_dir, progress)  # the learning curves and the probe, compared or not
    if train.eval_samples == 0:  # no closing comparison: the run's best alone
        (run_dir / "report.md").write_text(lead)  # the plots on disk; W&B gets the curves live
        for line in console_summary(lead, full_report=str(run_dir / "report.md")).splitlines():
            progress.say(line)
        return run_dir / "report.md"
    trained_model = run_dir / "policy"
    if not (trained_model / "config.json").is_file():
        progress.say(f"no trained policy in {trained_model}; skipping the comparison")
        (run_dir / "report.md").write_text(lead)
        _to_wandb(train, run_dir, lead, plots)
        return run_dir
    kwargs: dict[str, Any] = dict(
        k=train.eval_samples,
        seeds=[train.seed],
        base=train.actors,
        data_dir=train.tasks.data_dir,
        tasks_dir=train.tasks.tasks_dir,
        sandbox_config=train.sandbox,
        public_fraction=train.tasks.public_fraction,
    )
    k = train.eval_samples
    progress.say(f"closing comparison, {k} executions each: initial, trained best-of-{k}, AIDE")
    before, after, aide = asyncio.run(
        _at_once(
            evaluate_policy(str(initial_model), task_ids, **kwargs),
            evaluate_policy(str(trained_model), task_ids, **kwargs),
            evaluate_policy(str(initial_model), task_ids, method="aide", **kwargs),
        )
    )
    report: dict[str, Any] = {
        "k": train.eval_samples,
        "seed": train.seed,
        "run": found,
        "initial": before,
        "trained": after,
        "aide": aide,
    }
    figure = plot_rl_vs_aide(report, task_ids, run_dir / "plots" / "rl_vs_aide.png")
    report["plots"] = [str(p) for p in plots + ([figure] if figure else [])]
    (run_dir / "report.json").write_text(json.dumps(report, indent=1))
    text = lead + "\n" + render_markdown(report, task_ids)
    unisolated = run_dir / "UNISOLATED"  # written at start-up by an opted-in unisolated run
    if unisolated.is_file():
        text = f"**{unisolated.read_text().strip()}**\n\n{text}"
    (run_dir / "report.md").write_text(text)
    _to_wandb(train, run_dir, text, [Path(p) for p in report["plots"]])
    for line in console_summary(text, full_report=str(run_dir / "report.md")).splitlines():
        progress.say(line)  # report.md keeps the full tables; the console reads in 100 columns
    return run_dir / "report.md"


async def _at_once(*evaluations: Coroutine[Any, Any, Any]) -> list[Any]:
    """The closing evaluations side by side in one event loop (each with its own engine and
    sandbox; the engines' forward passes run in worker threads): AIDE's steps run one after the
    other, so alone it leaves the cores idle between them. The first error ends the others
    (``asyncio.run`` cancels them, and each closes its sandbox), as Ctrl-C does."""
    return list(await asyncio.gather(*evaluations))


def best_so_far(records: list[dict[str, Any]], lower_is_better: bool) -> list[float | None]:
    """After each record (one execution, in the order the learner received them), the private
    score of the best public score so far (None before the first valid one)."""
    out: list[float | None] = []
    best: float | None = None
    shown: float | None = None
    for r in records:
        public = r.get("score") if r.get("valid") else None
        if public is not None and better(public, best, lower_is_better):
            best, shown = public, r.get("private_score", public)
        out.append(shown)
    return out


def run_best(
    run_dir: Path, task_ids: list[str], directions: dict[str, bool]
) -> dict[str, dict[str, Any]]:
    """Per task: the run's best solution (``best/<task>/solution.json``; None when no valid
    sample) and its best-so-far curve over the run's executions (``samples.jsonl``)."""
    from mlerl.learner import read_best

    best = read_best(run_dir)
    path = run_dir / "samples.jsonl"
    records: list[dict[str, Any]] = []
    if path.is_file():
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                try:
                    records.append(json.loads(line))
                except ValueError:  # a last line a crash cut
                    continue
    out: dict[str, dict[str, Any]] = {}
    for task in task_ids:
        mine = [r for r in records if r.get("task_id") == task]
        lower = directions.get(task, True)
        out[task] = {
            "best": best.get(task),
            "executions": len(mine),
            "lower_is_better": lower,
            "best_vs_executions": best_so_far(mine, lower),
        }
    return out


def best_markdown(found: dict[str, dict[str, Any]], task_ids: list[str], run_dir: Path) -> str:
    """The report's opening section: each task's best solution of the run (chosen on public)."""
    lines = [
        "# The run's best solution per task (chosen on the public score)",
        "",
        "| task | best: private (public) | found at execution | step | kind | sample |",
        "|---|---|---|---|---|---|",
    ]
    for task in task_ids:
        f = found.get(task) or {}
        b = f.get("best")
        if b is None:
            lines.append(f"| {task} | no valid solution | - | - | - | - |")
            continue
        lines.append(
            f"| {task} | {_fmt(b['private_score'])} ({_fmt(b['public_score'])}) | "
            f"{b['executions']} of {f['executions']} | {b['step']} | {b['kind']} | "
            f"{b['sample_id']} |"
        )
    lines += [
        "",
        f"Each solution's plan, program, output and submission: `{run_dir / 'best'}/<task>/`. "
        "The comparisons below give the initial policy, the trained policy and AIDE K "
        "executions each, fewer than the run used; for every arm at the run's own number of "
        "executions: `benchmarks/experiments/discovery.py`.",
    ]
    return "\n".join(lines) + "\n"


def _to_wandb(train: TrainConfig, run_dir: Path, markdown: str, plots: list[Path]) -> None:
    """The report's tables, the tables of ``plots/`` (CSV) and its figures (PNG) into the run's
    W&B run (none when it is disabled)."""
    if train.logging.wandb_mode == "disabled":
        return
    from mlerl.protocol import make_sink

    sink = make_sink(train.logging, run_dir, name=run_dir.name)
    try:
        for title, columns, rows in markdown_tables(markdown):
            sink.log_table(slug(title), columns, rows, 0, stream="report")
        for path in plots:
            if path.suffix == ".csv" and path.is_file():
                with open(path, newline="", encoding="utf-8") as f:
                    header, *body = list(csv.reader(f))
                sink.log_table(slug(path.stem), header, body, 0, stream="report")
        figures = {slug(p.stem): p for p in plots if p.suffix == ".png" and p.is_file()}
        sink.log_images(figures, 0, stream="report")
    finally:
        sink.close()


def slug(title: str) -> str:
    """A W&B key from a heading: lower case, runs of other characters as one ``_``."""
    return re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")[:60] or "table"


def markdown_tables(text: str) -> list[tuple[str, list[str], list[list[str]]]]:
    """Each pipe table of ``text`` as (the heading above it, its columns, its rows of cells)."""
    tables: list[tuple[str, list[str], list[list[str]]]] = []
    heading, block = "", []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append([cell.strip() for cell in line.strip().strip("|").split("|")])
            continue
        if block:
            rows = [r for r in block[1:] if not all(set(c) <= set("-: ") for c in r)]
            tables.append((heading, block[0], rows))
            block = []
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
    return tables


def _plots(run_dir: Path, progress: Progress) -> list[Path]:
    from mlerl.bench import compare_runs
    from mlerl.cli._curves import plot_decision_probe, plot_learning_curves

    load_pyplot()  # first, so no plot below (the bench's included) prints matplotlib's notice
    curves = []
    if (run_dir / "metrics.jsonl").is_file():
        for plot in (plot_learning_curves, plot_decision_probe):
            curve = plot(run_dir / "metrics.jsonl", run_dir / "plots")
            curves += [curve] if curve is not None else []
    samples = run_dir / "samples.jsonl"
    if not samples.is_file() or samples.stat().st_size == 0:
        return curves
    try:
        return curves + compare_runs([samples], run_dir / "plots")
    except ValueError as exc:  # e.g. no record with a valid score yet
        progress.say(f"plots skipped: {exc}")
        return curves


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _board(summary: dict[str, Any], key: str = "best") -> str:
    """``private (public, gap +x)`` of a summary's best, or of its mean."""
    if key == "mean":
        return f"{_fmt(summary['mean_score'])} ({_fmt(summary.get('mean_public'))})"
    gap = summary.get("best_gap")
    tail = "" if gap is None else f", gap {gap:+.4f}"
    return f"{_fmt(summary['best_score'])} ({_fmt(summary.get('best_public'))}{tail})"


def better(a: float | None, b: float | None, lower_is_better: bool) -> bool:
    """``a`` strictly better than ``b`` (no score is the worst)."""
    if a is None:
        return False
    return b is None or (a < b if lower_is_better else a > b)


_CURVES = (
    ("trained", "trained best-of-K", "C0"),
    ("initial", "initial best-of-K", "C7"),
    ("aide", "AIDE (initial policy)", "C3"),
)


def plot_rl_vs_aide(report: dict[str, Any], task_ids: list[str], out: Path) -> Path | None:
    """Best score so far vs executions and vs wall-clock, one row per task; None without data."""
    curves = [(key, label, color) for key, label, color in _CURVES if key in report]
    if not curves or not task_ids:
        return None
    plt = load_pyplot()
    fig, axes = plt.subplots(len(task_ids), 2, figsize=(9, 3 * len(task_ids)), squeeze=False)
    for row, task in zip(axes, task_ids, strict=True):
        lower = False
        run = (report.get("run") or {}).get(task) or {}
        if run.get("best_vs_executions"):
            ys = [math.nan if b is None else b for b in run["best_vs_executions"]]
            row[0].plot(
                range(1, len(ys) + 1),
                ys,
                label="the RL run (its training samples)",
                color="C2",
                drawstyle="steps-post",
            )
        for key, label, color in curves:
            summary = report[key]["per_seed"][0]["tasks"][task]
            lower = summary["lower_is_better"]
            best = summary.get("best_vs_executions") or []
            ys = [math.nan if b is None else b for b in best]
            style = dict(
                drawstyle="steps-post", marker="o", ms=3, color=color
            )  # a lone point shows
            row[0].plot(range(1, len(best) + 1), ys, label=label, **style)
            elapsed = summary.get("elapsed_s") or []
            if len(elapsed) == len(best):
                row[1].plot(elapsed, ys, **style)
        direction = "lower" if lower else "higher"
        row[0].set_title(
            f"{task}: private score of the best public so far ({direction} is better)", fontsize=9
        )
        row[0].set_xlabel("program executions", fontsize=8)
        row[1].set_title(f"{task}: best so far vs wall-clock", fontsize=9)
        row[1].set_xlabel("seconds", fontsize=8)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def _kind_lines(report: dict[str, Any], task_ids: list[str]) -> list[str]:
    """Per task and policy: each prompt kind's valid fraction and which kind the best came from
    (summaries written before the kinds were reported give no lines)."""
    lines = []
    for task in task_ids:
        for policy in ("initial", "trained"):
            t = report[policy]["per_seed"][0]["tasks"][task]
            if "valid_frac_by_kind" not in t:
                return []
            v = t["valid_frac_by_kind"]
            best_kind = t.get("best_kind") or "-"
            lines.append(
                f"| {task} | {policy} | {v['scratch']:.2f} | {v['improve']:.2f} | {best_kind} |"
            )
    return lines


def render_markdown(report: dict[str, Any], task_ids: list[str]) -> str:
    k = report["k"]
    lines = [
        f"# Trained vs initial policy (best of {k} samples per task, seed {report['seed']})",
        "",
        "| task | initial best: private (public, gap) | trained best: private (public, gap) | "
        "initial mean: private (public) | trained mean: private (public) | initial valid | trained "
        "valid |",
        "|---|---|---|---|---|---|---|",
    ]
    for task in task_ids:
        b = report["initial"]["per_seed"][0]["tasks"][task]
        a = report["trained"]["per_seed"][0]["tasks"][task]
        lines.append(
            f"| {task}{' (lower is better)' if a['lower_is_better'] else ''} | {_board(b)} | "
            f"{_board(a)} | {_board(b, 'mean')} | {_board(a, 'mean')} | "
            f"{b['valid_frac']:.2f} | {a['valid_frac']:.2f} |"
        )
    lines += [
        "",
        "Scores are the tasks' raw metrics on the private leaderboard, the public one in "
        "brackets: each best is the sample with the best public score (what training rewarded), "
        "shown with its private score and the gap (private - public). 'valid' is the fraction "
        "of samples with a valid submission. One seed: differences within a few samples' noise "
        "are not significant.",
    ]
    kinds = _kind_lines(report, task_ids)
    if kinds:
        lines += [
            "",
            "## Scratch and improve samples (the same K, the best of both taken)",
            "",
            "| task | policy | scratch valid | improve valid | best from |",
            "|---|---|---|---|---|",
            *kinds,
        ]
    if "aide" in report:
        lines += [
            "",
            f"## AIDE with the initial policy ({k} program executions per task)",
            "",
            "| task | AIDE best: private (public, gap) | AIDE mean: private (public) | AIDE "
            "valid | "
            "trained best: private (public, gap) | trained beats AIDE |",
            "|---|---|---|---|---|---|",
        ]
        for task in task_ids:
            c = report["aide"]["per_seed"][0]["tasks"][task]
            a = report["trained"]["per_seed"][0]["tasks"][task]
            wins = better(a["best_score"], c["best_score"], a["lower_is_better"])
            lines.append(
                f"| {task} | {_board(c)} | {_board(c, 'mean')} | {c['valid_frac']:.2f} | "
                f"{_board(a)} | {'yes' if wins else 'no'} |"
            )
        lines += [
            "",
            "AIDE: greedy tree search (up to 5 drafts, then debug a buggy leaf with probability "
            "0.5 or improve the best node), one program execution per step, optimising the public "
            "score; the same prompts, sampling, sandbox and grader as best-of-K. 'trained beats "
            "AIDE' compares private scores.",
        ]
    return "\n".join(lines) + "\n"
