"""The paper's Figure 1 at equal budget: RL against AIDE and best-of-N of the initial
policy, each given the program executions one default ``mlerl train`` uses in total.

``python benchmarks/experiments/equal_budget.py --runs-dir /tmp/embedded_rl [--seeds 3] [--first-seed 3] [--no-launch] [--methods initial_bon,aide] [--name equal_budget]``

``--runs-dir`` holds finished training runs, ``RUNS/seedS`` (``benchmarks/experiments/embedded_rl.py``
writes them that way). For each run:

- **budget** N = the run's training samples (``samples.jsonl``) + the trained policy's closing
  best-of-K samples (``report.json``). A sample whose answer held no program counts as one, as
  an AIDE step without a program does: each is a policy call that could have run a program;
- **RL**: the best so far over the training samples in the order they finished, chosen on the
  public score and reported on the private one, then the closing best-of-K of the trained
  policy; the final point is RL's result at N. Its wall-clock is the training run's clock at
  its last sample plus the closing evaluation's (the closing baselines and the report's plots
  are not counted);
- **AIDE** driven by the initial policy, N steps (``mlerl eval --aide --k N``), same seed;
- **best-of-N** of the initial policy (``mlerl eval --k N``: the closing evaluation's protocol,
  scratch and improve prompts, the best on public reported on private), same seed.
Both baselines run with the run's own actor settings and tasks (``--run``), so prompts,
sampling, sandbox limits and the public/private split are those RL trained with. A baseline
whose ``equal_budget_{aide,initial_bon}.json`` is already in the run dir is not run again
(``--methods`` picks which to launch, e.g. one per process).

Per seed and task: N, each method's final private and public score and wall-clock seconds, and
its best (private) score against executions. Across seeds: mean and standard error of each
method's final private score, and, over the seeds where RL and a baseline both have a result,
how many seeds and whether in the mean RL's is at least that baseline's. Writes
``NAME.json`` (per-seed ``rows`` and a ``summary`` with ``seeds``, ``rl_private_mean``,
``aide_private_mean``, ``initial_bon_private_mean`` and the task's ``direction``) and ``NAME.png``
(best private score against executions and against wall-clock, mean over seeds) to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common
from _common import (  # noqa: E402
    RESULTS,
    command_line,
    git_commit,
    int_list,
    machine_info,
    mean_se,
    read_jsonl,
)
from embedded_rl import _better, selection  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
METHODS = ("rl", "aide", "initial_bon")


def _valid_score(row: dict[str, Any]) -> float | None:
    score = row.get("score")
    if not row.get("valid") or score is None or not math.isfinite(float(score)):
        return None
    return float(score)


def rl_curve(samples: list[dict[str, Any]], task_id: str, lower: bool) -> dict[str, list[Any]]:
    """RL's best so far over one task's training samples, in the order they finished (``t``):
    after each sample, the private score of the best public score yet (None before the first
    valid one) and the run's clock then."""
    rows = sorted(
        (r for r in samples if r.get("task_id") == task_id), key=lambda r: float(r.get("t") or 0.0)
    )
    best_public: float | None = None
    best_private: float | None = None
    privates: list[float | None] = []
    publics: list[float | None] = []
    clock: list[float] = []
    for row in rows:
        score = _valid_score(row)
        if score is not None and _better(score, best_public, lower):
            private = row.get("private_score")
            best_public = score
            best_private = (
                score if private is None or not math.isfinite(float(private)) else float(private)
            )
        privates.append(best_private)
        publics.append(best_public)
        clock.append(float(row.get("t") or 0.0))
    return {"best_private": privates, "best_public": publics, "t": clock}


def rl_final(
    curve: dict[str, list[Any]], closing: dict[str, Any], lower: bool
) -> tuple[float | None, float | None]:
    """(private, public) of RL's result: the better on public of the training best and the
    closing best-of-K (``closing``: that task's summary in the trained policy's evaluation)."""
    public = curve["best_public"][-1] if curve["best_public"] else None
    private = curve["best_private"][-1] if curve["best_private"] else None
    c_public, c_private = closing.get("best_public"), closing.get("best_score")
    if c_public is not None and _better(float(c_public), public, lower):
        return (float(c_private) if c_private is not None else float(c_public)), float(c_public)
    return private, public


def budget(samples: list[dict[str, Any]], task_id: str, closing_k: int) -> int:
    """N for one task: its training samples plus the closing best-of-K's."""
    return sum(r.get("task_id") == task_id for r in samples) + int(closing_k)


def baseline_task(result: dict[str, Any] | None, task_id: str) -> dict[str, Any] | None:
    """One task's summary from an ``mlerl eval`` output (one seed), else None."""
    if not result or not result.get("per_seed"):
        return None
    return result["per_seed"][0]["tasks"].get(task_id)


