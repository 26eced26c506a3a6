"""Duration-aware vs plain policy gradient on the embedded setup (paper Figure 8).

``python benchmarks/experiments/duration_ablation.py [--seeds 3 --first-seed 0 --updates 20 --eval-samples 8] [-- OVERRIDE ...]``

Launch. ONE Hydra multirun of ``mlerl train`` (the embedded policy, stand-in tasks, local
sandbox) over ``seed=F..F+S-1`` x ``learner.duration_weighting=none,paper``, each job stopping
after ``--updates`` learner updates and closing with the best-of-``--eval-samples`` report
(trained vs initial policy per task). Seeds vary slowest, so the two methods alternate
(none, paper, none, ...) and a drift in the host's load hits both alike. Run dirs land in
``--runs-dir`` (Hydra's ``hydra.sweep.dir``; one subdir per job named by its method and seed).
Overrides after ``--`` are passed to every job (e.g. the tiny bootstrap of tests/cli); they are
left out of the subdir names. ``--no-launch`` only aggregates run dirs already there.

Aggregation, per run dir (method and seed from its ``config.yaml``):

- ``samples.jsonl``, grouped by the policy version that wrote each sample (the paper's
  "training step"): mean execution time of the programs that ran (``duration_ran_s``, the
  Figure 8 quantity; responses with no runnable program have no execution time), the same
  with each program at its typical time (``duration_mix_s``: the median over every run of
  that program text in all the runs compared, so it shows which programs the policy chose and
  not how busy the host was; identical programs at version 0 ran 1-4 s apart between runs
  under load), mean of ``duration_s`` over all samples (those count 0 there, as in the learner's batches), mean
  reward, valid-submission fraction and sample count. The same figures over all versions, the
  first quarter (versions < ceil(U/4)), the second half (versions >= ceil(U/2)) and the last
  quarter (the last ceil(U/4) versions below U), where the two methods have had time to
  diverge (version 0 is the same initial policy for both); per task and per window (and per
  version, for the plot), the mean grader score of the valid samples (the Figure 8 partner of
  execution time: did the programs get faster *and* worse?);
- ``metrics.jsonl`` (learner stream): the batch means per update, and the training wall-clock
  ``train_s`` = time of the last update - ``started_at`` (the learner's start);
- ``report.json``: per task the trained and initial policy's best-of-K and mean-of-K (one
  seed each); ``job_s`` = its write time - the job's start (``.hydra/config.yaml``), which
  includes the embedded policy's build when its cache was cold (the first job).

Across seeds, per method: mean and standard error (sample std / sqrt(n), none for one seed).
Headline differences paper - none take s.e. = sqrt(se_paper^2 + se_none^2) (seeds treated as
independent) and are called "within noise" when |difference| <= 2 s.e.

Writes ``duration_ablation.json`` and ``duration_ablation.png`` (mean execution time, mean
reward and, per task, mean score of valid samples per step, one line per method with an s.e.
band) to ``--out`` (default ``benchmarks/results``) and prints a table.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common
from _common import (
    RESULTS,
    command_line,
    fmt_mean_se,
    git_commit,
    machine_info,
    mean_se,
    read_jsonl,
    write_json,
)

METHODS = ("none", "paper")
SAMPLE_FIGURES = ("duration_ran_s", "duration_mix_s", "duration_s", "reward", "valid_frac")
WINDOWS = ("all", "first_quarter", "second_half", "last_quarter")
UPDATE_FIGURES = {
    "batch/duration_mean": "duration_s",
    "batch/reward_mean": "reward",
    "batch/valid_frac": "valid_frac",
}
OWNED_KEYS = (
    "learner.duration_weighting",
    "seed",
    "learner.max_updates",
    "eval_samples",
    "hydra.sweep.dir",
    "hydra.sweep.subdir",
    "hydra.job.config.override_dirname.exclude_keys",
)
NOISE_SE = 2.0


@dataclass
class AblationConfig:
    """What to launch and where to read and write."""

    seeds: int = 3
    """Seeds first_seed..first_seed+seeds-1 per method."""
    first_seed: int = 0
    """The first seed (pick seeds the setting under test was not chosen on)."""
    updates: int = 20
    """``learner.max_updates`` of every job."""
    eval_samples: int = 8
    """K of the closing best-of-K report (``eval_samples``)."""
    runs_dir: Path = RESULTS / "duration_ablation_runs"
    """``hydra.sweep.dir``: one run dir per job under it."""
    out: Path = RESULTS
    """Where ``duration_ablation.json`` and ``.png`` go."""
    launch: bool = True
    """False (``--no-launch``): only aggregate the run dirs already in ``runs_dir``."""
    overrides: list[str] = field(default_factory=list)
    """Extra Hydra overrides for every job."""


# ---- arguments and launch -------------------------------------------------------------------
def override_key(override: str) -> str:
    """The config key an override sets (``+a.b@pkg=1`` -> ``a.b``), as Hydra compares keys."""
    return override.split("=", 1)[0].lstrip("~+").split("@", 1)[0]


def parse_args(argv: list[str] | None) -> AblationConfig:
    """The command line as a config; exits with a usage error naming the bad argument."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seeds", type=int, default=AblationConfig.seeds, help="seeds per method (default 3)"
    )
    parser.add_argument(
        "--first-seed",
        type=int,
        default=AblationConfig.first_seed,
        help="first seed (default 0); seeds run from it upwards",
    )
    parser.add_argument(
        "--updates",
        type=int,
        default=AblationConfig.updates,
        help="learner updates per run (default 20)",
    )
    parser.add_argument(
        "--eval-samples",
        type=int,
        default=AblationConfig.eval_samples,
        help="K of the closing best-of-K report (default 8)",
    )
    parser.add_argument(
        "--runs-dir", type=Path, default=AblationConfig.runs_dir, help="hydra.sweep.dir of the runs"
    )
    parser.add_argument("--out", type=Path, default=AblationConfig.out, help="results directory")
    parser.add_argument(
        "--no-launch", action="store_true", help="only aggregate the run dirs in --runs-dir"
    )
    parser.add_argument(
        "overrides", nargs="*", help="extra Hydra overrides for every job (after --)"
    )
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.updates < 1 or args.eval_samples < 1:
        parser.error("--seeds, --updates and --eval-samples must be >= 1")
    if args.first_seed < 0:
        parser.error("--first-seed must be >= 0")
    for ov in args.overrides:
        if "=" not in ov and not ov.startswith("~"):
            parser.error(f"override {ov!r}: expected KEY=VALUE (Hydra syntax)")
        if override_key(ov) in OWNED_KEYS:
            parser.error(
                f"override {ov!r}: {override_key(ov)} is set by this script "
                "(use --seeds, --updates, --eval-samples or --runs-dir)"
            )
    return AblationConfig(
        seeds=args.seeds,
        first_seed=args.first_seed,
        updates=args.updates,
        eval_samples=args.eval_samples,
        runs_dir=args.runs_dir.resolve(),
        out=args.out,
        launch=not args.no_launch,
        overrides=list(args.overrides),
    )


