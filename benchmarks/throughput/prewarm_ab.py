"""Do sandboxes started ahead raise the embedded run's updates per minute?

``python benchmarks/throughput/prewarm_ab.py [--seeds 3 --first-seed 0 --updates 10] [--no-launch]``

Launch: per seed, ``mlerl train seed=S learner.max_updates=U eval_samples=0 sandbox.prewarm=P
hydra.run.dir=RUNS/prewarmP_seedS`` for each arm P in ``--arms`` (default 0 and 2), one job at
a time. The arms alternate their order from seed to seed (0, 2 / 2, 0 / ...), so a drift in
the host's speed hits both alike. Each job is its own child process, so its CPU time (user +
system of the job and every descendant it reaped: actors, learner, sandboxes, programs) is
measured as the rise of ``RUSAGE_CHILDREN`` across it, and written to ``RUN/cpu.json``.

Per run: updates per minute between the first and the last learner update (``metrics.jsonl``
timestamps, so the model load and the closing are left out), CPU seconds per update (the
whole job's CPU over its updates: start-up counts the same in both arms), the mean execution
time of the programs that ran, and the valid fraction. Per arm: mean and standard error over
seeds. The paired difference (each arm minus ``prewarm=0``, per seed) decides: the warm path
*raises* updates per minute only where that difference is above two standard errors.

Writes ``prewarm_ab.json`` to ``--out`` (default ``benchmarks/results``) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common
from _common import (
    RESULTS,
    REPO,
    command_line,
    fmt_mean_se,
    git_commit,
    machine_info,
    mean_se,
    read_jsonl,
    write_json,
)

NOISE_SE = 2.0


def run_name(arm: int, seed: int) -> str:
    return f"prewarm{arm}_seed{seed}"


def schedule(seeds: list[int], arms: list[int]) -> list[tuple[int, int]]:
    """(seed, arm) in launch order: seeds in turn, the arms' order reversed on every other seed."""
    order: list[tuple[int, int]] = []
    for i, seed in enumerate(seeds):
        order += [(seed, arm) for arm in (arms if i % 2 == 0 else arms[::-1])]
    return order


def launch_argv(seed: int, arm: int, updates: int, run_dir: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "mlerl.cli",
        "train",
        f"seed={seed}",
        f"learner.max_updates={updates}",
        "eval_samples=0",
        f"sandbox.prewarm={arm}",
        f"hydra.run.dir={run_dir}",
    ]


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def launch(seed: int, arm: int, updates: int, run_dir: Path) -> None:
    """One job to completion; its CPU and wall time go to ``run_dir/cpu.json``."""
    if (run_dir / "metrics.jsonl").exists():
        raise SystemExit(f"prewarm_ab: {run_dir} already holds a run; remove it or use --no-launch")
    argv = launch_argv(seed, arm, updates, run_dir)
    print("+", " ".join(argv), flush=True)
    cpu0, t0 = children_cpu_s(), time.time()
    subprocess.run(argv, cwd=REPO, check=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "cpu.json").write_text(
        json.dumps({"cpu_s": children_cpu_s() - cpu0, "wall_s": time.time() - t0})
    )


def summarise_run(run_dir: Path, arm: int, seed: int) -> dict[str, Any]:
    """The figures of one run dir (see the module doc)."""
    updates = [
        r
        for r in read_jsonl(run_dir / "metrics.jsonl")
        if r.get("stream") == "learner" and "step" in r
    ]
    times = sorted(float(r["time"]) for r in updates)
    span_min = (times[-1] - times[0]) / 60 if len(times) > 1 else 0.0
    samples = read_jsonl(run_dir / "samples.jsonl")
    ran = [
        float(s["duration_s"])
        for s in samples
        if s.get("status") not in (None, "not_run") and s.get("duration_s")
    ]
    cpu_file = run_dir / "cpu.json"
    cpu = json.loads(cpu_file.read_text()) if cpu_file.exists() else {}
    return {
        "arm": arm,
        "seed": seed,
        "run_dir": str(run_dir),
        "updates": len(times),
        "updates_per_min": (len(times) - 1) / span_min if span_min > 0 else None,
        "cpu_s": cpu.get("cpu_s"),
        "wall_s": cpu.get("wall_s"),
        "cpu_s_per_update": cpu["cpu_s"] / len(times)
        if cpu.get("cpu_s") is not None and times
        else None,
        "exec_s_mean": sum(ran) / len(ran) if ran else None,
        "valid_frac": sum(bool(s.get("valid")) for s in samples) / len(samples)
        if samples
        else None,
    }


