"""Per-sample framework overhead of the real system.

``python benchmarks/throughput/overhead.py [--exec-s 1 10 --samples 16 --concurrency 2 --batch-size 2 --hf-generation]``

For programs that spend exactly ``--exec-s`` seconds (one run per value), the shipped actor
loop runs them through the real local sandbox, AST instrumentation (secure markers), grading
in a subprocess, the actor's durable outbox and the ZeroMQ sample stream to a learner process
that journals, acks and trains (``_system`` lists what is real). The policy is scripted, so
generation here is the framework's cost only (chat template + tokenisation); ``--hf-generation``
also times the real HF engine on the tiny Qwen2 for responses of the same length.

Each consumed sample's time from the start of its generation to the moment the learner takes
it into a batch is cut into contiguous parts (they sum to the end-to-end time exactly):

  generation      engine call start -> ``Sample.t_sampled``
  queueing        t_sampled -> instrumentation starts (waiting for an execution slot)
  instrumentation ``instrument_ast`` + ``prepare_run``
  sandbox         ``sandbox.run`` call -> program's first line, and its last line -> return
                  (the program's own time is what it measures itself and prints)
  execution       the program's own time (not overhead)
  grading         ``grade_in_subprocess`` (the execution slot is still held)
  bookkeeping     the actor's glue: request building, marker scan, output cleaning, reward,
                  admission, the durable outbox write (fsync)
  transport       ``SampleSender.send`` -> cumulative ack seen (learner journal fsync included)
  learner wait    ack -> the learner takes the sample into a batch (batch filling + training);
                  0 when the learner took it before the actor saw the ack

``framework_pct`` = (generation + queueing + instrumentation + sandbox + grading + bookkeeping)
/ execution: what the actor adds to a program before its sample is on its way; the
target is <= 5 % (median) for 1 s programs. Transport and learner wait overlap the next executions and
are reported beside it. Writes ``NAME.json`` and ``NAME.png`` (``--name``, default ``overhead``)
to ``--out`` (default ``benchmarks/results``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common
from _common import (
    RESULTS,
    build_policy,
    command_line,
    git_commit,
    host_busy_frac,
    machine_info,
    prepare_task,
    response_text,
    stats,
    write_json,
)
from _system import SystemConfig, run_mode

TARGET_PCT = 5.0  # the framework's target: <= 5 % median for 1 s programs
ACTOR_PARTS = ("generation", "queueing", "instrumentation", "sandbox", "grading", "bookkeeping")
PARTS = (*ACTOR_PARTS, "transport", "learner_wait")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--exec-s",
        type=float,
        nargs="+",
        default=[1.0, 10.0],
        help="program durations, one run each",
    )
    p.add_argument("--samples", type=int, default=16, help="samples consumed per run")
    p.add_argument("--batch-size", type=int, default=2, help="B of the learner")
    p.add_argument("--concurrency", type=int, default=2, help="C: executions at once")
    p.add_argument(
        "--oversample",
        type=float,
        default=1.0,
        help="admission m; 1 generates only when a slot is free, so queueing is pure slot wait",
    )
    p.add_argument(
        "--compute-frac",
        type=float,
        default=0.0,
        help="share of each program spent computing (else sleeping)",
    )
    p.add_argument("--hidden-size", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--torch-threads", type=int, default=1, help="threads of the learner process")
    p.add_argument("--description-chars", type=int, default=800)
    p.add_argument("--snippet-chars", type=int, default=300)
    p.add_argument(
        "--hf-generation", action="store_true", help="also time the real HF engine (tiny Qwen2)"
    )
    p.add_argument("--name", default="overhead", help="stem of the JSON and PNG file names")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    if any(d <= 0 for d in args.exec_s):
        p.error("--exec-s: durations must be > 0")
    if args.samples % args.batch_size:
        p.error("--samples must be a multiple of --batch-size")
    return args


def sample_parts(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """Contiguous parts (seconds) of every consumed sample, from the raw timings of a run."""
    probe, learner = raw["probe"], raw["learner"]
    gen = {pid: c for c in raw["engine_calls"] for pid in c["pids"]}
    execs = {e["pid"]: e for e in probe["execs"] if e["status"] != "cancelled"}
    taken = {sid: u["t_take"] for u in learner["updates"] for sid in u["samples"]}
    out = []
    for sid, t_take in taken.items():
        seq = int(sid.rsplit(":", 1)[1])
        sent, s = probe["sent"][seq], learner["samples"][sid]
        pid = sent["pid"]
        p0, p1 = probe["prepared"][pid]
        e, (g0, g1) = execs[pid], probe["graded"][pid]
        s0, s1 = e["self_time"]
        ack = probe["acked"][seq]
        end = max(t_take, ack)  # done when the learner has it in a batch and the actor has its ack
        parts = {
            "generation": s["t_sampled"] - gen[pid]["t_start"],
            "queueing": p0 - s["t_sampled"],
            "instrumentation": p1 - p0,
            "sandbox": (s0 - e["t_call"]) + (e["t_return"] - s1),
            "grading": g1 - g0,
            "bookkeeping": (e["t_call"] - p1) + (g0 - e["t_return"]) + (sent["t_send"] - g1),
            "transport": ack - sent["t_send"],
            "learner_wait": end - ack,
        }
        out.append(
            {
                "sample_id": sid,
                "pid": pid,
                "status": s["status"],
                "execution": s1 - s0,
                "total": end - gen[pid]["t_start"],
                **parts,
                "sandbox_detail": {
                    "setup": s["t_exec_started"] - e["t_call"],
                    "startup": s0 - s["t_exec_started"],
                    "exit": s["t_exec_finished"] - s1,
                    "teardown": e["t_return"] - s["t_exec_finished"],
                },
            }
        )
    return out


def summarise_run(raw: dict[str, Any], exec_s: float) -> dict[str, Any]:
    """Per-part statistics (ms and % of execution) of one run."""
    rows = sample_parts(raw)
    ms = lambda key: [1000 * r[key] for r in rows]  # noqa: E731
    pct = {k: statistics.fmean(100 * r[k] / r["execution"] for r in rows) for k in PARTS}
    framework = [100 * sum(r[k] for k in ACTOR_PARTS) / r["execution"] for r in rows]
    residual = [abs(r["total"] - r["execution"] - sum(r[k] for k in PARTS)) for r in rows]
    ups = raw["learner"]["updates"]
    wall = raw["t_end"] - raw["t_start"]
    return {
        "exec_s": exec_s,
        "samples": len(rows),
        "statuses": sorted({r["status"] for r in rows}),
        "execution_ms": stats(ms("execution")),
        "total_ms": stats(ms("total")),
        "overhead_ms": stats([1000 * (r["total"] - r["execution"]) for r in rows]),
        "parts_ms": {k: stats(ms(k)) for k in PARTS},
        "parts_pct_of_execution": pct,
        "sandbox_detail_ms": {
            k: stats([1000 * r["sandbox_detail"][k] for r in rows])
            for k in rows[0]["sandbox_detail"]
        },
        "framework_pct": stats(framework),
        "framework_pct_without_grading": statistics.fmean(
            100 * sum(r[k] for k in ACTOR_PARTS if k != "grading") / r["execution"] for r in rows
        ),
        "parts_sum_residual_ms_max": 1000 * max(residual),
        "target_pct": TARGET_PCT,
        "learner": {
            "update_s": stats([u["t_update_end"] - u["t_start"] for u in ups]),
            "publish_s": stats([u["t_end"] - u["t_update_end"] for u in ups]),
            "idle_frac": 1 - sum(u["t_end"] - u["t_start"] for u in ups) / wall,
        },
        "wall_s": wall,
        "host_cpu_busy_frac": host_busy_frac(*raw["host_cpu"]),
        "load_avg_before": raw["load_before"],
        "load_avg_after": raw["load_after"],
        "per_sample_ms": [
            {
                k: (round(1000 * v, 2) if isinstance(v, float) else v)
                for k, v in r.items()
                if k != "sandbox_detail"
            }
            for r in rows
        ],
    }


async def hf_generation(
    model_dir: Path, task: Any, args: argparse.Namespace, new_tokens: int
) -> dict[str, Any]:
    """Time the real HF engine generating ``concurrency`` responses of ``new_tokens`` tokens."""
    from mlerl.actors import HFEngine, PromptConfig, scratch_prompt
    from mlerl.protocol import SamplingParams

    import torch

    torch.set_num_threads(args.torch_threads)
    engine = HFEngine(model_dir)
    prompt = scratch_prompt(
        task,
        PromptConfig(description_chars=args.description_chars, snippet_chars=args.snippet_chars),
    )
    times, tokens = [], []
    try:
        for seed in range(4):  # the first call warms up; the median of the others is reported
            params = SamplingParams(max_new_tokens=new_tokens, temperature=0.7, seed=seed)
            t0 = time.time()
            out = await engine.generate([prompt] * args.concurrency, params)
            times.append(time.time() - t0)
            tokens.append(sum(len(c.token_ids) for c in out))
    finally:
        await engine.close()
    warm = statistics.median(times[1:])
    return {
        "batch": args.concurrency,
        "max_new_tokens": new_tokens,
        "torch_threads": args.torch_threads,
        "seconds_per_call": times,
        "tokens_per_call": tokens,
        "seconds_per_call_warm": warm,
        "seconds_per_sample_warm": warm / args.concurrency,
        "tokens_per_s_warm": statistics.median(tokens[1:]) / warm,
    }


def plot(result: dict[str, Any], path: Path) -> None:
    """Each part's mean share of the execution time (log scale), one bar per program duration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = result["runs"]
    labels = ["framework (actor parts)", *PARTS]
    fig, ax = plt.subplots(figsize=(9, 1.5 + 0.45 * len(labels) * max(1, len(runs)) / 1.5))
    height = 0.8 / len(runs)
    for i, run in enumerate(runs):
        values = [run["framework_pct"]["mean"], *(run["parts_pct_of_execution"][p] for p in PARTS)]
        ys = [k + i * height for k in range(len(labels))]
        ax.barh(
            ys, [max(v, 1e-3) for v in values], height=height, label=f"{run['exec_s']:g} s programs"
        )
        for y, v in zip(ys, values):
            ax.text(max(v, 1e-3) * 1.1, y, f"{v:.3g} %", va="center", fontsize=7)
    ax.axvline(TARGET_PCT, color="k", ls="--", lw=1, label=f"target {TARGET_PCT:g} % (framework)")
    ax.set_xscale("log")
    ax.set_yticks([k + 0.4 - height / 2 for k in range(len(labels))], labels)
    ax.invert_yaxis()
    ax.set_xlabel("mean time per sample, % of the program's own execution time")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from transformers import AutoTokenizer

    before = machine_info()  # its load_avg is the load before the run
    runs, hf = [], None
    with tempfile.TemporaryDirectory(prefix="mlerl-ovh-") as tmp:
        work = Path(tmp)
        task = prepare_task(work / "data")
        model_dir = build_policy(work / "policy", args.hidden_size, args.layers)
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        for i, exec_s in enumerate(args.exec_s):
            responses = [
                response_text(pid, exec_s, args.compute_frac)
                for pid in range(2 * args.samples + args.concurrency)
            ]
            cfg = SystemConfig(
                mode="async",
                samples=args.samples,
                batch_size=args.batch_size,
                concurrency=args.concurrency,
                oversample=args.oversample,
                torch_threads=args.torch_threads,
                description_chars=args.description_chars,
                snippet_chars=args.snippet_chars,
                exec_time_limit_s=exec_s * 3 + 60,
                watch_acks=True,
            )
            print(f"[{exec_s:g} s programs] running ...", flush=True)
            raw = asyncio.run(
                run_mode(cfg, task, model_dir, tokenizer, responses, work / f"run{i}")
            )
            runs.append(summarise_run(raw, exec_s))
        if args.hf_generation:
            new_tokens = round(statistics.fmean(len(tokenizer.encode(r)) + 1 for r in responses))
            hf = asyncio.run(hf_generation(model_dir, task, args, new_tokens))
    result = {
        "benchmark": "overhead",
        "command": command_line(),
        "git_commit": git_commit(),
        "machine": {**before, "load_avg_after": machine_info()["load_avg"]},
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "runs": runs,
        "hf_generation": hf,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / f"{args.name}.json", result)
    plot(result, args.out / f"{args.name}.png")
    for run in runs:
        ms = {k: round(v["mean"]) for k, v in run["parts_ms"].items()}
        print(
            f"{run['exec_s']:g} s programs (n={run['samples']}): execution {run['execution_ms']['mean']:.0f} ms; "
            f"framework {run['framework_pct']['mean']:.1f} % (target {TARGET_PCT:g} %, "
            f"{run['framework_pct_without_grading']:.1f} % without grading); parts (mean ms) {ms}"
        )
    if hf:
        print(
            f"HF engine: {hf['seconds_per_call_warm']:.2f} s per call of {hf['batch']} x {hf['max_new_tokens']} tokens "
            f"({hf['tokens_per_s_warm']:.0f} tok/s, {hf['seconds_per_sample_warm']:.2f} s per sample)"
        )
    print(f"wrote {args.out / (args.name + '.json')} and {args.out / (args.name + '.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