def seed_rows(
    run_dir: Path, aide: dict[str, Any] | None, bon: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """One row per task of the run in ``run_dir`` (``report.json``, ``samples.jsonl``) with the
    two baselines' ``mlerl eval`` outputs (None: not run)."""
    report = json.loads((run_dir / "report.json").read_text())
    samples = read_jsonl(run_dir / "samples.jsonl")
    seed = report.get("seed")
    rows = []
    for task_id, closing in report["trained"]["per_seed"][0]["tasks"].items():
        lower = bool(closing["lower_is_better"])
        curve = rl_curve(samples, task_id, lower)
        private, public = rl_final(curve, closing, lower)
        n = budget(samples, task_id, int(closing.get("k") or report["k"]))
        row: dict[str, Any] = {
            "seed": seed,
            "task": task_id,
            "direction": "lower_is_better" if lower else "higher_is_better",
            "budget_executions": n,
            "rl_private": private,
            "rl_public": public,
            "rl_wall_s": (curve["t"][-1] if curve["t"] else 0.0)
            + ((closing.get("elapsed_s") or [0.0])[-1] or 0.0),
            "rl_curve": curve["best_private"] + [private] * max(n - len(curve["best_private"]), 0),
        }
        for name, result in (("aide", aide), ("initial_bon", bon)):
            summary = baseline_task(result, task_id)
            if summary is None:
                row.update(
                    {
                        f"{name}_private": None,
                        f"{name}_public": None,
                        f"{name}_wall_s": None,
                        f"{name}_curve": None,
                        f"{name}_executions": None,
                    }
                )
                continue
            elapsed = summary.get("elapsed_s") or []
            row.update(
                {
                    f"{name}_private": summary.get("best_score"),
                    f"{name}_public": summary.get("best_public"),
                    f"{name}_wall_s": elapsed[-1] if elapsed else None,
                    f"{name}_curve": summary.get("best_vs_executions"),
                    f"{name}_executions": summary.get("k"),
                    f"{name}_valid_frac": summary.get("valid_frac"),
                }
            )
        rows.append(row)
    return rows


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Across seeds, per task: mean and s.e. of each method's final private score and the seeds
    where RL's is at least each baseline's (ties count, as the issue's target reads)."""
    per_task: dict[str, Any] = {}
    for task_id in dict.fromkeys(r["task"] for r in rows):
        mine = [r for r in rows if r["task"] == task_id]
        lower = mine[0]["direction"] == "lower_is_better"
        out: dict[str, Any] = {
            "seeds": [r["seed"] for r in mine],
            "direction": mine[0]["direction"],
            "budget_executions": [r["budget_executions"] for r in mine],
        }
        for method in METHODS:
            stats = mean_se([r[f"{method}_private"] for r in mine])
            out[f"{method}_private_mean"], out[f"{method}_private_se"] = stats["mean"], stats["se"]
            out[f"{method}_public_mean"] = mean_se([r[f"{method}_public"] for r in mine])["mean"]
        for base in ("aide", "initial_bon"):
            # paired: only the seeds where both RL and the baseline have a result
            pairs = [
                (r["rl_private"], r[f"{base}_private"])
                for r in mine
                if r[f"{base}_private"] is not None and r["rl_private"] is not None
            ]
            out[f"{base}_paired_seeds"] = len(pairs)
            out[f"rl_at_least_{base}_seeds"] = sum(not _better(b, rl, lower) for rl, b in pairs)
            rl_mean = mean_se([rl for rl, _ in pairs])["mean"]
            base_mean = mean_se([b for _, b in pairs])["mean"]
            out[f"rl_at_least_{base}_in_mean"] = (
                None
                if rl_mean is None or base_mean is None
                else not _better(base_mean, rl_mean, lower)
            )
        per_task[task_id] = out
    summary: dict[str, Any] = {"tasks": per_task}
    if len(per_task) == 1:  # the default run: one task, its figures at the top
        summary.update(next(iter(per_task.values())))
    return summary


def eval_command(run_dir: Path, model: str, method: str, seed: int, k: int, out: Path) -> list[str]:
    """The ``mlerl eval`` command line of one baseline (``initial_bon``, ``scratch_bon`` or
    ``aide``) of ``model`` at ``k`` executions, with ``run_dir``'s actor settings, into ``out``."""
    return [
        str(REPO / ".venv" / "bin" / "mlerl"),
        "eval",
        "--model",
        model,
        "--run",
        str(run_dir),
        "--k",
        str(k),
        "--seeds",
        "1",
        "--first-seed",
        str(seed),
        "--out",
        str(out),
        *(["--aide"] if method == "aide" else []),
        *(["--scratch-only"] if method == "scratch_bon" else []),
    ]


def launch(run_dir: Path, model: str, method: str, seed: int, k: int) -> None:
    """``mlerl eval`` of ``model`` (the run's initial policy) at ``k`` executions, into the run dir:
    ``initial_bon`` (best-of-K with the run's mix of scratch and improve prompts), ``scratch_bon``
    (best-of-K from scratch prompts only) or ``aide``."""
    cmd = eval_command(run_dir, model, method, seed, k, run_dir / f"equal_budget_{method}.json")
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL)


def _mean_curve(curves: list[list[float | None]]) -> list[float | None]:
    n = max((len(c) for c in curves), default=0)
    out: list[float | None] = []
    for i in range(n):
        xs = [c[min(i, len(c) - 1)] for c in curves if c and c[min(i, len(c) - 1)] is not None]
        out.append(sum(xs) / len(xs) if xs else None)
    return out


def plot(rows: list[dict[str, Any]], out: Path, name: str) -> Path:
    """Per task: mean (over seeds) best private score against executions; each seed's final
    point against its wall-clock."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(dict.fromkeys(r["task"] for r in rows))
    fig, axes = plt.subplots(len(tasks), 2, figsize=(11, 4 * len(tasks)), squeeze=False)
    colours = {"rl": "tab:blue", "aide": "tab:orange", "initial_bon": "tab:green"}
    labels = {
        "rl": "RL (training, then best-of-K)",
        "aide": "AIDE, initial policy",
        "initial_bon": "best-of-N, initial policy",
    }
    for (ax_n, ax_t), task_id in zip(axes, tasks):
        mine = [r for r in rows if r["task"] == task_id]
        for method in METHODS:
            curves = [r[f"{method}_curve"] for r in mine if r.get(f"{method}_curve")]
            if curves:
                mean = _mean_curve(curves)
                xs = [i + 1 for i, v in enumerate(mean) if v is not None]
                ax_n.plot(
                    xs,
                    [v for v in mean if v is not None],
                    color=colours[method],
                    label=labels[method],
                )
            for r in mine:
                if r.get(f"{method}_wall_s") is not None and r.get(f"{method}_private") is not None:
                    ax_t.scatter(
                        r[f"{method}_wall_s"] / 60, r[f"{method}_private"], color=colours[method]
                    )
        ax_n.set_title(
            f"{task_id}\nbest private score (chosen on public), mean of {len(mine)} seeds",
            fontsize=9,
        )
        ax_n.set(xlabel="program executions", ylabel=mine[0]["direction"].replace("_", " "))
        ax_t.set_title("final best against wall-clock\n(one point per seed)", fontsize=9)
        ax_t.set(xlabel="minutes", ylabel="private score")
        ax_n.legend(fontsize=8)
    fig.tight_layout()
    path = out / f"{name}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _load(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs-dir", type=Path, required=True, help="finished runs as RUNS/seedS")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--name", default="equal_budget")
    p.add_argument("--no-launch", action="store_true", help="aggregate only")
    p.add_argument(
        "--methods",
        default="initial_bon,aide",
        help="baselines to launch where missing (comma-separated; e.g. one per process)",
    )
    p.add_argument(
        "--chosen-on",
        type=int_list,
        default=None,
        help="seeds the default configuration was chosen on (recorded in the results)",
    )
    args = p.parse_args(argv)
    rows: list[dict[str, Any]] = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        run_dir = args.runs_dir / f"seed{seed}"
        if not (run_dir / "report.json").is_file():
            print(f"seed {seed}: no finished run in {run_dir}; skipped", flush=True)
            continue
        samples = read_jsonl(run_dir / "samples.jsonl")
        report = json.loads((run_dir / "report.json").read_text())
        tasks = list(report["trained"]["per_seed"][0]["tasks"])
        if len(tasks) != 1:
            p.error(f"{run_dir}: one task per run (the budget is per task), found {tasks}")
        n = budget(samples, tasks[0], int(report["k"]))
        for method in [m for m in args.methods.split(",") if m]:
            if method not in ("initial_bon", "aide"):
                p.error(f"--methods: unknown baseline {method!r} (initial_bon, aide)")
            if not args.no_launch and not (run_dir / f"equal_budget_{method}.json").is_file():
                launch(run_dir, report["initial"]["model"], method, seed, n)
        rows += seed_rows(
            run_dir,
            _load(run_dir / "equal_budget_aide.json"),
            _load(run_dir / "equal_budget_initial_bon.json"),
        )
    if not rows:
        p.error(f"no finished runs under {args.runs_dir}")
    result = {
        "benchmark": args.name,
        "command": command_line(),
        "commit": git_commit(),
        "machine": machine_info(),
        "selection": selection(args.chosen_on, [r["seed"] for r in rows]),
        "rows": rows,
        "summary": summarise(rows),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result["summary"], indent=1))
    print("plot:", plot(rows, args.out, args.name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
