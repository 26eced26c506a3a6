"""Asynchronous vs synchronous RL on the same real components.

``python benchmarks/throughput/async_vs_sync.py [--samples 64 --batch-size 8 --concurrency 8 --median-s 3 --sigma 1]``

Workload: real Python programs for the stand-in task ``standin-cancer-auc-tiny`` whose
durations are drawn (seeded) from a lognormal distribution; each reads the task's input, fits
a small classifier, spends its drawn duration and writes a ``submission.csv`` that mlerl.bench
grades. A scripted policy (``_system.ScriptedEngine``) writes them in the same order in both
modes; everything else is the real system (``_system`` lists what). Both modes run one after
the other in one invocation, each with a fresh learner process and model:

- ``sync``: generate B programs, execute them (C at a time), wait for the last one, let the
  learner update, repeat.
- ``async``: the shipped actor keeps C executions busy; the learner updates whenever B samples
  are stored, concurrently with executions (policy lag allowed and reported).

Per mode: wall-clock from the first generation to the end of the N / B-th update, learner idle
fraction (1 - time in update + weight publication / wall), sandbox utilisation (slot-seconds
inside ``sandbox.run`` / (C * wall)), program utilisation (the programs' own time, as they
measure it, / (C * wall)), mean policy lag in updates, CPU used, and lower bounds on the wall
time (slots, learner, CPU) that name the bottleneck. Writes ``NAME.json`` and ``NAME.png``
(``--name``, default ``async_vs_sync``) to ``--out`` (default ``benchmarks/results``).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common
from _common import (
    RESULTS,
    build_policy,
    command_line,
    draw_durations,
    git_commit,
    host_busy_frac,
    lanes,
    machine_info,
    overlap,
    prepare_task,
    response_text,
    stats,
    write_json,
)
from _system import SystemConfig, run_mode

TARGET_SPEEDUP = 2.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--samples", type=int, default=64, help="N: samples the learner consumes per mode"
    )
    p.add_argument("--batch-size", type=int, default=8, help="B: samples per update")
    p.add_argument("--concurrency", type=int, default=8, help="C: executions at once")
    p.add_argument(
        "--oversample", type=float, default=1.5, help="async admission m (shipped default 1.5)"
    )
    p.add_argument("--median-s", type=float, default=3.0, help="median program duration")
    p.add_argument("--sigma", type=float, default=1.0, help="log-std of the lognormal durations")
    p.add_argument("--min-s", type=float, default=0.5, help="durations are clipped to [min, max]")
    p.add_argument("--max-s", type=float, default=60.0)
    p.add_argument(
        "--compute-frac",
        type=float,
        default=0.0,
        help="share of each duration spent computing (else sleeping)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--hidden-size", type=int, default=128, help="tiny Qwen2 policy width (multiple of 64)"
    )
    p.add_argument("--layers", type=int, default=2, help="tiny Qwen2 policy depth")
    p.add_argument("--torch-threads", type=int, default=1, help="threads of the learner process")
    p.add_argument(
        "--description-chars", type=int, default=800, help="prompt size (sets the learner's tokens)"
    )
    p.add_argument("--snippet-chars", type=int, default=300)
    p.add_argument("--modes", default="sync,async", help="comma-separated, run in this order")
    p.add_argument("--name", default="async_vs_sync", help="stem of the JSON and PNG file names")
    p.add_argument("--out", type=Path, default=RESULTS, help="directory for the JSON and PNG")
    args = p.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not args.modes or any(m not in ("sync", "async") for m in args.modes):
        p.error("--modes: give sync, async or both")
    if args.samples % args.batch_size:
        p.error("--samples must be a multiple of --batch-size")
    if "sync" in args.modes and args.batch_size < args.concurrency:
        p.error("--batch-size must be >= --concurrency for the sync mode")
    return args


def summarise_mode(raw: dict[str, Any], cpus: int) -> dict[str, Any]:
    """The figures of one mode from its raw timings."""
    t0, t1 = raw["t_start"], raw["t_end"]
    wall = t1 - t0
    conc = raw["config"]["concurrency"]
    ups, samples = raw["learner"]["updates"], raw["learner"]["samples"]
    execs = raw["probe"]["execs"]
    step_s = sum(overlap(u["t_start"], u["t_end"], t0, t1) for u in ups)
    update_s = sum(u["t_update_end"] - u["t_start"] for u in ups)
    busy = sum(overlap(e["t_call"], e["t_return"], t0, t1) for e in execs)
    own = sum(overlap(*e["self_time"], t0, t1) for e in execs if e.get("self_time"))
    consumed = [samples[sid] for u in ups for sid in u["samples"]]
    durations = [s["duration_s"] for s in consumed]
    batch_max = [max(samples[sid]["duration_s"] for sid in u["samples"]) for u in ups]
    learner_cpu = raw["learner"]["cpu_s"]
    cpu = raw["actor_cpu_s"] + learner_cpu
    bounds = {"slots": busy / conc, "learner": step_s, "cpu": cpu / cpus}
    return {
        "wall_s": wall,
        "samples": len(consumed),
        "updates": len(ups),
        "learner_step_s": step_s,
        "learner_update_s": update_s,
        "learner_idle_frac": 1.0 - step_s / wall,
        "sandbox_busy_slot_s": busy,
        "sandbox_util": busy / (conc * wall),
        "program_util": own / (conc * wall),
        "policy_lag_mean": statistics.fmean(u["lag_mean"] for u in ups),
        "policy_lag_max": max(u["lag_max"] for u in ups),
        "consumed_duration_s": stats(durations),
        "consumed_program_s": sum(durations),
        "batch_max_duration_s": batch_max,
        "sum_batch_max_duration_s": sum(batch_max),
        "update_s": stats([u["t_update_end"] - u["t_start"] for u in ups]),
        "publish_s": stats([u["t_end"] - u["t_update_end"] for u in ups]),
        "statuses": dict(Counter(s["status"] for s in consumed)),
        "valid_frac": sum(s["valid"] for s in consumed) / len(consumed),
        "score_mean": statistics.fmean(
            [s["score"] for s in consumed if s["score"] is not None] or [0.0]
        ),
        "prompt_tokens_mean": statistics.fmean(s["prompt_tokens"] for s in consumed),
        "response_tokens_mean": statistics.fmean(s["response_tokens"] for s in consumed),
        "executions_started": len(execs),
        "executions_cancelled": sum(e["status"] == "cancelled" for e in execs),
        "actor_stats": raw["actor_stats"],
        "cpu_s": {"actor_and_children": raw["actor_cpu_s"], "learner": learner_cpu},
        "cpu_util": cpu / (cpus * wall),
        "host_cpu_busy_frac": host_busy_frac(*raw["host_cpu"]),
        "actor_done_s": max(s["t_send"] for s in raw["probe"]["sent"].values()) - t0,
        "lower_bounds_s": bounds,
        "bottleneck": max(bounds, key=bounds.get),
        "load_avg_before": raw["load_before"],
        "load_avg_after": raw["load_after"],
    }


def timeline(raw: dict[str, Any]) -> dict[str, Any]:
    """Executions, updates and rounds in seconds since the mode's start (for plots and reading)."""
    t0, graded = raw["t_start"], raw["probe"]["graded"]
    rel = lambda t: round(t - t0, 3)  # noqa: E731
    return {
        "executions": [
            {
                "pid": e["pid"],
                "call": rel(e["t_call"]),
                "return": rel(e["t_return"]),
                "status": e["status"],
                "self": [rel(t) for t in e["self_time"]] if e.get("self_time") else None,
                "graded": [rel(t) for t in graded[e["pid"]]] if e["pid"] in graded else None,
            }
            for e in raw["probe"]["execs"]
        ],
        "updates": [
            {
                "take": rel(u["t_take"]),
                "start": rel(u["t_start"]),
                "end": rel(u["t_end"]),
                "lag_mean": u["lag_mean"],
            }
            for u in raw["learner"]["updates"]
        ],
        "rounds": [{k: rel(v) for k, v in r.items()} for r in raw["rounds"]],
    }