def launch_argv(cfg: AblationConfig) -> list[str]:
    """The one multirun command line; extra overrides are kept out of the run dirs' names."""
    excluded = sorted(
        {override_key(o) for o in cfg.overrides if not override_key(o).startswith("hydra")}
    )
    return [
        sys.executable, "-m", "mlerl.cli", "train", "-m",
        "seed=" + ",".join(str(s) for s in range(cfg.first_seed, cfg.first_seed + cfg.seeds)),
        "learner.duration_weighting=" + ",".join(METHODS),
        f"learner.max_updates={cfg.updates}",
        f"eval_samples={cfg.eval_samples}",
        f"hydra.sweep.dir={cfg.runs_dir}",
        f"hydra.job.config.override_dirname.exclude_keys=[{','.join(['learner.max_updates', 'eval_samples', *excluded])}]",
        *cfg.overrides,
    ]  # fmt: skip


def launch(cfg: AblationConfig) -> dict[str, Any]:
    """Run the sweep to completion. Refuses a runs dir that is not empty: a job would append to
    the files an earlier run left in its subdir."""
    if cfg.runs_dir.is_dir() and any(cfg.runs_dir.iterdir()):
        raise SystemExit(
            f"duration_ablation: {cfg.runs_dir} is not empty; aggregate its runs with "
            "--no-launch or remove the directory first"
        )
    argv = launch_argv(cfg)
    env = {**os.environ, "WANDB_SILENT": "true", "TOKENIZERS_PARALLELISM": "false"}
    print("launching:", " ".join(argv), flush=True)
    t0 = time.time()
    code = subprocess.run(argv, env=env, check=False).returncode
    wall = time.time() - t0
    if code != 0:
        raise SystemExit(
            f"duration_ablation: the sweep exited with {code} after {wall:.0f} s; "
            f"see the logs under {cfg.runs_dir}, then rerun with --no-launch to aggregate what finished"
        )
    return {"argv": ["python", *argv[1:]], "returncode": code, "wall_s": wall}


