"""One setting against another, seed by seed: a controlled comparison of two `embedded_rl.py`
results files (reward kind, improve baselines, improve prompts on or off: docs/experiments/).

``python benchmarks/experiments/compare_arms.py REFERENCE.json CANDIDATE.json --name NAME [--out DIR]``

Each file is what ``benchmarks/experiments/embedded_rl.py`` wrote for one setting (its ``overrides``
name the setting). Only seeds present in both count; for each figure, per arm the mean and
standard error over those seeds, and the paired difference CANDIDATE - REFERENCE with its
standard error (sample std of the per-seed differences / sqrt(n)); a seed where an arm lacks the
figure (a best of K with no valid sample) leaves the pairs and is counted as ``missing``, and
the table says so. A difference is "beyond
noise" when |mean| > 2 s.e. of the differences; for a score the verdict also says which arm
is better under the task's direction. Figures: the run's learning figures (valid fraction and
reward by quarter, per prompt kind, revisions against parents, failed revisions that broke
their parent, zero-advantage share per kind),
and per task the closing best of K (private, with the public score it was chosen on), mean of
K and valid fraction of the trained policy, and the valid scratch programs' mean score in the
last quarter of training.

Writes ``NAME.json`` to ``--out`` (default ``benchmarks/results``) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common
from _common import RESULTS, command_line, fmt_mean_se, git_commit, mean_se, write_json

NOISE_SE = 2.0
RUN_FIGURES = (
    "valid_last_quarter",
    "reward_last_quarter",
    "scratch_valid_last_quarter",
    "improve_valid_last_quarter",
    "improve_beats_parent_last_quarter",
    "improve_reward_delta_mean_last_quarter",
    "improve_ran_failed_last_quarter",
    "improve_broke_parent_last_quarter",
    "zero_adv_share_scratch",
    "zero_adv_share_improve",
    "wall_clock_minutes",
)
TASK_FIGURES = (
    "trained_best",
    "trained_best_public",
    "trained_mean",
    "trained_valid",
    "initial_best",
    "scratch_score_last_quarter",
)
SCORES = (
    "trained_best",
    "trained_best_public",
    "trained_mean",
    "initial_best",
    "scratch_score_last_quarter",
)


def task_figure(run: dict[str, Any], task: str, figure: str) -> float | None:
    """A per-task figure of one run: a closing one from ``tasks``, or the valid scratch programs'
    mean score in the last quarter of training (``scratch_score_last_quarter``)."""
    if figure == "scratch_score_last_quarter":
        return run.get("scratch_score_by_task", {}).get(task, {}).get("last_quarter")
    return run.get("tasks", {}).get(task, {}).get(figure)


def load(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if "runs" not in data:
        raise SystemExit(f"compare_arms: {path} is not an embedded_rl.py results file (no 'runs')")
    return data


def by_seed(data: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {int(r["seed"]): r for r in data["runs"] if r.get("seed") is not None}


def compare(
    ref_runs: dict[int, dict[str, Any]],
    cand_runs: dict[int, dict[str, Any]],
    get,
    lower_is_better: bool | None = None,
) -> dict[str, Any]:
    """Per arm mean/s.e. and the paired difference of the figure ``get(run)`` over common seeds."""
    seeds = sorted(set(ref_runs) & set(cand_runs))
    ref = [get(ref_runs[s]) for s in seeds]
    cand = [get(cand_runs[s]) for s in seeds]
    diffs = [c - r for r, c in zip(ref, cand) if r is not None and c is not None]
    d = mean_se(diffs)
    beyond = d["se"] is not None and d["n"] >= 2 and abs(d["mean"]) > NOISE_SE * d["se"]
    out = {
        "reference": mean_se(ref),
        "candidate": mean_se(cand),
        "difference": d,
        "beyond_noise": bool(beyond),
        "per_seed": {str(s): [r, c] for s, r, c in zip(seeds, ref, cand)},
        # a seed without the figure (e.g. a best of K with no valid sample) drops out of the
        # mean and the pairs; it is counted here so the table cannot hide it
        "missing": {
            "reference": sum(x is None for x in ref),
            "candidate": sum(x is None for x in cand),
        },
    }
    if lower_is_better is not None and d["mean"] is not None:
        better = d["mean"] < 0 if lower_is_better else d["mean"] > 0
        out["candidate_better"] = None if d["mean"] == 0 else better
    return out


def comparison(ref: dict[str, Any], cand: dict[str, Any]) -> dict[str, Any]:
    ref_runs, cand_runs = by_seed(ref), by_seed(cand)
    seeds = sorted(set(ref_runs) & set(cand_runs))
    if not seeds:
        raise SystemExit("compare_arms: the two files share no seed")
    runs = {f: compare(ref_runs, cand_runs, lambda r, f=f: r.get(f)) for f in RUN_FIGURES}
    task_ids = sorted(
        {t for r in [*ref_runs.values(), *cand_runs.values()] for t in r.get("tasks", {})}
    )
    tasks: dict[str, Any] = {}
    for t in task_ids:
        lower = next(
            (
                r["tasks"][t].get("lower_is_better")
                for r in ref_runs.values()
                if t in r.get("tasks", {})
            ),
            None,
        )
        tasks[t] = {
            f: compare(
                ref_runs,
                cand_runs,
                lambda r, f=f: task_figure(r, t, f),
                lower if f in SCORES else None,
            )
            for f in TASK_FIGURES
        }
        tasks[t]["lower_is_better"] = lower
    return {"seeds": seeds, "runs": runs, "tasks": tasks}


def _ms(x: dict[str, Any], spec: str, missing: int = 0) -> str:
    return fmt_mean_se(x, spec) + (
        f" ({missing} seed{'s' if missing > 1 else ''} without)" if missing else ""
    )


def table(result: dict[str, Any]) -> str:
    lines = [
        f"| figure (seeds {', '.join(map(str, result['comparison']['seeds']))}) | {result['reference']['label']} "
        f"| {result['candidate']['label']} | difference | beyond 2 s.e. |",
        "|---|---|---|---|---|",
    ]
    rows = [(f, c, ".3f") for f, c in result["comparison"]["runs"].items()]
    for t, figs in result["comparison"]["tasks"].items():
        rows += [(f"{t} {f}", c, ".4f") for f, c in figs.items() if isinstance(c, dict)]
    for name, c, spec in rows:
        lines.append(
            f"| {name} | {_ms(c['reference'], spec, c['missing']['reference'])} | "
            f"{_ms(c['candidate'], spec, c['missing']['candidate'])} | "
            f"{_ms(c['difference'], spec)} | {'yes' if c['beyond_noise'] else 'no'} |"
        )
    return "\n".join(lines)


def label(data: dict[str, Any], path: Path) -> str:
    return " ".join(data.get("overrides") or []) or f"default ({path.name})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("reference", type=Path)
    p.add_argument("candidate", type=Path)
    p.add_argument("--name", required=True, help="results file stem")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    ref, cand = load(args.reference), load(args.candidate)
    result = {
        "benchmark": "paired comparison of two settings (benchmarks/experiments/compare_arms.py)",
        "command": command_line(),
        "git_commit": git_commit(),
        "reference": {
            "file": str(args.reference),
            "label": label(ref, args.reference),
            "overrides": ref.get("overrides"),
            "commit": ref.get("commit"),
            "selection": ref.get("selection"),
        },
        "candidate": {
            "file": str(args.candidate),
            "label": label(cand, args.candidate),
            "overrides": cand.get("overrides"),
            "commit": cand.get("commit"),
            "selection": cand.get("selection"),
        },
        "comparison": comparison(ref, cand),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / f"{args.name}.json", result)
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
