"""The closing report of `mlerl train`: plots of the run and trained vs bootstrapped policy.

Writes into the run directory:
- ``plots/``: ``learning_curves.png`` (the learner's per-update diagnostics split by prompt kind
  and task, with a rolling mean), best score vs wall-clock, execution time per step, score per
  step, and the best-of-K / mean tables (``mlerl tasks compare`` over ``samples.jsonl``);
- ``report.json`` and ``report.md``: best-of-K of the trained policy (``RUN_DIR/policy``)
  next to the initial policy, each given the same K samples per task with the same seed and
  the paper's test-time protocol (scratch and improve, best of both). Stated as measured,
  whatever it shows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mlerl.cli._config import TrainConfig
from mlerl.cli._eval import evaluate_policy
from mlerl.cli._progress import Progress


def write_report(train: TrainConfig, run_dir: Path, initial_model: Path, progress: Progress) -> Path:
    plots = _plots(run_dir, progress)
    trained_model = run_dir / "policy"
    if not (trained_model / "config.json").is_file():
        progress.say(f"no trained policy in {trained_model}; skipping the comparison")
        return run_dir
    kwargs: dict[str, Any] = dict(k=train.eval_samples, seeds=[train.seed], base=train.actors,
                                  sandbox_config=train.sandbox)
    progress.say(f"evaluating the initial policy: best of {train.eval_samples} per task")
    before = evaluate_policy(str(initial_model), list(train.tasks.ids), **kwargs)
    progress.say(f"evaluating the trained policy: best of {train.eval_samples} per task")
    after = evaluate_policy(str(trained_model), list(train.tasks.ids), **kwargs)
    report = {"k": train.eval_samples, "seed": train.seed, "initial": before, "trained": after,
              "plots": [str(p) for p in plots]}
    (run_dir / "report.json").write_text(json.dumps(report, indent=1))
    text = render_markdown(report, list(train.tasks.ids))
    unisolated = run_dir / "UNISOLATED"  # written at start-up by an opted-in unisolated run
    if unisolated.is_file():
        text = f"**{unisolated.read_text().strip()}**\n\n{text}"
    (run_dir / "report.md").write_text(text)
    for line in text.splitlines():
        progress.say(line)
    return run_dir / "report.md"


def _plots(run_dir: Path, progress: Progress) -> list[Path]:
    from mlerl.bench import compare_runs

    from mlerl.cli._curves import plot_learning_curves

    curves = []
    if (run_dir / "metrics.jsonl").is_file():
        curve = plot_learning_curves(run_dir / "metrics.jsonl", run_dir / "plots")
        curves = [curve] if curve is not None else []
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


def render_markdown(report: dict[str, Any], task_ids: list[str]) -> str:
    k = report["k"]
    lines = [
        f"# Trained vs initial policy (best of {k} samples per task, seed {report['seed']})",
        "",
        "| task | initial best | trained best | initial mean | trained mean | initial valid | trained valid |",
        "|---|---|---|---|---|---|---|",
    ]
    for task in task_ids:
        b = report["initial"]["per_seed"][0]["tasks"][task]
        a = report["trained"]["per_seed"][0]["tasks"][task]
        lines.append(
            f"| {task}{' (lower is better)' if a['lower_is_better'] else ''} | {_fmt(b['best_score'])} | "
            f"{_fmt(a['best_score'])} | {_fmt(b['mean_score'])} | {_fmt(a['mean_score'])} | "
            f"{b['valid_frac']:.2f} | {a['valid_frac']:.2f} |"
        )
    lines += ["", "Scores are the tasks' raw metrics; 'valid' is the fraction of samples with a valid "
              "submission. One seed: differences within a few samples' noise are not significant."]
    return "\n".join(lines) + "\n"