FIGURES = ("updates_per_min", "cpu_s_per_update", "exec_s_mean", "valid_frac")


def aggregate(rows: list[dict[str, Any]], arms: list[int]) -> dict[str, Any]:
    """Per arm mean and s.e. of each figure; per other arm the paired difference to the first."""
    by_arm = {a: {r["seed"]: r for r in rows if r["arm"] == a} for a in arms}
    out: dict[str, Any] = {
        "arms": {
            str(a): {f: mean_se([r[f] for r in by_arm[a].values()]) for f in FIGURES} for a in arms
        },
        "difference": {},
    }
    base = arms[0]
    for a in arms[1:]:
        seeds = sorted(set(by_arm[a]) & set(by_arm[base]))
        diff: dict[str, Any] = {}
        for f in FIGURES:
            pairs = [
                by_arm[a][s][f] - by_arm[base][s][f]
                for s in seeds
                if by_arm[a][s][f] is not None and by_arm[base][s][f] is not None
            ]
            diff[f] = mean_se(pairs)
        d = diff["updates_per_min"]
        diff["raises_updates_per_min"] = bool(
            d["n"] >= 2 and d["se"] is not None and d["mean"] > NOISE_SE * d["se"]
        )
        diff["seeds"] = seeds
        out["difference"][f"{a}-{base}"] = diff
    return out


def table(result: dict[str, Any]) -> str:
    lines = [
        "| arm | updates/min | CPU s per update | execution s | valid |",
        "|---|---|---|---|---|",
    ]
    for arm, figs in result["summary"]["arms"].items():
        lines.append(
            f"| prewarm={arm} | " + " | ".join(fmt_mean_se(figs[f], ".2f") for f in FIGURES) + " |"
        )
    for name, d in result["summary"]["difference"].items():
        lines.append(
            f"| {name} (paired) | " + " | ".join(fmt_mean_se(d[f], ".2f") for f in FIGURES) + " |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument(
        "--updates", type=int, default=10, help="learner.max_updates of every job (default 10)"
    )
    p.add_argument(
        "--arms",
        default="0,2",
        help="sandbox.prewarm values, the first is the reference (default 0,2)",
    )
    p.add_argument("--runs-dir", type=Path, default=Path("/tmp/mlerl_prewarm_ab"))
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument(
        "--no-launch", action="store_true", help="only aggregate the run dirs in --runs-dir"
    )
    args = p.parse_args(argv)
    try:
        arms = [int(a) for a in args.arms.split(",")]
    except ValueError:
        p.error(f"--arms {args.arms!r}: expected comma-separated integers")
    if len(arms) < 2 or min(arms) < 0 or args.seeds < 1 or args.updates < 2:
        p.error("need two or more arms >= 0, --seeds >= 1 and --updates >= 2")
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    runs_dir = args.runs_dir.resolve()
    if not args.no_launch:
        for seed, arm in schedule(seeds, arms):
            launch(seed, arm, args.updates, runs_dir / run_name(arm, seed))
    rows = [
        summarise_run(runs_dir / run_name(a, s), a, s)
        for s in seeds
        for a in arms
        if (runs_dir / run_name(a, s) / "metrics.jsonl").exists()
    ]
    if not rows:
        raise SystemExit(f"prewarm_ab: no runs under {runs_dir}")
    result = {
        "benchmark": "embedded run updates per minute and CPU per update: sandboxes started ahead",
        "command": command_line(),
        "git_commit": git_commit(),
        "machine": machine_info(),
        "updates": args.updates,
        "seeds": seeds,
        "arms": arms,
        "runs": rows,
        "summary": aggregate(rows, arms),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "prewarm_ab.json", result)
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
