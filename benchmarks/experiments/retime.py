"""Finding 2 timed in one sitting: two runs' second-half programs, run again side by side.

``python benchmarks/experiments/retime.py --run-a DIR --run-b DIR [--k 24] [--seed 0] [--out FILE]``

Why: the duration finding compares how long the programs each run CHOSE take. The times a
run's ``samples.jsonl`` records measure its host as much as its policy: two runs of a grid that
ran in different sittings (two jobs at a time in one, twelve in the other) differ by a factor of
about 3 for the same program text. ``duration_ablation.typical_durations`` removes that only for
program texts both runs happened to run. This step removes it for all of them: it draws ``k``
samples that ran in the second half of training from each run (uniformly over samples, so a
program the policy chose often counts often), and runs the ``2k`` programs again, one at a time,
in the order A B B A A B B A ... (so a drift in the host's load hits both runs alike), on the
task's public data through the local sandbox, as ``mlerl.embedded.run_program`` runs them.

Writes per run its ``n``, the mean time and every time (with its sample id), and ``a_minus_b``:
the difference of the means. ``paper_miniature.py --retime K`` runs this for each seed of the
duration arms and uses the result as finding 2's figure.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the neighbouring experiments
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common
import duration_ablation  # noqa: E402
import embedded_rl  # noqa: E402
from _common import command_line, git_commit, machine_info, read_jsonl  # noqa: E402

TIMEOUT_S = 600.0  # far above any testbed program; a program that hits it is timed at the limit


# ---- pure ------------------------------------------------------------------------------------
def second_half_ran(samples: list[dict[str, Any]], task: str, updates: int) -> list[dict[str, Any]]:
    """The task's samples of the second half of training whose program ran (the population of
    ``exec_ran_s_second_half``)."""
    mine = [s for s in samples if s.get("task_id") == task]
    half = duration_ablation.windows(mine, updates)["second_half"]
    return [s for s in half if s["status"] != "not_run" and s.get("code")]


def draw(
    a: list[dict[str, Any]], b: list[dict[str, Any]], k: int, seed: int
) -> list[tuple[str, dict[str, Any]]]:
    """``min(k, len)`` samples of each run, drawn without replacement, interleaved A B B A A B B A
    ...; a run with fewer samples than the other leaves the other's rest at the end."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    rng = random.Random(seed)
    pa = rng.sample(a, min(k, len(a)))
    pb = rng.sample(b, min(k, len(b)))
    order: list[tuple[str, dict[str, Any]]] = []
    for i in range(max(len(pa), len(pb))):
        pair = [("a", pa[i] if i < len(pa) else None), ("b", pb[i] if i < len(pb) else None)]
        for side, s in pair if i % 2 == 0 else pair[::-1]:
            if s is not None:
                order.append((side, s))
    return order


def summarise(order: list[tuple[str, dict[str, Any]]], seconds: list[float]) -> dict[str, Any]:
    """Per side the number of programs run, their mean time and every time; ``a_minus_b``."""
    if len(order) != len(seconds):
        raise ValueError(f"{len(order)} programs but {len(seconds)} times")
    out: dict[str, Any] = {}
    for side in ("a", "b"):
        rows = [(s, t) for (x, s), t in zip(order, seconds) if x == side]
        out[side] = {
            "n": len(rows),
            "mean_s": sum(t for _, t in rows) / len(rows) if rows else None,
            "times": [{"sample_id": s.get("sample_id"), "seconds": t} for s, t in rows],
        }
    ma, mb = out["a"]["mean_s"], out["b"]["mean_s"]
    out["a_minus_b"] = None if ma is None or mb is None else ma - mb
    return out


# ---- running ---------------------------------------------------------------------------------
def task_of(run_dir: Path) -> str:
    """The one task a run trained on."""
    report = json.loads((run_dir / "report.json").read_text())
    tasks = list(report["trained"]["per_seed"][0]["tasks"])
    if len(tasks) != 1:
        raise ValueError(f"{run_dir}: one task per run, found {tasks}")
    return tasks[0]


def data_dir_of(run_dir: Path) -> Path:
    """The task data a run read (``tasks.data_dir`` of its ``config.yaml``)."""
    import yaml

    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    return Path(str(cfg["tasks"]["data_dir"])).expanduser()


def measure(
    run_a: Path, run_b: Path, k: int, seed: int, data_dir: Path | None = None
) -> dict[str, Any]:
    """Draw and run both runs' second-half programs (see the module docstring) on the task
    data at ``data_dir`` (default: run A's)."""
    from mlerl.bench import Registry, prepare
    from mlerl.embedded import run_program

    data_dir = data_dir_of(run_a) if data_dir is None else data_dir

    task_id = task_of(run_a)
    if task_of(run_b) != task_id:
        raise ValueError(f"{run_a} ran {task_id} but {run_b} ran {task_of(run_b)}")
    pools = {
        side: second_half_ran(read_jsonl(d / "samples.jsonl"), task_id, embedded_rl.max_updates(d))
        for side, d in (("a", run_a), ("b", run_b))
    }
    empty = [str(d) for side, d in (("a", run_a), ("b", run_b)) if not pools[side]]
    if empty:
        raise ValueError(f"no program ran in the second half of training of {', '.join(empty)}")
    order = draw(pools["a"], pools["b"], k, seed)
    prepare(task_id, data_dir)
    task = Registry.load(data_dir=data_dir).get(task_id)
    seconds = []
    for i, (side, s) in enumerate(order):
        outcome = run_program(s["code"], task, TIMEOUT_S)
        seconds.append(float(outcome.seconds))
        print(
            f"retime {i + 1}/{len(order)} {side} {s.get('sample_id')}: {outcome.seconds:.1f} s "
            f"(ran {float(s['duration_s']):.1f} s in training)",
            flush=True,
        )
    return {
        "command": command_line(),
        "commit": git_commit(),
        "machine": machine_info(),
        "task": task_id,
        "k": k,
        "seed": seed,
        "runs": {"a": str(run_a), "b": str(run_b)},
        "pool": {side: len(p) for side, p in pools.items()},
        **summarise(order, seconds),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run-a", type=Path, required=True)
    p.add_argument("--run-b", type=Path, required=True)
    p.add_argument("--k", type=int, default=24, help="programs drawn from each run (default 24)")
    p.add_argument("--seed", type=int, default=0, help="seed of the draw (default 0)")
    p.add_argument("--data-dir", type=Path, default=None, help="task data (default: run A's)")
    p.add_argument("--out", type=Path, default=None, help="write the result here (JSON)")
    args = p.parse_args(argv)
    if args.k < 1:
        p.error("--k must be >= 1")
    result = measure(args.run_a, args.run_b, args.k, args.seed, args.data_dir)
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1))
    print(
        f"a: {result['a']['n']} programs, mean {result['a']['mean_s']:.2f} s; "
        f"b: {result['b']['n']} programs, mean {result['b']['mean_s']:.2f} s; "
        f"a - b {result['a_minus_b']:+.2f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
