"""Prepare and grading latencies of the stand-in tasks, written to a JSON file.

``python benchmarks/throughput/grading.py [--out benchmarks/results/bench.json] [--repeats 3]``

Measures wall-clock seconds (median of ``repeats``) for: preparing each stand-in (full and
tiny), grading its sample submission in-process, and grading it in a subprocess (which adds
an interpreter start and imports). Figures depend on machine load; the file records the host
CPU count and load average next to them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from mlerl.bench import Registry, grade_in_subprocess, grade_submission, prepare

RESULTS = Path(__file__).resolve().parents[1] / "results"


def _timed(fn, repeats: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times), 4)


def run_benchmark(out: Path, repeats: int = 3) -> dict:
    results: dict = {
        "cpus": os.cpu_count(),
        "loadavg_1m": os.getloadavg()[0],
        "repeats": repeats,
        "tasks": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for task_id in Registry.load().ids(kind="standin"):  # each stand-in and its -tiny variant
            prep = _timed(lambda t=task_id: prepare(t, tmp, force=True), 1)
            task = prepare(task_id, tmp)
            sample = task.sample_submission_path
            results["tasks"][task_id] = {
                "prepare_s": prep,
                "grade_in_process_s": _timed(lambda: grade_submission(task, sample), repeats),
                "grade_subprocess_s": _timed(
                    lambda: grade_in_subprocess(task, sample, 120), repeats
                ),
            }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=RESULTS / "bench.json")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    run_benchmark(args.out, repeats=args.repeats)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