def plot(result: dict[str, Any], path: Path) -> None:
    """One panel per mode: executions on their slots, learner updates on the top row."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = list(result["timelines"])
    fig, axes = plt.subplots(
        len(modes),
        1,
        figsize=(11, 2.2 + 0.35 * result["config"]["concurrency"] * len(modes)),
        sharex=True,
        squeeze=False,
    )
    for ax, mode in zip(axes[:, 0], modes):
        tl, summary = result["timelines"][mode], result["modes"][mode]
        execs = tl["executions"]
        slots = lanes([(e["call"], e["graded"][1] if e["graded"] else e["return"]) for e in execs])
        for e, lane in zip(execs, slots):
            ax.barh(
                lane,
                e["return"] - e["call"],
                left=e["call"],
                height=0.8,
                color="tab:gray" if e["status"] == "cancelled" else "tab:blue",
            )
            if e["graded"]:
                ax.barh(
                    lane,
                    e["graded"][1] - e["graded"][0],
                    left=e["graded"][0],
                    height=0.8,
                    color="tab:purple",
                )
        top = max(slots, default=0) + 1.5
        for u in tl["updates"]:
            ax.barh(
                top,
                u["end"] - u["start"],
                left=u["start"],
                height=0.8,
                color="tab:orange",
                edgecolor="k",
                lw=0.5,
            )
        for r in tl["rounds"]:
            ax.axvline(r["t_end"], color="k", lw=0.5, ls=":")
        ax.set_yticks([top], ["learner"])
        ax.set_ylabel("slots")
        ax.set_title(
            f"{mode}: {summary['wall_s']:.0f} s for {summary['samples']} samples, "
            f"sandbox util {summary['sandbox_util']:.0%}, learner idle {summary['learner_idle_frac']:.0%}",
            fontsize=9,
        )
    axes[-1, 0].set_xlabel(
        "seconds since start (blue: sandbox run, purple: grading, grey: cancelled at the end, "
        "orange: learner update + publish)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from transformers import AutoTokenizer

    before = machine_info()  # its load_avg is the load before the run
    n_programs = 2 * args.samples + math.ceil(args.oversample * args.concurrency)
    durations = draw_durations(
        n_programs, args.median_s, args.sigma, args.seed, args.min_s, args.max_s
    )
    responses = [response_text(i, d, args.compute_frac) for i, d in enumerate(durations)]
    raws: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="mlerl-avs-") as tmp:
        work = Path(tmp)
        task = prepare_task(work / "data")
        model_dir = build_policy(work / "policy", args.hidden_size, args.layers)
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        for mode in args.modes:
            cfg = SystemConfig(
                mode=mode,
                samples=args.samples,
                batch_size=args.batch_size,
                concurrency=args.concurrency,
                oversample=args.oversample,
                torch_threads=args.torch_threads,
                description_chars=args.description_chars,
                snippet_chars=args.snippet_chars,
                exec_time_limit_s=args.max_s * 2 + 60,
            )
            print(f"[{mode}] running ...", flush=True)
            raws[mode] = asyncio.run(run_mode(cfg, task, model_dir, tokenizer, responses, work))
    cpus = before["cpus"] or 1
    modes = {m: summarise_mode(r, cpus) for m, r in raws.items()}
    result: dict[str, Any] = {
        "benchmark": "async_vs_sync",
        "command": command_line(),
        "git_commit": git_commit(),
        "machine": {**before, "load_avg_after": machine_info()["load_avg"]},
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "workload": {
            "distribution": "lognormal",
            "durations_s_first_n": durations[: args.samples],
            "durations_first_n": stats(durations[: args.samples]),
        },
        "modes": modes,
        "timelines": {m: timeline(r) for m, r in raws.items()},
    }
    if {"sync", "async"} <= set(modes):
        s, a = modes["sync"], modes["async"]
        result["speedup"] = s["wall_s"] / a["wall_s"]
        result["speedup_per_program_second"] = (a["consumed_program_s"] / a["wall_s"]) / (
            s["consumed_program_s"] / s["wall_s"]
        )
        result["target_speedup"] = TARGET_SPEEDUP
        result["target_met"] = result["speedup"] >= TARGET_SPEEDUP
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / f"{args.name}.json", result)
    plot(result, args.out / f"{args.name}.png")
    for m, s in modes.items():
        print(
            f"{m:5s}: wall {s['wall_s']:.1f} s for {s['samples']} samples ({s['updates']} updates); "
            f"learner idle {s['learner_idle_frac']:.0%}; sandbox util {s['sandbox_util']:.0%} "
            f"(programs {s['program_util']:.0%}); lag {s['policy_lag_mean']:.2f} updates; "
            f"mean consumed duration {s['consumed_duration_s']['mean']:.2f} s; last sample sent at {s['actor_done_s']:.1f} s; "
            f"host CPU busy {s['host_cpu_busy_frac'] or 0:.0%} (ours {s['cpu_util']:.0%}); bottleneck {s['bottleneck']} "
            f"{ {k: round(v, 1) for k, v in s['lower_bounds_s'].items()} }"
        )
    if "speedup" in result:
        print(
            f"speedup {result['speedup']:.2f}x (per program-second {result['speedup_per_program_second']:.2f}x); "
            f"target {TARGET_SPEEDUP:g}x {'met' if result['target_met'] else 'missed'}"
        )
    print(f"wrote {args.out / (args.name + '.json')} and {args.out / (args.name + '.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
