"""Does RL improve the embedded agent? The default `mlerl train` on several seeds.

``python benchmarks/experiments/embedded_rl.py [--seeds 3] [--first-seed 0] [--runs-dir /tmp/embedded_rl] [--no-launch] [--name embedded_rl] [--chosen-on 0,1,2] [-- OVERRIDE ...]``

``--chosen-on``: the seeds the setting under test was chosen on; the results file's
``selection`` records them beside the seeds measured and whether those are held out (a
confirmation on the seeds that chose a setting is feedback, not a result).

Launch: for each seed, ``mlerl train seed=S hydra.run.dir=RUNS/seedS [OVERRIDE ...]`` one after
the other (one training job at a time on a small host), timing each job's wall-clock. A seed
whose run dir already holds ``report.json`` is not run again (``--no-launch``: aggregate only).

Per run (pure functions of its files, tested on a synthetic run dir):

- ``samples.jsonl`` grouped by the policy version that wrote each sample, U =
  ``learner.max_updates`` from ``config.yaml``: the first quarter is versions < U/4, the last
  quarter versions >= 3U/4. Per quarter: valid fraction, mean reward, and (last quarter) the
  valid fraction of scratch and of improve samples; over the valid scratch samples, the mean
  execution time and (per task) the mean score;
- ``report.json`` (the closing evaluation, best-of-K of the initial and the trained policy per
  task, same K and seed, and AIDE driven by the initial policy at K program executions per
  task): per task initial/trained/AIDE best and mean score and valid fraction (AIDE ``null``
  for a report written before AIDE was part of it);
- improve samples against the parent they revised, where both are valid:
  ``improve_pairs_valid`` and ``improve_beats_parent`` (the share of those pairs where the
  revision earned strictly more reward);
- ``improve_ran_failed`` / ``improve_broke_parent`` (and ``_last_quarter``): revisions that ran
  without a valid submission, and those of them that reached fewer markers than their parent;
- ``improve_parse``: the improve samples counted by how the parser saw them (``truncated``,
  ``edit_mismatch``, ``unchanged``, ...; ``valid`` among them), and per task the prompt kind of
  the sample each closing best-of-K chose (``initial_best_kind``, ``trained_best_kind``; across
  seeds each kind's share of the winners: which prompt kind wins at test time);
- the first RL study's targets per seed: ``valid_gain_ok`` (last >= first + 0.20 and reward last >
  first), ``improve_ok`` (improve valid >= half the scratch valid, last quarter, and
  ``improve_beats_parent`` > 0.5),
  ``trained_beats_initial`` (trained best-of-K strictly better than the initial on every task),
  ``trained_beats_aide`` (strictly better than AIDE's best on every task; ``null`` without AIDE).

Across seeds: mean and standard error (sample std / sqrt(n); none for one seed).
Writes ``NAME.json`` and ``NAME.png`` (``--name``, default ``embedded_rl``: per policy version,
rolling means of the valid fraction by prompt kind, the mean reward and, per task, the valid
scratch programs' mean score; and per task the best score vs wall-clock, one line per seed,
AIDE's best as a dashed line) to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
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

REPO = Path(__file__).resolve().parents[2]


def max_updates(run_dir: Path) -> int:
    """``learner.max_updates`` from the run's ``config.yaml`` (a plain YAML read)."""
    import yaml

    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    return int(cfg["learner"]["max_updates"])


def _frac(rows: list[dict[str, Any]]) -> float | None:
    return sum(bool(r["valid"]) for r in rows) / len(rows) if rows else None


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def quarters(samples: list[dict[str, Any]], updates: int) -> dict[str, Any]:
    """First (version < U/4) and last (version >= 3U/4) quarter of the training samples."""
    first = [s for s in samples if s["policy_version"] < updates / 4]
    last = [s for s in samples if 3 * updates / 4 <= s["policy_version"] < updates]
    out = {
        "valid_first_quarter": _frac(first),
        "valid_last_quarter": _frac(last),
        "reward_first_quarter": _mean([s["reward"] for s in first]),
        "reward_last_quarter": _mean([s["reward"] for s in last]),
        "n_first_quarter": len(first),
        "n_last_quarter": len(last),
    }
    for kind in ("scratch", "improve"):
        for name, rows in (("first", first), ("last", last)):
            sub = [s for s in rows if s.get("kind") == kind]
            out[f"{kind}_valid_{name}_quarter"] = _frac(sub)
            out[f"{kind}_n_{name}_quarter"] = len(sub)
    # what RL does to the programs that work: execution time and score of valid scratch samples
    # (the score per task: tasks differ in metric and direction)
    ok = {
        name: [s for s in rows if s.get("kind") == "scratch" and s["valid"]]
        for name, rows in (("first", first), ("last", last))
    }
    for name, rows in ok.items():
        out[f"scratch_exec_s_{name}_quarter"] = _mean(
            [s["duration_s"] for s in rows if s.get("duration_s") is not None]
        )
    tasks = sorted({s["task_id"] for rows in ok.values() for s in rows})
    out["scratch_score_by_task"] = {
        t: {
            f"{name}_quarter": _mean(
                [s["score"] for s in rows if s["task_id"] == t and s["score"] is not None]
            )
            for name, rows in ok.items()
        }
        for t in tasks
    }
    return out