# ---- one run dir ----------------------------------------------------------------------------
def find_runs(runs_dir: Path) -> list[Path]:
    """Run dirs under ``runs_dir``: those holding both ``config.yaml`` and ``samples.jsonl``."""
    if not runs_dir.is_dir():
        return []
    return sorted(
        p.parent for p in runs_dir.rglob("samples.jsonl") if (p.parent / "config.yaml").is_file()
    )


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def typical_durations(samples: list[dict[str, Any]]) -> dict[str, float]:
    """Per program text, the median execution time over every run of it in ``samples`` (pass
    the samples of all runs of both methods)."""
    times: dict[str, list[float]] = {}
    for s in samples:
        if s["status"] != "not_run" and s.get("code"):
            times.setdefault(s["code"], []).append(float(s["duration_s"]))
    return {code: statistics.median(t) for code, t in times.items()}


def sample_figures(
    samples: list[dict[str, Any]], typical: dict[str, float] | None = None
) -> dict[str, Any]:
    """Means over ``samples``: execution time of programs that ran, the same with each program's
    typical time (``duration_mix_s``, from :func:`typical_durations`; None without it), duration
    (0 when none ran), reward, valid fraction.

    ``duration_mix_s`` measures which programs the policy chose, not how busy the host was while
    they ran: the same program text counts the same in every run and either method."""
    ran = [float(s["duration_s"]) for s in samples if s["status"] != "not_run"]
    mix = [
        typical[s["code"]]
        for s in samples
        if typical and s["status"] != "not_run" and s.get("code") in typical
    ]
    return {
        "n": len(samples),
        "n_ran": len(ran),
        "duration_ran_s": _mean(ran),
        "duration_mix_s": _mean(mix),
        "duration_s": _mean([float(s["duration_s"]) for s in samples]),
        "reward": _mean([float(s["reward"]) for s in samples]),
        "valid_frac": _mean([1.0 if s["valid"] else 0.0 for s in samples]),
    }


def task_scores(samples: list[dict[str, Any]]) -> dict[str, float | None]:
    """Per task: the mean grader score of the valid samples (tasks differ in metric and direction,
    so scores are never pooled across tasks)."""
    tasks = sorted({s["task_id"] for s in samples})
    return {
        t: _mean(
            [
                float(s["score"])
                for s in samples
                if s["task_id"] == t and s["valid"] and s["score"] is not None
            ]
        )
        for t in tasks
    }


