"""The paper's four findings in miniature: one command, one protocol, one table.

``python benchmarks/experiments/paper_miniature.py [--seeds 3 --first-seed 3] [--tasks T1,T2] [--runs-dir DIR] [--retime K] [--quick] [--no-launch] [-- OVERRIDE ...]``

Arms, each a default ``mlerl train`` (embedded policy, local sandbox) on ONE task with one
override changed, so every difference below changes one thing:

============================  =============================================  =====================
arm                           override                                       finding it serves
============================  =============================================  =====================
``default``                   (none)                                         all four
``no_duration``               ``learner.duration_weighting=none``            2 (Figure 8)
``no_partial_credit``         ``instrument.reward.per_marker=0``             3 (Figure 9)
``no_improve``                ``actors.improvement.improve_prob=0``          4 (Table 4)
``initial_bon``,              the default run's initial policy at the        1 (Figures 1, 7)
``scratch_bon``, ``aide``     default run's total executions
============================  =============================================  =====================

``no_partial_credit`` is the paper's "without instrumentation": every failure earns -10
whatever markers it printed (the programs are still instrumented, so the only change is the
reward; docs/instrument.md). The three baselines are ``benchmarks/equal_budget.py``'s: ``mlerl
eval --run DEFAULT_RUN --k N`` (best-of-N with the actors' mix of scratch and improve prompts),
the same with ``--scratch-only`` (every sample from scratch: best-of-N as usually run, the
stronger baseline while the initial policy's revisions rarely run) and ``--aide``; N = the
default run's training samples + its closing best-of-K, written into the default run's dir as
``equal_budget_{initial_bon,scratch_bon,aide}.json``.

Launch (one job at a time; for each seed, each task, each arm, then the baselines, so a
drift in the host's load hits every arm of a seed alike): ``mlerl train seed=S
tasks.ids=[TASK] hydra.run.dir=RUNS/TASK/ARM/seedS ARM_OVERRIDE [--updates/--eval-samples]
[OVERRIDE ...]``. **Resumable**: a run dir holding ``report.json`` is finished and skipped; one
holding only ``config.yaml`` (interrupted) is continued with ``mlerl train resume=DIR``; a
baseline whose file exists is not run again; a launch that fails is reported and the grid
goes on (the next sitting retries it). ``--no-launch`` aggregates what is there. ``--arms``
picks what to launch (e.g. ``default,initial_bon,aide``: finding 1 first). **Across
machines**: each finished run's files are packed into ``--archive`` (default
``OUT/NAME_runs``) and unpacked into ``--runs-dir`` when missing there, so a grid built on
fresh machines keeps its runs (commit the archive). Each run records the sha256 of its initial
policy's weights (``policy``): two builds of one configuration need not be one policy, so a
run whose initial policy is not its seed's default run's is left out of every comparison
(``left_out_other_policy``).
``--quick``: one seed, the default task only, ``learner.max_updates=6`` and ``eval_samples=4``
(the shape of every panel; aimed at < 30 min on 2 cores with the policy cached, not yet
measured on the default policy; one seed proves nothing).

Figures per (arm, task, seed), pure functions of the run dir's files:

- ``final_private`` / ``final_public`` / ``budget_executions``: RL's result at its total
  executions (``equal_budget.rl_final``: the best on public over training and the closing
  best-of-K, reported on private), and ``winner_kind``, the prompt kind of that program;
- ``exec_mix_s_second_half``: mean execution time of the programs that ran in the second half
  of training, each at its typical time (median over every run of that program text in the
  runs of both duration arms of the task: which programs the policy chose, not the host's
  load; ``duration_ablation.typical_durations``), and ``exec_ran_s_second_half`` as measured;
- per policy version: ``paper_score`` (the mean of the task score, sign-flipped where lower is
  better, -10 for a sample without a valid submission: Figure 9's quantity), ``valid_frac`` and
  ``valid_score`` (mean signed score of the valid ones); ``paper_score_mean`` = the mean over
  versions (the area under Figure 9's curve: faster growth is a larger area) and
  ``never_valid`` (no valid sample in training).

Findings (``summary``, per task), each a paired difference over the seeds where both arms have
the figure, oriented so that **positive is the paper's direction**:

1. RL beats static use of the same budget: RL's final private score - best-of-N's, and - AIDE's
   (sign-flipped where lower is better);
2. duration-aware gradients choose slower programs: mean execution time of the second half's
   programs, default - none. With ``--retime K`` each seed's two duration runs have K of those
   programs each run again one at a time, side by side (``retime.py``, written as
   ``retime_duration.json`` into the default run's dir and archived with it), and that is the
   figure (``measure: retimed``): the times a run recorded measure its sitting's load too, and
   runs of one grid sit apart. Without it the figure is ``exec_mix_s_second_half`` (each
   program at its typical time: only programs both arms ran are corrected);
3. partial credit speeds learning: ``paper_score_mean`` default - no partial credit;
4. improve prompts beat scratch only: final private score, default - ``no_improve``.

Verdict (:func:`verdict`): with d the mean paired difference and s its standard error over n
seeds: ``reproduced`` when d - 2 s > 0; ``not reproduced`` when d + 2 s <= 0 (the 2-s.e.
interval excludes any effect in the paper's direction; an exact tie in every seed lands here);
``within noise`` otherwise; ``too few seeds`` when n < 3.

Writes ``NAME.json`` (``runs``: every run's figures; ``baselines``; ``summary``) and
``NAME.png`` (one panel per finding, one row per task) to ``--out`` and prints the README table
(:func:`readme_table`). It does not replace a ``NAME.json`` that holds runs this aggregation
lacks (an experiment on a subset aimed at the committed results by mistake) unless
``--overwrite``.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the neighbouring experiments
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common
import duration_ablation  # noqa: E402
import embedded_rl  # noqa: E402
import equal_budget  # noqa: E402
import retime  # noqa: E402
from _common import (
    RESULTS,
    command_line,
    fmt_mean_se,
    git_commit,
    int_list,
    machine_info,
    mean_se,
    read_jsonl,
)  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DEFAULT_TASK = "standin-materials-rmsle-tiny"
SECOND_TASK = "standin-insults-auc-tiny"  # the testbed's second task is not final: --tasks
ARMS: dict[str, list[str]] = {
    "default": [],
    "no_duration": ["learner.duration_weighting=none"],
    "no_partial_credit": ["instrument.reward.per_marker=0"],
    "no_improve": ["actors.improvement.improve_prob=0"],
}
# initial_bon samples with the actors' mix of prompts (half improve, parents drawn from its own
# earlier samples), as RL's actors do; scratch_bon spends every execution on a scratch prompt,
# the paper's best-of-N, which is the stronger baseline while the initial policy's revisions
# rarely run
BASELINES = ("initial_bon", "aide", "scratch_bon")
BASELINE_STYLE = {  # the figure's label and colour of each baseline
    "initial_bon": ("best-of-N, initial policy", "tab:green"),
    "scratch_bon": ("best-of-N from scratch only, initial policy", "tab:olive"),
    "aide": ("AIDE, initial policy", "tab:red"),
}
JOBS = (*ARMS, *BASELINES)  # what --arms picks from
# --retime K: the duration arms' second-half programs run again side by side in one sitting
# (retime.py), written into the default run's dir: finding 2's figure where it is there
RETIME_FILE = "retime_duration.json"
# What a finished run leaves that the aggregation reads: packed per run into --archive, so a grid
# built over sittings on fresh machines (nothing under --runs-dir survives) keeps its runs.
ARCHIVED = (
    "config.yaml",
    "report.json",
    "samples.jsonl",
    "metrics.jsonl",
    "wall_clock_s",
    "policy_fingerprint",
    *(f"equal_budget_{m}.json" for m in BASELINES),
    RETIME_FILE,
)
GRID_FILE = "paper_miniature_grid.json"  # inside each archive: the settings the run was made with
FAILURE_SCORE = -10.0  # the paper's Figure 9: a sample without a valid submission scores -10
NOISE_SE = 2.0
MIN_SEEDS = 3
QUICK = {"seeds": 1, "updates": 6, "eval_samples": 4}
OWNED_KEYS = (
    "seed",
    "tasks.ids",
    "hydra.run.dir",
    "resume",
    "learner.max_updates",
    "eval_samples",
    *(o.split("=", 1)[0] for arm in ARMS.values() for o in arm),
)
FINDINGS: dict[str, dict[str, str]] = {
    "rl_vs_best_of_n": {
        "title": "1a. RL beats best-of-N of the initial policy at equal executions",
        "paper": "Figs. 1, 7: RL's best rises above static use of the model over time",
        "figure": "final best private score, RL - best-of-N (signed: + is better)",
        "unit": "",
    },
    "rl_vs_aide": {
        "title": "1b. RL beats AIDE driven by the initial policy at equal executions",
        "paper": "Figs. 1, 7: RL (Qwen2.5-3B) ends above AIDE (Claude-3.5-Sonnet) on most tasks",
        "figure": "final best private score, RL - AIDE (signed: + is better)",
        "unit": "",
    },
    "rl_vs_scratch_best_of_n": {
        "title": "1c. RL beats best-of-N from scratch prompts only at equal executions",
        "paper": "Figs. 1, 7 (best-of-N as usually run: every sample from scratch)",
        "figure": "final best private score, RL - scratch-only best-of-N (signed: + is better)",
        "unit": "",
    },
    "duration": {
        "title": "2. Duration-aware gradients choose slower programs",
        "paper": "Fig. 8: longer mean execution time with it (gradient boosting over logistic regression)",
        "figure": "mean execution time of programs run in the 2nd half, default - none: run again "
        "side by side in one sitting (--retime), else each program at its typical time",
        "unit": " s",
    },
    "partial_credit": {
        "title": "3. Partial credit (instrumentation) speeds learning",
        "paper": "Fig. 9: mean score (-10 if invalid) grows faster; runs without it more often never valid",
        "figure": "mean over updates of the mean score (-10 if invalid), default - no partial credit",
        "unit": "",
    },
    "improve": {
        "title": "4. Improve prompts beat scratch only",
        "paper": "Table 4: better on 10 of 12 tasks, +8 % on average",
        "figure": "final best private score, default - scratch only (signed: + is better)",
        "unit": "",
    },
}


# ---- pure figures ---------------------------------------------------------------------------
def signed(score: float | None, lower: bool) -> float | None:
    """A score oriented so that higher is better (the paper's reward of a valid program)."""
    if score is None or not math.isfinite(float(score)):
        return None
    return -float(score) if lower else float(score)


def paper_score(sample: dict[str, Any], lower: bool) -> float:
    """Figure 9's per-sample quantity: the signed score of a valid submission, else -10."""
    s = signed(sample.get("score"), lower) if sample.get("valid") else None
    return FAILURE_SCORE if s is None else s


def learning_curve(
    samples: list[dict[str, Any]], task: str, lower: bool, updates: int
) -> dict[str, Any]:
    """Per policy version (< ``updates``) of one task's training samples: the mean paper score,
    the valid fraction and the mean signed score of the valid ones; their means over versions
    (``paper_score_mean``: each version weighs the same) and ``never_valid``."""
    mine = [s for s in samples if s.get("task_id") == task and int(s["policy_version"]) < updates]
    versions = sorted({int(s["policy_version"]) for s in mine})
    curve: dict[str, list[Any]] = {
        "version": versions,
        "paper_score": [],
        "valid_frac": [],
        "valid_score": [],
    }
    for v in versions:
        rows = [s for s in mine if int(s["policy_version"]) == v]
        ok = [
            x
            for x in (signed(s.get("score"), lower) for s in rows if s.get("valid"))
            if x is not None
        ]
        curve["paper_score"].append(sum(paper_score(s, lower) for s in rows) / len(rows))
        curve["valid_frac"].append(len(ok) / len(rows))
        curve["valid_score"].append(sum(ok) / len(ok) if ok else None)
    return {
        "curve": curve,
        "paper_score_mean": mean_se(curve["paper_score"])["mean"],
        "valid_frac_mean": mean_se(curve["valid_frac"])["mean"],
        "never_valid": bool(mine) and not any(s.get("valid") for s in mine),
    }


def exec_times(
    samples: list[dict[str, Any]], task: str, updates: int, typical: dict[str, float]
) -> dict[str, Any]:
    """Mean execution time of the task's programs that ran in the second half of training,
    measured (``exec_ran_s``) and at each program's typical time (``exec_mix_s``)."""
    mine = [s for s in samples if s.get("task_id") == task]
    half = duration_ablation.windows(mine, updates)["second_half"]
    figs = duration_ablation.sample_figures(half, typical)
    return {
        "exec_ran_s_second_half": figs["duration_ran_s"],
        "exec_mix_s_second_half": figs["duration_mix_s"],
        "n_ran_second_half": figs["n_ran"],
    }


def winner_kind(
    samples: list[dict[str, Any]], task: str, closing: dict[str, Any], lower: bool
) -> str | None:
    """The prompt kind of the program RL's result is (``equal_budget.rl_final``'s choice): the
    first training sample to reach the best public score, unless the closing best-of-K's best is
    strictly better on public, then the closing winner's ``best_kind``; None without a valid one."""
    best: dict[str, Any] | None = None
    for s in sorted(
        (s for s in samples if s.get("task_id") == task), key=lambda r: float(r.get("t") or 0.0)
    ):
        pub = equal_budget._valid_score(s)
        if pub is not None and embedded_rl._better(
            pub, None if best is None else best["score"], lower
        ):
            best = s
    c_public = closing.get("best_public")
    if c_public is not None and embedded_rl._better(
        float(c_public), None if best is None else best["score"], lower
    ):
        return closing.get("best_kind")
    return None if best is None else best.get("kind")


def improvement(a: float | None, b: float | None, lower: bool) -> float | None:
    """How much better ``a`` is than ``b`` (positive: better), in the task's units."""
    if a is None or b is None:
        return None
    return (b - a) if lower else (a - b)


def verdict(d: dict[str, Any], min_seeds: int = MIN_SEEDS) -> str:
    """``reproduced`` / ``not reproduced`` / ``within noise`` / ``too few seeds`` for a paired
    difference ``{"mean", "se", "n"}`` oriented so that positive is the paper's direction (rule
    in the module docstring)."""
    if d["n"] < min_seeds or d["mean"] is None or d["se"] is None:
        return "too few seeds"
    if d["mean"] - NOISE_SE * d["se"] > 0:
        return "reproduced"
    if d["mean"] + NOISE_SE * d["se"] <= 0:
        return "not reproduced"
    return "within noise"


def paired(ref: dict[int, float | None], cand: dict[int, float | None], diff) -> dict[str, Any]:
    """``diff(cand, ref)`` over the seeds both have (a seed where either lacks the figure is
    counted in ``missing``), its mean, s.e., n, the per-seed values and the verdict."""
    seeds = sorted(set(ref) | set(cand))
    per_seed = {s: diff(cand.get(s), ref.get(s)) for s in seeds}
    values = [v for v in per_seed.values() if v is not None]
    d = mean_se(values)
    return {
        **d,
        "seeds": [s for s, v in per_seed.items() if v is not None],
        "per_seed": {str(s): v for s, v in per_seed.items()},
        "missing": sum(v is None for v in per_seed.values()),
        "verdict": verdict(d),
    }


# ---- one run dir ----------------------------------------------------------------------------
def policy_fingerprint(run_dir: Path, report: dict[str, Any]) -> str | None:
    """The first 16 hex digits of the sha256 of the run's initial policy weights, or None where
    neither the weights nor a recorded fingerprint are there. Two builds of the same
    configuration need not be one policy (the revision programs' measured scores enter the
    corpus, and some of those programs are not seeded), so runs are compared only with runs of
    the same initial policy. Written into the run dir (and so into the archive) the first time
    it is computed."""
    import hashlib

    recorded = run_dir / "policy_fingerprint"
    if recorded.is_file():
        return recorded.read_text().strip() or None
    weights = Path(str((report.get("initial") or {}).get("model", ""))) / "model.safetensors"
    if not weights.is_file():
        return None
    digest = hashlib.sha256()
    with weights.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    recorded.write_text(digest.hexdigest()[:16] + "\n")
    return digest.hexdigest()[:16]


def same_policy_runs(runs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Keep the runs whose initial policy is their (task, seed)'s default run's; every finding
    compares an arm with the default arm of the same seed, so a run of another build would
    confound the build with the arm. Returns the kept runs and a line per dropped run."""
    ref = {(r["task"], r["seed"]): r.get("policy") for r in runs if r["arm"] == "default"}
    kept, dropped = [], []
    for r in runs:
        mine, theirs = r.get("policy"), ref.get((r["task"], r["seed"]))
        if mine is None or theirs is None or mine == theirs:
            kept.append(r)
        else:
            dropped.append(
                f"{r['task']} {r['arm']} seed {r['seed']}: policy {mine}, default's {theirs}"
            )
    return kept, dropped


def summarise_run(run_dir: Path, typical: dict[str, float]) -> dict[str, Any]:
    """Every figure of one finished RL run (one task): see the module docstring."""
    report = json.loads((run_dir / "report.json").read_text())
    samples = read_jsonl(run_dir / "samples.jsonl")
    updates = embedded_rl.max_updates(run_dir)
    tasks = report["trained"]["per_seed"][0]["tasks"]
    if len(tasks) != 1:
        raise ValueError(
            f"{run_dir}: one task per run (the budget is per task), found {list(tasks)}"
        )
    task, closing = next(iter(tasks.items()))
    lower = bool(closing["lower_is_better"])
    row = equal_budget.seed_rows(run_dir, None, None)[0]
    learn = learning_curve(samples, task, lower, updates)
    timing = run_dir / "wall_clock_s"
    return {
        "run_dir": str(run_dir),
        "task": task,
        "seed": report.get("seed"),
        "updates": updates,
        "direction": row["direction"],
        "budget_executions": row["budget_executions"],
        "final_private": row["rl_private"],
        "final_public": row["rl_public"],
        "rl_curve": row["rl_curve"],
        "winner_kind": winner_kind(samples, task, closing, lower),
        "closing_best_kind": closing.get("best_kind"),
        **exec_times(samples, task, updates, typical),
        "paper_score_mean": learn["paper_score_mean"],
        "valid_frac_mean": learn["valid_frac_mean"],
        "never_valid": learn["never_valid"],
        "curve": learn["curve"],
        "wall_clock_s": float(timing.read_text()) if timing.is_file() else None,
        "policy": policy_fingerprint(run_dir, report),
    }


def baseline_row(run_dir: Path, method: str, task: str) -> dict[str, Any] | None:
    """One baseline's figures from the default run's dir, None where it has not run."""
    path = run_dir / f"equal_budget_{method}.json"
    summary = equal_budget.baseline_task(
        json.loads(path.read_text()) if path.is_file() else None, task
    )
    if summary is None:
        return None
    elapsed = summary.get("elapsed_s") or []
    return {
        "final_private": summary.get("best_score"),
        "final_public": summary.get("best_public"),
        "executions": summary.get("k"),
        "curve": summary.get("best_vs_executions"),
        "valid_frac": summary.get("valid_frac"),
        "wall_s": elapsed[-1] if elapsed else None,
    }


# ---- across runs ----------------------------------------------------------------------------
def _by_seed(runs: list[dict[str, Any]], arm: str, task: str, key: str) -> dict[int, Any]:
    return {int(r["seed"]): r.get(key) for r in runs if r["arm"] == arm and r["task"] == task}


def kind_shares(kinds: list[str | None]) -> dict[str, Any]:
    """Each prompt kind's share of the winners (``none``: runs without a valid program)."""
    return embedded_rl._kind_shares(kinds)


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per task and finding: the paired difference (positive = the paper's direction), its s.e.,
    n and verdict; plus per arm the never-valid count and the winners' prompt kinds."""
    out: dict[str, Any] = {}
    for task in dict.fromkeys(r["task"] for r in runs):
        lower = next(r["direction"] for r in runs if r["task"] == task) == "lower_is_better"
        better = lambda c, r: improvement(c, r, lower)  # noqa: E731
        minus = lambda c, r: None if c is None or r is None else c - r  # noqa: E731
        final = {arm: _by_seed(runs, arm, task, "final_private") for arm in (*ARMS, *BASELINES)}
        typical_time = paired(
            _by_seed(runs, "no_duration", task, "exec_mix_s_second_half"),
            _by_seed(runs, "default", task, "exec_mix_s_second_half"),
            minus,
        )
        # a seed counts where its no_duration run is in the pairs (same initial policy)
        paired_none = _by_seed(runs, "no_duration", task, "final_private")
        retimed = {
            s: v
            for s, v in _by_seed(runs, "default", task, "retime").items()
            if v and s in paired_none
        }
        findings = {
            "rl_vs_best_of_n": paired(final["initial_bon"], final["default"], better),
            "rl_vs_scratch_best_of_n": paired(final["scratch_bon"], final["default"], better),
            "rl_vs_aide": paired(final["aide"], final["default"], better),
            "duration": (
                paired(
                    {s: v["no_duration_s"] for s, v in retimed.items()},
                    {s: v["default_s"] for s, v in retimed.items()},
                    minus,
                )
                if retimed
                else typical_time
            ),
            "partial_credit": paired(
                _by_seed(runs, "no_partial_credit", task, "paper_score_mean"),
                _by_seed(runs, "default", task, "paper_score_mean"),
                minus,
            ),
            "improve": paired(final["no_improve"], final["default"], better),
        }
        # the secondary figures a reader checks beside each verdict
        findings["duration"]["measure"] = "retimed" if retimed else "typical_time"
        if retimed:
            findings["duration"]["typical_time_difference"] = typical_time
        # like for like: RL from scratch prompts only against best-of-N from scratch prompts only
        findings["rl_vs_scratch_best_of_n"]["scratch_only_rl"] = paired(
            final["scratch_bon"], final["no_improve"], better
        )
        findings["duration"]["score_difference"] = paired(
            final["no_duration"], final["default"], better
        )
        findings["duration"]["exec_ran_s_difference"] = paired(
            _by_seed(runs, "no_duration", task, "exec_ran_s_second_half"),
            _by_seed(runs, "default", task, "exec_ran_s_second_half"),
            minus,
        )
        findings["partial_credit"]["never_valid"] = {
            arm: sum(bool(v) for v in _by_seed(runs, arm, task, "never_valid").values())
            for arm in ("default", "no_partial_credit")
        }
        ref = mean_se(list(final["no_improve"].values()))["mean"]
        d = findings["improve"]["mean"]
        findings["improve"]["relative"] = None if d is None or not ref else d / abs(ref)
        arms = {
            arm: {
                "seeds": sorted(final[arm]),
                "final_private": mean_se(list(final[arm].values())),
                "budget_executions": _by_seed(runs, arm, task, "budget_executions"),
                "never_valid": sum(
                    bool(v) for v in _by_seed(runs, arm, task, "never_valid").values()
                ),
                "winner_kind_share": kind_shares(
                    list(_by_seed(runs, arm, task, "winner_kind").values())
                ),
            }
            for arm in (*ARMS, *BASELINES)
            if final[arm]
        }
        out[task] = {
            "direction": "lower_is_better" if lower else "higher_is_better",
            "findings": findings,
            "arms": arms,
        }
    return out


def readme_table(summary: dict[str, Any]) -> str:
    """The README's table: finding, the paper's number, ours (mean ± s.e. over n seeds), verdict."""
    lines = [
        "| finding | paper | task | ours: paired difference, mean ± s.e. (seeds) | verdict |",
        "|---|---|---|---|---|",
    ]
    for key, info in FINDINGS.items():
        for task, s in summary.items():
            d = s["findings"][key]
            spec = ".2f" if key in ("duration", "partial_credit") else ".4f"
            ours = (
                fmt_mean_se(d, spec)
                + (info["unit"] if d["mean"] is not None else "")
                + f" ({d['n']})"
            )
            if key == "improve" and d.get("relative") is not None:
                ours += f", {100 * d['relative']:+.1f} %"
            if key == "partial_credit":
                nv = d["never_valid"]
                ours += f"; never valid {nv['default']} vs {nv['no_partial_credit']}"
            lines.append(
                f"| {info['title']} | {info['paper']} | {task} | {ours} | {d['verdict']} |"
            )
    return "\n".join(lines)


# ---- the figure -----------------------------------------------------------------------------
def _mean_curves(curves: list[list[float | None]]) -> tuple[list[int], list[float]]:
    mean = equal_budget._mean_curve([c for c in curves if c])
    xs = [i for i, v in enumerate(mean) if v is not None]
    return xs, [mean[i] for i in xs]


def _per_version(runs: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    by_v: dict[int, list[float]] = {}
    for r in runs:
        for v, x in zip(r["curve"]["version"], r["curve"][key]):
            if x is not None:
                by_v.setdefault(v, []).append(x)
    vs = sorted(by_v)
    return vs, [sum(by_v[v]) / len(by_v[v]) for v in vs]


def plot(
    runs: list[dict[str, Any]], baselines: list[dict[str, Any]], summary: dict[str, Any], path: Path
) -> Path:
    """One row per task, one panel per finding (means over seeds): best private score against
    executions (RL, best-of-N, AIDE); execution time per step (with / without duration weighting);
    mean score per step, -10 if invalid (with / without partial credit); final best per seed,
    paired (with / without improve prompts)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(summary)
    fig, axes = plt.subplots(len(tasks), 4, figsize=(18, 3.8 * len(tasks)), squeeze=False)
    for row, task in zip(axes, tasks):
        mine = [r for r in runs if r["task"] == task]
        arm = lambda a: [r for r in mine if r["arm"] == a]  # noqa: E731
        ax = row[0]
        for name, curves, colour in (
            ("RL (training, then best-of-K)", [r["rl_curve"] for r in arm("default")], "tab:blue"),
            *(
                (
                    label,
                    [b["curve"] for b in baselines if b["task"] == task and b["method"] == m],
                    colour,
                )
                for m, (label, colour) in BASELINE_STYLE.items()
            ),
        ):
            xs, ys = _mean_curves(curves)
            if xs:
                ax.plot([x + 1 for x in xs], ys, color=colour, label=name)
        ax.set(
            title=f"{task}\n1. best private score (chosen on public)",
            xlabel="program executions",
            ylabel=summary[task]["direction"].replace("_", " "),
        )
        for ax, key, (a, b), ylabel, title in (
            (
                row[1],
                "exec",
                ("default", "no_duration"),
                "seconds",
                "2. mean execution time of programs run",
            ),
            (
                row[2],
                "paper_score",
                ("default", "no_partial_credit"),
                "score (-10 if invalid)",
                "3. mean score per step, -10 if invalid",
            ),
        ):
            for name, colour in ((a, "tab:blue"), (b, "tab:orange")):
                rs = arm(name)
                if key == "exec":
                    xs, ys = _per_version(
                        [
                            {
                                "curve": {
                                    "version": r["exec_curve"]["version"],
                                    "exec": r["exec_curve"]["exec_ran_s"],
                                }
                            }
                            for r in rs
                        ],
                        "exec",
                    )
                else:
                    xs, ys = _per_version(rs, key)
                if xs:
                    ax.plot(xs, ys, color=colour, label=f"{name} ({len(rs)} seeds)")
                retimed = [r["retime"] for r in arm("default") if r.get("retime")]
                if key == "exec" and retimed:  # the same programs run again side by side
                    side = "default_s" if name == "default" else "no_duration_s"
                    mean = sum(x[side] for x in retimed) / len(retimed)
                    ax.axhline(mean, color=colour, ls="--", label=f"{name}, 2nd half retimed")
            if key == "exec":
                title += "\n(solid: as recorded, with each sitting's load)"
            ax.set(title=title, xlabel="training step (policy version)", ylabel=ylabel)
        ax = row[3]  # paired: one line per seed from the default to scratch only, the mean in black
        pairs = (
            _by_seed(runs, "default", task, "final_private"),
            _by_seed(runs, "no_improve", task, "final_private"),
        )
        for seed in sorted(set(pairs[0]) & set(pairs[1])):
            if pairs[0][seed] is not None and pairs[1][seed] is not None:
                ax.plot([0, 1], [pairs[0][seed], pairs[1][seed]], "o-", color="0.6", lw=0.8)
        for i, values in enumerate(pairs):
            vals = [v for v in values.values() if v is not None]
            if vals:
                ax.plot(i, sum(vals) / len(vals), "s", color="k", ms=8)
        ax.set_xticks([0, 1], ["improve + scratch", "scratch only"])
        ax.set_xlim(-0.5, 1.5)
        ax.set(
            title="4. final best private score\n(grey: one seed each, black: mean)",
            ylabel=summary[task]["direction"].replace("_", " "),
        )
        for ax in row[:3]:
            if ax.get_legend_handles_labels()[0]:  # a panel without runs yet has nothing to label
                ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def exec_curve(samples: list[dict[str, Any]], task: str, updates: int) -> dict[str, list[Any]]:
    """Measured mean execution time of the programs that ran, per policy version (panel 2)."""
    per = duration_ablation.per_version(
        [s for s in samples if s.get("task_id") == task and int(s["policy_version"]) < updates]
    )
    return {"version": list(per), "exec_ran_s": [f["duration_ran_s"] for f in per.values()]}


# ---- launch ---------------------------------------------------------------------------------
def run_dir_of(runs_dir: Path, task: str, arm: str, seed: int) -> Path:
    return runs_dir / task / arm / f"seed{seed}"


def train_argv(
    run_dir: Path,
    task: str,
    arm: str,
    seed: int,
    updates: int | None,
    eval_samples: int | None,
    overrides: list[str],
) -> list[str]:
    """The ``mlerl train`` overrides of one run: a fresh one, or ``resume=DIR`` for an
    interrupted one (a resumed run keeps its own config)."""
    if (run_dir / "config.yaml").is_file():
        return [f"resume={run_dir}"]
    return [
        f"seed={seed}",
        f"tasks.ids=[{task}]",
        f"hydra.run.dir={run_dir}",
        *ARMS[arm],
        *([f"learner.max_updates={updates}"] if updates is not None else []),
        *([f"eval_samples={eval_samples}"] if eval_samples is not None else []),
        *overrides,
    ]


def launch_train(run_dir: Path, argv: list[str]) -> None:
    import time

    cmd = [str(REPO / ".venv" / "bin" / "mlerl"), "train", *argv]
    print("+", " ".join(cmd), flush=True)
    t0 = time.time()
    subprocess.run(cmd, cwd=REPO, check=True)
    # a resumed run adds its time to the interrupted sitting's
    prior = (
        float((run_dir / "wall_clock_s").read_text())
        if (run_dir / "wall_clock_s").is_file()
        else 0.0
    )
    (run_dir / "wall_clock_s").write_text(f"{prior + time.time() - t0:.1f}")


def plan(
    runs_dir: Path, tasks: list[str], seeds: list[int], arms: list[str] | None = None
) -> list[tuple[str, str, int, str]]:
    """The jobs still to do, in launch order: (``train`` or a baseline method, task, seed, arm).
    ``arms``: the RL arms and baselines to launch (default all); a baseline reads the default
    run of its seed, which must have finished by the time it runs."""
    wanted = set(JOBS if arms is None else arms)
    jobs = []
    for seed in seeds:
        for task in tasks:
            for arm in ARMS:
                if (
                    arm in wanted
                    and not (run_dir_of(runs_dir, task, arm, seed) / "report.json").is_file()
                ):
                    jobs.append(("train", task, seed, arm))
            default = run_dir_of(runs_dir, task, "default", seed)
            for method in BASELINES:
                if method in wanted and not (default / f"equal_budget_{method}.json").is_file():
                    jobs.append((method, task, seed, "default"))
    return jobs


def run_jobs(
    jobs: list[tuple[str, str, int, str]],
    runs_dir: Path,
    updates: int | None,
    eval_samples: int | None,
    overrides: list[str],
    archive: Path | None = None,
) -> list[str]:
    """Run the jobs one after the other; a failed one is reported and skipped (returned). Each
    finished job's run dir is packed into ``archive`` (when given) at once, so a sitting cut off
    later keeps it."""
    failed = []
    settings = grid_settings(updates, eval_samples, overrides)
    for what, task, seed, arm in jobs:
        run_dir = run_dir_of(runs_dir, task, arm, seed)
        try:
            if what == "train":
                run_dir.parent.mkdir(parents=True, exist_ok=True)
                launch_train(
                    run_dir, train_argv(run_dir, task, arm, seed, updates, eval_samples, overrides)
                )
            else:
                if not (run_dir / "report.json").is_file():
                    raise RuntimeError("the default run has not finished")
                report = json.loads((run_dir / "report.json").read_text())
                n = equal_budget.budget(
                    read_jsonl(run_dir / "samples.jsonl"), task, int(report["k"])
                )
                equal_budget.launch(run_dir, report["initial"]["model"], what, seed, n)
            if archive is not None:
                archive_run(run_dir, archive_path(archive, task, arm, seed), settings)
        except (subprocess.CalledProcessError, RuntimeError, OSError, ValueError) as exc:
            msg = f"{what} {task} seed {seed} {arm}: {exc}"
            print(
                f"paper_miniature: FAILED {msg}; the next sitting retries it",
                file=sys.stderr,
                flush=True,
            )
            failed.append(msg)
    return failed


# ---- archive: the grid across sittings on fresh machines --------------------------------------
def grid_settings(
    updates: int | None, eval_samples: int | None, overrides: list[str]
) -> dict[str, Any]:
    """What every run of one grid shares besides its task, arm and seed."""
    return {"updates": updates, "eval_samples": eval_samples, "overrides": list(overrides)}


def archive_path(archive: Path, task: str, arm: str, seed: int) -> Path:
    return archive / f"{task}__{arm}__seed{seed}.tar.gz"


def archive_run(run_dir: Path, dest: Path, settings: dict[str, Any]) -> bool:
    """Pack a finished run's ``ARCHIVED`` files and the grid's settings into ``dest`` (a
    .tar.gz whose bytes depend only on the contents, so an unchanged run rewrites nothing).
    Returns whether ``dest`` changed; a run without ``report.json`` is not packed."""
    import gzip
    import io
    import tarfile

    if not (run_dir / "report.json").is_file():
        return False
    members = {GRID_FILE: json.dumps(settings, sort_keys=True).encode()}
    members.update({n: (run_dir / n).read_bytes() for n in ARCHIVED if (run_dir / n).is_file()})
    buf = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w") as tar,
    ):
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(members[name]), 0o644
            tar.addfile(info, io.BytesIO(members[name]))
    data = buf.getvalue()
    if dest.is_file() and dest.read_bytes() == data:
        return False
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(dest)
    return True


def restore_runs(
    archive: Path,
    runs_dir: Path,
    tasks: list[str],
    seeds: list[int],
    settings: dict[str, Any],
) -> tuple[list[str], list[str]]:
    """Unpack into ``runs_dir`` each archived run of this grid (tasks x arms x seeds) whose run
    dir has no ``report.json`` here, or whose archive holds baselines the dir lacks. Only the
    ``ARCHIVED`` names are written, as plain files. An archive made with other settings
    (updates, K, overrides) is not mixed in: it is listed in the second return value."""
    import tarfile

    restored, refused = [], []
    for task in tasks:
        for arm in ARMS:
            for seed in seeds:
                src = archive_path(archive, task, arm, seed)
                if not src.is_file():
                    continue
                run_dir = run_dir_of(runs_dir, task, arm, seed)
                with tarfile.open(src, "r:gz") as tar:
                    files = {
                        m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
                        for m in tar.getmembers()
                        if m.isfile() and (m.name in ARCHIVED or m.name == GRID_FILE)
                    }
                made_with = json.loads(files.pop(GRID_FILE, b"null"))
                if made_with != settings:
                    refused.append(f"{src.name}: made with {made_with}, this grid is {settings}")
                    continue
                if (run_dir / "report.json").is_file():  # a finished run: add its baselines only
                    files = {
                        n: data
                        for n, data in files.items()
                        if (n.startswith("equal_budget_") or n == RETIME_FILE)
                        and not (run_dir / n).is_file()
                    }
                if not files:
                    continue
                run_dir.mkdir(parents=True, exist_ok=True)
                for name, data in files.items():
                    (run_dir / name).write_bytes(data)
                restored.append(src.name)
    return restored, refused


# ---- aggregate ------------------------------------------------------------------------------
def collect(
    runs_dir: Path, tasks: list[str], seeds: list[int]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every finished run's figures and every baseline's, for the given tasks and seeds."""
    runs, baselines = [], []
    for task in tasks:
        found = {
            (arm, seed): run_dir_of(runs_dir, task, arm, seed) for arm in ARMS for seed in seeds
        }
        found = {k: d for k, d in found.items() if (d / "report.json").is_file()}
        # typical times: over every run of the two duration arms of this task (both methods alike)
        pooled = [
            s
            for (arm, _), d in found.items()
            if arm in ("default", "no_duration")
            for s in read_jsonl(d / "samples.jsonl")
        ]
        typical = duration_ablation.typical_durations(pooled)
        for (arm, seed), d in found.items():
            r = summarise_run(d, typical)
            if r["task"] != task:
                raise ValueError(f"{d}: ran task {r['task']}, expected {task}")
            samples = read_jsonl(d / "samples.jsonl")
            runs.append(
                {
                    "arm": arm,
                    **r,
                    "seed": seed,
                    "exec_curve": exec_curve(samples, task, r["updates"]),
                }
            )
            if arm == "default":
                runs[-1]["retime"] = retime_row(d)
                for method in BASELINES:
                    b = baseline_row(d, method, task)
                    if b is not None:
                        b.update({"method": method, "task": task, "seed": seed})
                        baselines.append(b)
                        runs.append(
                            {
                                "arm": method,
                                "task": task,
                                "seed": seed,
                                "direction": r["direction"],
                                "final_private": b["final_private"],
                                "final_public": b["final_public"],
                                "budget_executions": b["executions"],
                                "policy": r["policy"],  # a baseline samples the run's own
                            }
                        )
    return runs, baselines


def retime_row(run_dir: Path) -> dict[str, Any] | None:
    """The seed's duration arms retimed side by side (``RETIME_FILE`` in the default run's dir,
    side a = default, b = no_duration), or None where it was not run."""
    path = run_dir / RETIME_FILE
    if not path.is_file():
        return None
    r = json.loads(path.read_text())
    return {
        "default_s": r["a"]["mean_s"],
        "no_duration_s": r["b"]["mean_s"],
        "n": [r["a"]["n"], r["b"]["n"]],
        "k": r["k"],
    }


def retime_jobs(runs_dir: Path, tasks: list[str], seeds: list[int], k: int) -> list[str]:
    """For each task and seed whose two duration arms have finished and have not been retimed:
    run ``retime.measure`` (k programs of each, side by side) and write ``RETIME_FILE`` into the
    default run's dir. A failure is reported and returned; the next sitting retries it."""
    failed = []
    for task in tasks:
        for seed in seeds:
            a = run_dir_of(runs_dir, task, "default", seed)
            b = run_dir_of(runs_dir, task, "no_duration", seed)
            done = all((d / "report.json").is_file() for d in (a, b))
            if not done or (a / RETIME_FILE).is_file():
                continue
            try:
                result = retime.measure(a, b, k, seed)
                (a / RETIME_FILE).write_text(json.dumps(result, indent=1))
            except (subprocess.CalledProcessError, RuntimeError, OSError, ValueError) as exc:
                msg = f"retime {task} seed {seed}: {exc}"
                print(
                    f"paper_miniature: FAILED {msg}; the next sitting retries it", file=sys.stderr
                )
                failed.append(msg)
    return failed


def lost_runs(path: Path, runs: list[dict[str, Any]]) -> list[str]:
    """The runs (arm task seed) that the results file at ``path`` holds and ``runs`` lacks: what
    writing ``runs`` over it would lose (none when there is no readable file)."""
    try:
        old = json.loads(path.read_text()).get("runs", [])
    except (OSError, ValueError, AttributeError):
        return []
    key = lambda r: (r["arm"], r["task"], int(r["seed"]))  # noqa: E731
    have = {key(r) for r in runs}
    return [f"{a} {t} seed {s}" for a, t, s in sorted({key(r) for r in old} - have)]


def parse_args(argv: list[str]) -> argparse.Namespace:
    overrides = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=3, help="seeds per arm and task (default 3)")
    p.add_argument(
        "--first-seed",
        type=int,
        default=3,
        help="first seed (default 3: seeds 0-2 chose the default)",
    )
    p.add_argument(
        "--tasks", default=f"{DEFAULT_TASK},{SECOND_TASK}", help="comma-separated task ids"
    )
    p.add_argument(
        "--updates", type=int, default=None, help="learner.max_updates (default: the config's)"
    )
    p.add_argument(
        "--eval-samples",
        type=int,
        default=None,
        help="K of the closing best-of-K (default: the config's)",
    )
    p.add_argument("--runs-dir", type=Path, default=Path("/tmp/paper_miniature"))
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--name", default="paper_miniature")
    p.add_argument(
        "--no-launch",
        action="store_true",
        help="launch no training or baseline: aggregate the finished runs (--retime still runs)",
    )
    p.add_argument(
        "--arms",
        type=lambda v: [x for x in v.split(",") if x],
        default=None,
        help=f"what to launch, of {','.join(JOBS)} (default all; every finished run is still "
        "aggregated); a baseline needs its seed's default run",
    )
    p.add_argument(
        "--archive",
        type=Path,
        default=None,
        help="where each finished run is packed and restored from, so a grid built over sittings "
        "on fresh machines keeps its runs (default OUT/NAME_runs; none with --quick)",
    )
    p.add_argument("--no-archive", action="store_true", help="neither restore nor pack runs")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="write the results even where OUT/NAME.json holds runs this aggregation lacks "
        "(by default that is refused: a subset or another runs dir would replace a whole grid)",
    )
    p.add_argument(
        "--retime",
        type=int,
        default=0,
        metavar="K",
        help="after the runs, run K second-half programs of each duration arm again side by side "
        "per seed (retime.py) for finding 2 (default 0: off; the figure is then the typical time)",
    )
    p.add_argument(
        "--chosen-on",
        type=int_list,
        default=[0, 1, 2],
        help="seeds the default configuration was chosen on (default 0,1,2; recorded in the results)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"one seed, the first task, learner.max_updates={QUICK['updates']}, eval_samples={QUICK['eval_samples']}",
    )
    args = p.parse_args(argv)
    args.overrides = overrides
    args.tasks = [t for t in args.tasks.split(",") if t]
    if args.quick:
        args.seeds, args.tasks = QUICK["seeds"], args.tasks[:1]
        args.updates = QUICK["updates"] if args.updates is None else args.updates
        args.eval_samples = (
            QUICK["eval_samples"] if args.eval_samples is None else args.eval_samples
        )
    if args.seeds < 1 or args.first_seed < 0 or not args.tasks:
        p.error("--seeds must be >= 1, --first-seed >= 0 and --tasks non-empty")
    if args.retime < 0:
        p.error("--retime must be >= 0")
    if (args.updates is not None and args.updates < 1) or (
        args.eval_samples is not None and args.eval_samples < 1
    ):
        p.error("--updates and --eval-samples must be >= 1")
    for ov in overrides:
        if "=" not in ov and not ov.startswith("~"):
            p.error(f"override {ov!r}: expected KEY=VALUE (Hydra syntax)")
        if duration_ablation.override_key(ov) in OWNED_KEYS:
            p.error(
                f"override {ov!r}: {duration_ablation.override_key(ov)} is set by this script per arm or by its options"
            )
    unknown = sorted(set(args.arms or ()) - set(JOBS))
    if unknown or args.arms == []:
        p.error(
            f"--arms {unknown or '(empty)'}: expected a comma-separated subset of {','.join(JOBS)}"
        )
    if args.no_archive or (args.quick and args.archive is None):
        args.archive = None
    elif args.archive is None:
        args.archive = args.out / f"{args.name}_runs"
    args.runs_dir = args.runs_dir.resolve()
    return args


def _shown(path: Path) -> str:
    """A path as the results file records it: relative to the repository when inside it."""
    path = path.resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


QUICK_CAVEAT = (
    "paper_miniature --quick: ONE seed and a few updates. This shows the shape of every panel; it "
    "proves nothing about any finding (the verdicts need >= 3 seeds and read 'too few seeds')."
)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.quick:
        print(QUICK_CAVEAT, flush=True)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    failed: list[str] = []
    settings = grid_settings(args.updates, args.eval_samples, args.overrides)
    if args.archive is not None:
        restored, refused = restore_runs(args.archive, args.runs_dir, args.tasks, seeds, settings)
        print(f"paper_miniature: {len(restored)} run(s) restored from {args.archive}", flush=True)
        for line in refused:
            print(f"paper_miniature: not restored, other settings: {line}", file=sys.stderr)
    if not args.no_launch:
        jobs = plan(args.runs_dir, args.tasks, seeds, args.arms)
        print(f"paper_miniature: {len(jobs)} job(s) to run under {args.runs_dir}", flush=True)
        failed = run_jobs(
            jobs, args.runs_dir, args.updates, args.eval_samples, args.overrides, args.archive
        )
    if args.retime:
        failed += retime_jobs(args.runs_dir, args.tasks, seeds, args.retime)
    runs, baselines = collect(args.runs_dir, args.tasks, seeds)
    if args.archive is not None:  # runs finished in an earlier sitting on this machine too
        for r in runs:
            if r["arm"] in ARMS:
                archive_run(
                    Path(r["run_dir"]),
                    archive_path(args.archive, r["task"], r["arm"], int(r["seed"])),
                    settings,
                )
    if not runs:
        print(f"paper_miniature: no finished runs under {args.runs_dir}", file=sys.stderr)
        return 1
    runs, other_policy = same_policy_runs(runs)
    for line in other_policy:
        print(f"paper_miniature: left out, another initial policy: {line}", file=sys.stderr)
    lost = lost_runs(args.out / f"{args.name}.json", runs)
    if lost and not args.overwrite:
        print(
            f"paper_miniature: not written: {args.out / f'{args.name}.json'} holds {len(lost)} "
            f"run(s) this aggregation of {args.runs_dir} lacks ({', '.join(lost[:6])}"
            f"{', ...' if len(lost) > 6 else ''}). Pass --out/--name for a separate result, or "
            "--overwrite to replace it.",
            file=sys.stderr,
        )
        return 1
    summary = summarise(runs)
    missing = plan(args.runs_dir, args.tasks, seeds)
    walls = [r["wall_clock_s"] for r in runs if r.get("wall_clock_s") is not None]
    result = {
        "benchmark": args.name,
        "command": command_line(),
        "commit": git_commit(),
        "machine": machine_info(),
        "quick": args.quick,
        "tasks": args.tasks,
        "seeds": seeds,
        "arms": ARMS,
        "overrides": args.overrides,
        "archive": None if args.archive is None else _shown(args.archive),
        "updates": args.updates,
        "eval_samples": args.eval_samples,
        "verdict_rule": (
            f"positive = the paper's direction; reproduced if mean - {NOISE_SE:g} s.e. > 0, not "
            f"reproduced if mean + {NOISE_SE:g} s.e. <= 0, else within noise; too few seeds "
            f"below {MIN_SEEDS} paired seeds"
        ),
        "selection": embedded_rl.selection(args.chosen_on, sorted({int(r["seed"]) for r in runs})),
        "training_wall_clock_s_total": sum(walls) if walls else None,
        "incomplete_jobs": [" ".join(map(str, j)) for j in missing],
        "failed_launches": failed,
        "left_out_other_policy": other_policy,
        "runs": runs,
        "baselines": baselines,
        "summary": summary,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(result, indent=1))
    print(readme_table(summary))
    print("plot:", plot(runs, baselines, summary, args.out / f"{args.name}.png"))
    if missing:
        print(
            f"paper_miniature: {len(missing)} job(s) not finished yet (run again to continue)",
            flush=True,
        )
    if args.quick:
        print(QUICK_CAVEAT, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