def _with_parents(
    samples: list[dict[str, Any]], children: list[dict[str, Any]] | None
) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Each improve sample of ``children`` (default all ``samples``) with the sample of the run
    it revised (None when its parent is not in ``samples``)."""
    by_id = {s.get("sample_id"): s for s in samples if s.get("sample_id") is not None}
    return [
        (s, by_id.get(s.get("parent_id")))
        for s in (samples if children is None else children)
        if s.get("kind") == "improve"
    ]


def improve_vs_parent(
    samples: list[dict[str, Any]], children: list[dict[str, Any]] | None = None, suffix: str = ""
) -> dict[str, Any]:
    """Improve samples against the program they revised, where both are valid.

    A pair is an improve sample (of ``children``, default all ``samples``) whose ``parent_id``
    is a sample of the run; rewards, not scores, are compared (the reward is the score
    sign-flipped where lower is better, so higher is better on every task).
    ``improve_beats_parent``: the fraction of pairs where the revision earned strictly more;
    ``improve_reward_delta_mean``: the mean reward change (revision - parent); both ``None``
    without pairs. Keys carry ``suffix`` (e.g. ``_last_quarter``).
    """
    both = [
        (c, p)
        for c, p in _with_parents(samples, children)
        if p is not None and c["valid"] and p["valid"]
    ]
    wins = sum(c["reward"] > p["reward"] for c, p in both)
    return {
        f"improve_pairs_valid{suffix}": len(both),
        f"improve_beats_parent{suffix}": wins / len(both) if both else None,
        f"improve_reward_delta_mean{suffix}": sum(c["reward"] - p["reward"] for c, p in both)
        / len(both)
        if both
        else None,
    }


def improve_parse(samples: list[dict[str, Any]]) -> dict[str, int]:
    """How the improve samples ended, counted by the parser's status (``ok``, ``truncated``,
    ``syntax_error``, ``edit_mismatch``, ``unchanged``, ...); ``valid`` counts those among the
    ``ok`` ones whose submission was valid."""
    out: dict[str, int] = {}
    for s in samples:
        if s.get("kind") == "improve":
            key = str(s.get("parse") or "unknown")
            out[key] = out.get(key, 0) + 1
            out["valid"] = out.get("valid", 0) + bool(s.get("valid"))
    return out


def improve_broke_parent(
    samples: list[dict[str, Any]], children: list[dict[str, Any]] | None = None, suffix: str = ""
) -> dict[str, Any]:
    """Revisions (of ``children``, default all ``samples``) that ran but left no valid
    submission, and how many of them reached fewer distinct markers than their parent (they
    broke a program that ran further, e.g. by deleting a line it needed)."""
    failed = [
        (c, p)
        for c, p in _with_parents(samples, children)
        if c.get("status") not in (None, "not_run") and not c.get("valid")
    ]
    broke = sum(
        p is not None and len(set(c.get("markers") or [])) < len(set(p.get("markers") or []))
        for c, p in failed
    )
    return {f"improve_ran_failed{suffix}": len(failed), f"improve_broke_parent{suffix}": broke}


def _better(a: float | None, b: float | None, lower: bool) -> bool:
    """a strictly better than b (None is worst)."""
    if a is None:
        return False
    if b is None:
        return True
    return a < b if lower else a > b


def per_task(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    init, trained = (
        report["initial"]["per_seed"][0]["tasks"],
        report["trained"]["per_seed"][0]["tasks"],
    )
    aide = report["aide"]["per_seed"][0]["tasks"] if "aide" in report else {}
    for task, a in trained.items():
        b, c = init[task], aide.get(task)
        lower = a["lower_is_better"]
        out[task] = {
            "lower_is_better": lower,
            "initial_best": b["best_score"],
            "trained_best": a["best_score"],
            "aide_best": c["best_score"] if c else None,
            # the public score each best was chosen on (None in a report from before the split)
            "initial_best_public": b.get("best_public"),
            "trained_best_public": a.get("best_public"),
            "aide_best_public": c.get("best_public") if c else None,
            "initial_mean": b["mean_score"],
            "trained_mean": a["mean_score"],
            "aide_mean": c["mean_score"] if c else None,
            "initial_valid": b["valid_frac"],
            "trained_valid": a["valid_frac"],
            "aide_valid": c["valid_frac"] if c else None,
            # the prompt kind of the sample each best-of-K chose (the paper's test-time protocol)
            "initial_best_kind": b.get("best_kind"),
            "trained_best_kind": a.get("best_kind"),
            "trained_beats_initial": _better(a["best_score"], b["best_score"], lower),
            "trained_beats_aide": _better(a["best_score"], c["best_score"], lower) if c else None,
        }
    return out


KINDS = ("scratch", "improve")


def zero_adv_by_kind(metrics: list[dict[str, Any]]) -> dict[str, float | None]:
    """Per prompt kind, the mean over the learner's updates of the share of samples whose
    advantage is zero (|A| < 1e-6: ``split/kind/<kind>/zero_adv_share``); None where no update
    logged that kind."""
    out: dict[str, float | None] = {}
    for kind in KINDS:
        vals = [
            float(r[f"split/kind/{kind}/zero_adv_share"])
            for r in metrics
            if r.get("stream") == "learner"
            and r.get(f"split/kind/{kind}/zero_adv_share") is not None
        ]
        out[f"zero_adv_share_{kind}"] = _mean(vals)
    return out


def summarise_run(run_dir: Path) -> dict[str, Any]:
    """Everything the benchmark reports about one run dir."""
    cfg_seed = None
    try:
        import yaml

        cfg_seed = yaml.safe_load((run_dir / "config.yaml").read_text()).get("seed")
    except (OSError, ValueError):
        pass
    updates = max_updates(run_dir)
    samples = read_jsonl(run_dir / "samples.jsonl")
    q = quarters(samples, updates)
    last = [s for s in samples if s.get("policy_version", 0) >= 3 * updates / 4]
    out: dict[str, Any] = {
        "run_dir": str(run_dir),
        "seed": cfg_seed,
        "updates": updates,
        **q,
        **improve_vs_parent(samples),
        **improve_vs_parent(samples, last, "_last_quarter"),
        **improve_broke_parent(samples),
        **improve_broke_parent(samples, last, "_last_quarter"),
        "improve_parse": improve_parse(samples),
        **zero_adv_by_kind(read_jsonl(run_dir / "metrics.jsonl")),
    }
    report = run_dir / "report.json"
    tasks = per_task(json.loads(report.read_text())) if report.is_file() else {}
    out["tasks"] = tasks
    vf, vl, rf, rl = (
        q["valid_first_quarter"],
        q["valid_last_quarter"],
        q["reward_first_quarter"],
        q["reward_last_quarter"],
    )
    out["valid_gain_ok"] = None if None in (vf, vl, rf, rl) else bool(vl >= vf + 0.20 and rl > rf)
    sv, iv = q["scratch_valid_last_quarter"], q["improve_valid_last_quarter"]
    beats = out["improve_beats_parent"]
    out["improve_ok"] = (
        None
        if sv is None or iv is None
        else bool(iv >= 0.5 * sv and beats is not None and beats > 0.5)
    )
    out["trained_beats_initial"] = bool(tasks) and all(
        t["trained_beats_initial"] for t in tasks.values()
    )
    vs_aide = [t["trained_beats_aide"] for t in tasks.values()]
    out["trained_beats_aide"] = None if not vs_aide or None in vs_aide else all(vs_aide)
    timing = run_dir / "wall_clock_s"
    out["wall_clock_minutes"] = float(timing.read_text()) / 60 if timing.is_file() else None
    return out


CLOSING_KEYS = (
    "initial_best",
    "trained_best",
    "aide_best",
    "initial_best_public",
    "trained_best_public",
    "aide_best_public",
    "initial_mean",
    "trained_mean",
    "initial_valid",
    "trained_valid",
)


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = (
        "valid_first_quarter",
        "valid_last_quarter",
        "reward_first_quarter",
        "reward_last_quarter",
        "scratch_valid_last_quarter",
        "improve_valid_last_quarter",
        "scratch_exec_s_first_quarter",
        "scratch_exec_s_last_quarter",
        "improve_beats_parent",
        "improve_beats_parent_last_quarter",
        "improve_reward_delta_mean",
        "improve_reward_delta_mean_last_quarter",
        "zero_adv_share_scratch",
        "zero_adv_share_improve",
        "improve_ran_failed",
        "improve_broke_parent",
        "improve_ran_failed_last_quarter",
        "improve_broke_parent_last_quarter",
    )
    walls = [r["wall_clock_minutes"] for r in runs if r["wall_clock_minutes"] is not None]
    tasks = sorted({t for r in runs for t in r["scratch_score_by_task"]})
    return {
        "seeds": len(runs),
        **{k: mean_se([r[k] for r in runs]) for k in keys},
        "scratch_score_by_task": {
            t: {
                q: mean_se([r["scratch_score_by_task"].get(t, {}).get(q) for r in runs])
                for q in ("first_quarter", "last_quarter")
            }
            for t in tasks
        },
        "closing_by_task": {
            t: {k: mean_se([r["tasks"].get(t, {}).get(k) for r in runs]) for k in CLOSING_KEYS}
            for t in sorted({t for r in runs for t in r["tasks"]})
        },
        "valid_gain_ok_every_seed": bool(runs) and all(r["valid_gain_ok"] for r in runs),
        "improve_ok_every_seed": bool(runs) and all(r["improve_ok"] for r in runs),
        "trained_beats_initial_all_tasks": bool(runs)
        and all(r["trained_beats_initial"] for r in runs),
        # None when a run has no AIDE evaluation (a report.json from before it was added)
        "trained_beats_aide_equal_executions": (
            None
            if not runs or any(r["trained_beats_aide"] is None for r in runs)
            else all(r["trained_beats_aide"] for r in runs)
        ),
        "wall_clock_minutes_max": max(walls) if walls else None,
        **{
            f"{who}_best_kind_share": _kind_shares(
                [t.get(f"{who}_best_kind") for r in runs for t in r["tasks"].values()]
            )
            for who in ("initial", "trained")
        },
    }


def _kind_shares(kinds: list[str | None]) -> dict[str, Any]:
    """Each prompt kind's share of the best-of-K winners over (seed, task) pairs; ``none``
    counts the pairs without a valid sample (or from a report that predates ``best_kind``)."""
    won = [k for k in kinds if k is not None]
    return {
        **{k: (won.count(k) / len(won) if won else None) for k in KINDS},
        "n": len(won),
        "none": len(kinds) - len(won),
    }


def launch(seed: int, run_dir: Path, overrides: list[str]) -> None:
    cmd = [
        str(REPO / ".venv" / "bin" / "mlerl"),
        "train",
        f"seed={seed}",
        f"hydra.run.dir={run_dir}",
        *overrides,
    ]
    print("+", " ".join(cmd), flush=True)
    t0 = time.time()
    subprocess.run(cmd, cwd=REPO, check=True)
    (run_dir / "wall_clock_s").write_text(f"{time.time() - t0:.1f}")


def plot(runs: list[dict[str, Any]], out: Path, name: str = "embedded_rl", window: int = 5) -> Path:
    """Per seed: valid fraction by prompt kind and mean reward per policy version; per task, the
    valid scratch programs' mean score per version (rolling mean over ``window`` versions: where
    RL's effect on the programs shows) and the best score against wall-clock, with AIDE's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mlerl.cli import rolling_mean as rolling  # the run plots' own trailing mean

    tasks = sorted({t for r in runs for t in r["tasks"]})
    fig, axes = plt.subplots(
        1, 2 + 2 * len(tasks), figsize=(4.5 * (2 + 2 * len(tasks)), 3.4), squeeze=False
    )
    ax_valid, ax_reward = axes[0][0], axes[0][1]
    for i, r in enumerate(runs):
        samples = read_jsonl(Path(r["run_dir"]) / "samples.jsonl")
        versions = sorted(
            {s["policy_version"] for s in samples if s["policy_version"] < r["updates"]}
        )
        by_v = {v: [s for s in samples if s["policy_version"] == v] for v in versions}
        for kind, style in (("scratch", "-"), ("improve", ":")):
            fr = [_frac([s for s in by_v[v] if s.get("kind") == kind]) for v in versions]
            ax_valid.plot(
                versions,
                rolling(fr, window),
                style,
                color=f"C{i}",
                label=f"seed {r['seed']} {kind}",
            )
        ax_reward.plot(
            versions,
            rolling([_mean([s["reward"] for s in by_v[v]]) for v in versions], window),
            "-",
            color=f"C{i}",
        )
        for j, task in enumerate(tasks):
            ax_score, ax_best = axes[0][2 + 2 * j], axes[0][3 + 2 * j]
            lower = r["tasks"].get(task, {}).get("lower_is_better", False)
            per_v = [
                _mean(
                    [
                        s["score"]
                        for s in by_v[v]
                        if s["task_id"] == task
                        and s.get("kind") == "scratch"
                        and s["valid"]
                        and s["score"] is not None
                    ]
                )
                for v in versions
            ]
            ax_score.plot(versions, rolling(per_v, window), "-", color=f"C{i}")
            ax_score.set_title(
                f"{task}: valid scratch score ({'lower' if lower else 'higher'} better)", fontsize=8
            )
            ax_score.set_xlabel("policy version", fontsize=8)
            pts = sorted(
                (s["t"], s["score"])
                for s in samples
                if s["task_id"] == task and s["valid"] and s["score"] is not None
            )
            best, xs, ys = None, [], []
            for t, sc in pts:
                if best is None or (sc < best if lower else sc > best):
                    best = sc
                xs.append(t / 60)
                ys.append(best)
            ax_best.step(xs, ys, where="post", color=f"C{i}")
            aide_best = r["tasks"].get(task, {}).get("aide_best")
            if aide_best is not None:  # AIDE (initial policy, K executions): dashed
                ax_best.axhline(aide_best, ls="--", lw=0.8, color=f"C{i}")
            ax_best.set_title(f"{task}: best so far, AIDE dashed", fontsize=8)
            ax_best.set_xlabel("wall-clock (min)", fontsize=8)
    ax_valid.set_title(f"valid fraction by prompt kind (rolling {window})", fontsize=9)
    ax_reward.set_title(f"mean reward, all samples (rolling {window})", fontsize=9)
    ax_valid.set_xlabel("policy version", fontsize=8)
    ax_reward.set_xlabel("policy version", fontsize=8)
    ax_valid.legend(fontsize=6)
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def selection(chosen_on: list[int] | None, run_seeds: list[Any]) -> dict[str, Any]:
    """Selection hygiene: the seeds a setting was chosen on, the seeds that measure it,
    and whether those are held out (no overlap). ``held_out`` is None when the choice's seeds
    were not given: the results cannot say."""
    seeds = sorted(s for s in run_seeds if s is not None)
    if chosen_on is None:
        return {
            "chosen_on_seeds": None,
            "confirmed_on_seeds": seeds,
            "overlap": None,
            "held_out": None,
        }
    overlap = sorted(set(chosen_on) & set(seeds))
    return {
        "chosen_on_seeds": sorted(chosen_on),
        "confirmed_on_seeds": seeds,
        "overlap": overlap,
        "held_out": not overlap,
    }


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    overrides = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--runs-dir", type=Path, default=Path("/tmp/embedded_rl"))
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--no-launch", action="store_true")
    p.add_argument("--name", default="embedded_rl", help="results file stem (default embedded_rl)")
    p.add_argument(
        "--chosen-on",
        type=int_list,
        default=None,
        help="seeds the setting under test was chosen on (comma-separated); recorded beside "
        "the seeds run, and the results say whether they are held out",
    )
    args = p.parse_args(argv)
    runs = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        run_dir = args.runs_dir / f"seed{seed}"
        if not args.no_launch and not (run_dir / "report.json").is_file():
            launch(seed, run_dir, overrides)
        if (run_dir / "config.yaml").is_file():
            runs.append(summarise_run(run_dir))
    result = {
        "command": command_line(),
        "commit": git_commit(),
        "machine": machine_info(),
        "overrides": overrides,
        "selection": selection(args.chosen_on, [r["seed"] for r in runs]),
        "runs": runs,
        "summary": summarise(runs),
    }
    if result["selection"]["held_out"] is False:
        print(
            f"embedded_rl: seeds {result['selection']['overlap']} were also used to choose this setting: "
            "the results are feedback, not a confirmation",
            file=sys.stderr,
        )
    result["plot"] = str(plot(runs, args.out, args.name)) if runs else None
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result["summary"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