def windows(samples: list[dict[str, Any]], updates: int) -> dict[str, list[dict[str, Any]]]:
    """The samples of each window, by the policy version that wrote them: ``all``, ``second_half``
    (versions >= ceil(U / 2)), ``first_quarter`` (versions < q) and ``last_quarter`` (U - q <=
    version < U), q = ceil(U / 4), so both quarters span q versions."""
    v = lambda s: int(s["policy_version"])  # noqa: E731
    q = math.ceil(updates / 4)
    return {
        "all": samples,
        "second_half": [s for s in samples if v(s) >= (updates + 1) // 2],
        "first_quarter": [s for s in samples if v(s) < q],
        "last_quarter": [s for s in samples if updates - q <= v(s) < updates],
    }


Figures = Callable[[list[dict[str, Any]]], dict[str, Any]]


def per_version(
    samples: list[dict[str, Any]], figures: Figures = sample_figures
) -> dict[int, dict[str, Any]]:
    """``figures`` (default :func:`sample_figures`) per policy version that wrote the samples."""
    versions = sorted({int(s["policy_version"]) for s in samples})
    return {v: figures([s for s in samples if int(s["policy_version"]) == v]) for v in versions}


def per_update(metrics: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The learner's batch means per update step (``metrics.jsonl``, learner stream)."""
    return {
        int(m["step"]): {
            "t": m["time"],
            **{name: m.get(key) for key, name in UPDATE_FIGURES.items()},
        }
        for m in metrics
        if m.get("stream") == "learner"
    }


def final_scores(report: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Per task: trained and initial policy's best-of-K, mean-of-K and valid fraction."""
    if report is None:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for which in ("trained", "initial"):
        per_seed = report[which]["per_seed"]
        if len(per_seed) != 1:
            raise ValueError(f"report.json: expected one seed per policy, got {len(per_seed)}")
        for task, s in per_seed[0]["tasks"].items():
            row = out.setdefault(task, {"lower_is_better": bool(s["lower_is_better"])})
            row.update(
                {
                    f"{which}_best": s["best_score"],
                    f"{which}_mean": s["mean_score"],
                    f"{which}_valid": s["valid_frac"],
                }
            )
    return out


def wall_clock(run_dir: Path, metrics: list[dict[str, Any]]) -> dict[str, float | None]:
    """``train_s``: learner start to its last update; ``job_s``: job start to report written."""
    learner = [m["time"] for m in metrics if m.get("stream") == "learner"]
    started = run_dir / "started_at"
    train_s = max(learner) - float(started.read_text()) if learner and started.is_file() else None
    job_start, report = run_dir / ".hydra" / "config.yaml", run_dir / "report.json"
    job_s = (
        report.stat().st_mtime - job_start.stat().st_mtime
        if job_start.is_file() and report.is_file()
        else None
    )
    return {"train_s": train_s, "job_s": job_s}


def summarise_run(run_dir: Path, typical: dict[str, float] | None = None) -> dict[str, Any]:
    """Everything this benchmark reads from one run dir (see the module docstring); ``typical``:
    :func:`typical_durations` over all runs compared."""
    config = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    method, seed = str(config["learner"]["duration_weighting"]), int(config["seed"])
    updates = int(config["learner"]["max_updates"])
    samples = read_jsonl(run_dir / "samples.jsonl")
    metrics = read_jsonl(run_dir / "metrics.jsonl")  # [] without one
    report_path = run_dir / "report.json"
    report = json.loads(report_path.read_text(encoding="utf-8")) if report_path.is_file() else None
    by_window = windows(samples, updates)
    return {
        "run_dir": str(run_dir),
        "method": method,
        "seed": seed,
        "max_updates": updates,
        "windows": {w: sample_figures(rows, typical) for w, rows in by_window.items()},
        "scores": {w: task_scores(rows) for w, rows in by_window.items()},
        "per_version": per_version(samples, functools.partial(sample_figures, typical=typical)),
        "per_version_scores": per_version(samples, task_scores),
        "per_update": per_update(metrics),
        "eval_k": report["k"] if report else None,
        "final": final_scores(report),
        "wall": wall_clock(run_dir, metrics),
    }


# ---- across seeds and methods ---------------------------------------------------------------


def across_seeds(rows: list[dict[str, Any]], figures: tuple[str, ...]) -> dict[str, Any]:
    """:func:`mean_se` of each figure over the rows (one per seed)."""
    return {f: mean_se([r.get(f) for r in rows]) for f in figures}


def _by_key(runs: list[dict[str, Any]], part: str, figures: tuple[str, ...]) -> dict[int, Any]:
    keys = sorted({k for r in runs for k in r[part]})
    return {k: across_seeds([r[part][k] for r in runs if k in r[part]], figures) for k in keys}


def aggregate_method(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One method's runs (one per seed) -> mean +- s.e. over seeds of every figure."""
    tasks = sorted({t for r in runs for t in r["final"]})
    score_tasks = tuple(sorted({t for r in runs for t in r["scores"]["all"]}))
    final_figures = (
        "trained_best",
        "trained_mean",
        "trained_valid",
        "initial_best",
        "initial_mean",
        "initial_valid",
    )
    return {
        "seeds": sorted(r["seed"] for r in runs),
        "windows": {
            w: across_seeds([r["windows"][w] for r in runs], SAMPLE_FIGURES) for w in WINDOWS
        },
        "scores": {w: across_seeds([r["scores"][w] for r in runs], score_tasks) for w in WINDOWS},
        "per_version": _by_key(runs, "per_version", SAMPLE_FIGURES),
        "per_version_scores": _by_key(runs, "per_version_scores", score_tasks),
        "per_update": _by_key(runs, "per_update", tuple(UPDATE_FIGURES.values())),
        "final": {
            t: {
                "lower_is_better": next(
                    r["final"][t]["lower_is_better"] for r in runs if t in r["final"]
                ),
                **across_seeds([r["final"][t] for r in runs if t in r["final"]], final_figures),
            }
            for t in tasks
        },
        "wall": across_seeds([r["wall"] for r in runs], ("train_s", "job_s")),
    }


def difference(
    paper: dict[str, Any], none: dict[str, Any], higher_is_better: bool | None = None
) -> dict[str, Any]:
    """paper - none with the s.e. of a difference of independent means, and a plain verdict."""
    if paper["mean"] is None or none["mean"] is None:
        return {"diff": None, "se": None, "verdict": "missing: a method has no value"}
    diff = paper["mean"] - none["mean"]
    if paper["se"] is None or none["se"] is None:
        return {
            "diff": diff,
            "se": None,
            "verdict": "no s.e. (fewer than 2 seeds): cannot be told from noise",
        }
    se = math.sqrt(paper["se"] ** 2 + none["se"] ** 2)
    if abs(diff) <= NOISE_SE * se:
        return {"diff": diff, "se": se, "verdict": f"within noise (|diff| <= {NOISE_SE:g} s.e.)"}
    side = "higher" if diff > 0 else "lower"
    if higher_is_better is not None:
        side = "better" if (diff > 0) == higher_is_better else "worse"
    return {"diff": diff, "se": se, "verdict": f"paper {side}, beyond {NOISE_SE:g} s.e."}


def differences(methods: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The headline differences paper - none: sample figures per window, final scores, wall-clock."""
    p, n = methods["paper"], methods["none"]
    better = {"reward": True, "valid_frac": True}
    out: dict[str, Any] = {
        "windows": {
            w: {
                f: difference(p["windows"][w][f], n["windows"][w][f], better.get(f))
                for f in SAMPLE_FIGURES
            }
            for w in p["windows"]
        },
        "wall": {f: difference(p["wall"][f], n["wall"][f]) for f in p["wall"]},
        "final": {},
    }
    for task in sorted(set(p["final"]) & set(n["final"])):
        hib = not p["final"][task]["lower_is_better"]
        out["final"][task] = {
            f: difference(p["final"][task][f], n["final"][task][f], hib)
            for f in ("trained_best", "trained_mean")
        }
    lower = {t: f["lower_is_better"] for m in (p, n) for t, f in m["final"].items()}
    out["scores"] = {
        w: {
            t: difference(
                p["scores"][w][t], n["scores"][w][t], None if t not in lower else not lower[t]
            )
            for t in sorted(set(p["scores"][w]) & set(n["scores"][w]))
        }
        for w in p["scores"]
    }
    return out


# ---- output ---------------------------------------------------------------------------------
def _ms(x: dict[str, Any], fmt: str = ".3f") -> str:
    return fmt_mean_se(x, fmt, none="n/a")


def _diff(d: dict[str, Any], fmt: str = ".3f") -> str:
    if d["diff"] is None:
        return "n/a"
    return f"{d['diff']:+{fmt}}" + (f" ± {d['se']:{fmt}}" if d["se"] is not None else "")


def table(result: dict[str, Any]) -> str:
    """The headline figures: per method mean ± s.e. over seeds, paper - none and the verdict."""
    m, d = result["methods"], result["difference"]
    cfg = result["config"]
    rows = [("figure", "none", "paper", "paper - none", "verdict")]
    for w in WINDOWS:
        for f in SAMPLE_FIGURES:
            rows.append(
                (
                    f"{f} ({w.replace('_', ' ')})",
                    _ms(m["none"]["windows"][w][f]),
                    _ms(m["paper"]["windows"][w][f]),
                    _diff(d["windows"][w][f]),
                    d["windows"][w][f]["verdict"],
                )
            )
        for task, diff in d["scores"][w].items():
            rows.append(
                (
                    f"score of valid samples, {task} ({w.replace('_', ' ')})",
                    _ms(m["none"]["scores"][w][task], ".4f"),
                    _ms(m["paper"]["scores"][w][task], ".4f"),
                    _diff(diff, ".4f"),
                    diff["verdict"],
                )
            )
    for task, figs in d["final"].items():
        for f, diff in figs.items():
            arrow = "↓" if m["paper"]["final"][task]["lower_is_better"] else "↑"
            rows.append(
                (
                    f"{task} {f} {arrow}",
                    _ms(m["none"]["final"][task][f], ".4f"),
                    _ms(m["paper"]["final"][task][f], ".4f"),
                    _diff(diff, ".4f"),
                    diff["verdict"],
                )
            )
    for f, diff in d["wall"].items():
        rows.append(
            (
                f"wall {f}",
                _ms(m["none"]["wall"][f], ".0f"),
                _ms(m["paper"]["wall"][f], ".0f"),
                _diff(diff, ".0f"),
                diff["verdict"],
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        f"Duration ablation: seeds {m['none']['seeds']} (none) / {m['paper']['seeds']} (paper), "
        f"{'/'.join(map(str, cfg['updates_in_runs']))} updates, best of "
        f"{'/'.join(map(str, cfg['eval_k_in_runs'])) or 'n/a'}; mean ± s.e. over seeds"
    ]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(lines)


def headline(result: dict[str, Any]) -> str:
    """One plain sentence per headline figure: the difference and whether it is within noise."""
    d = result["difference"]["windows"]["second_half"]
    parts = [
        ("execution time of programs that ran", d["duration_ran_s"], " s"),
        ("the same, each program at its typical time (load removed)", d["duration_mix_s"], " s"),
        ("reward", d["reward"], ""),
        ("valid fraction", d["valid_frac"], ""),
    ]
    lines = [
        "paper - none (sample figures: second half of training; scores: the closing best-of-K):"
    ]
    lines += [
        f"- {name}: {_diff(x)}{unit if x['diff'] is not None else ''}: {x['verdict']}"
        for name, x, unit in parts
    ]
    for task, x in result["difference"]["scores"]["last_quarter"].items():
        lines.append(
            f"- {task}, mean score of valid samples (last quarter): {_diff(x, '.4f')}: {x['verdict']}"
        )
    for task, figs in result["difference"]["final"].items():
        x = figs["trained_best"]
        lines.append(f"- {task}, trained best-of-K: {_diff(x, '.4f')}: {x['verdict']}")
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> None:
    """Figure 8 in miniature: mean execution time and mean reward per step, s.e. bands."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    tasks = sorted(
        {t for m in METHODS for v in result["methods"][m]["per_version_scores"].values() for t in v}
    )
    panels = [
        ("per_version", "duration_ran_s", "mean execution time (s) of programs that ran"),
        ("per_version", "reward", "mean reward"),
        *[("per_version_scores", t, f"{t}: mean score of valid samples") for t in tasks],
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    for ax, (part, figure, label) in zip(axes[0], panels):
        for method, colour in zip(METHODS, ("tab:orange", "tab:blue")):
            series = result["methods"][method][part]
            pts = [
                (int(v), s[figure])
                for v, s in series.items()
                if figure in s and s[figure]["mean"] is not None
            ]
            xs = [v for v, _ in pts]
            ys = [s["mean"] for _, s in pts]
            ses = [s["se"] or 0.0 for _, s in pts]
            ax.plot(xs, ys, marker=".", color=colour, label=f"duration_weighting={method}")
            ax.fill_between(
                xs,
                [y - e for y, e in zip(ys, ses)],
                [y + e for y, e in zip(ys, ses)],
                color=colour,
                alpha=0.2,
            )
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("training step (policy version that wrote the sample)")
        ax.set_ylabel(label, fontsize=8)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    cfg = result["config"]
    seeds = len(result["methods"]["paper"]["seeds"])
    updates = "/".join(map(str, cfg["updates_in_runs"]))
    fig.suptitle(
        f"Duration-aware vs plain policy gradient, embedded setup ({seeds} seeds, "
        f"{updates} updates; band: ± 1 s.e. over seeds)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def check_runs(runs: list[dict[str, Any]], runs_dir: Path) -> None:
    """Both methods present, at most one run per (method, seed); else exit naming the problem."""
    missing = [m for m in METHODS if not any(r["method"] == m for r in runs)]
    if missing:
        raise SystemExit(
            f"duration_ablation: no runs of duration_weighting={','.join(missing)} under {runs_dir}"
        )
    seen: dict[tuple[str, int], str] = {}
    for r in runs:
        key = (r["method"], r["seed"])
        if key in seen:
            raise SystemExit(
                f"duration_ablation: two runs of duration_weighting={key[0]} seed={key[1]}: "
                f"{seen[key]} and {r['run_dir']}"
            )
        seen[key] = r["run_dir"]


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(argv)
    before = machine_info()  # its load_avg is the load before the sweep
    launched = launch(cfg) if cfg.launch else None
    run_dirs = find_runs(cfg.runs_dir)
    if not run_dirs:
        raise SystemExit(
            f"duration_ablation: no run dirs (config.yaml + samples.jsonl) under {cfg.runs_dir}"
        )
    typical = typical_durations([s for d in run_dirs for s in read_jsonl(d / "samples.jsonl")])
    runs = [summarise_run(d, typical) for d in run_dirs]
    check_runs(runs, cfg.runs_dir)
    methods = {m: aggregate_method([r for r in runs if r["method"] == m]) for m in METHODS}
    result: dict[str, Any] = {
        "benchmark": "duration_ablation",
        "command": command_line(),
        "git_commit": git_commit(),
        "machine": {**before, "load_avg_after": machine_info()["load_avg"]},
        "config": {
            "seeds": cfg.seeds,
            "updates": cfg.updates,
            "eval_samples": cfg.eval_samples,
            "runs_dir": str(cfg.runs_dir),
            "overrides": cfg.overrides,
            "launched": cfg.launch,
            "updates_in_runs": sorted({r["max_updates"] for r in runs}),
            "eval_k_in_runs": sorted({r["eval_k"] for r in runs if r["eval_k"] is not None}),
            "methods_ignored": sorted({r["method"] for r in runs} - set(METHODS)),
        },
        "launch": launched,
        "runs": runs,
        "methods": methods,
        "difference": differences(methods),
    }
    cfg.out.mkdir(parents=True, exist_ok=True)
    write_json(cfg.out / "duration_ablation.json", result)
    plot(result, cfg.out / "duration_ablation.png")
    print(table(result))
    print(headline(result))
    print(f"wrote {cfg.out / 'duration_ablation.json'} and {cfg.out / 'duration_ablation.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
