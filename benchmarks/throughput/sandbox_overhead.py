"""Sandbox throughput, per-run overhead and a leak soak (not a test).

``python benchmarks/throughput/sandbox_overhead.py [--soak 1000] [--backends local,docker] [--out PATH]``
(default ``benchmarks/results/sandbox.json``)

Measured in one process, in one run, on whatever host runs it: executions/s of a trivial
program at concurrency 1, 2, 4 per backend (runs back to back); mean latency next to a bare
``python -c pass`` spawn and (Docker) ``docker run --rm`` of the same image; then ``soak``
executions at concurrency 4 and a count of what was left behind (processes, containers,
cgroups, dirs).

The local backend is also timed one run at a time with a pause between runs (as in training,
where programs are generated between executions), with sandboxes started ahead
(``SandboxConfig.prewarm=2``, opt-in) and without (``prewarm=0``, the default), next to a bare spawn
timed the same way, with the CPU seconds each execution costs (this process and all its
children, sandboxes started ahead and discarded included): starting ahead hides the start-up
latency, it does not remove its CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from mlerl.sandbox import ExecutionRequest, Limits, SandboxConfig, leftovers, make_sandbox

RESULTS = Path(__file__).resolve().parents[1] / "results"
TRIVIAL = "pass\n"


def _processes_with(token: str) -> int:
    needle = f"MLERL_BENCH_TOKEN={token}".encode()
    count = 0
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                count += needle in f.read()
        except (OSError, ValueError):
            continue
    return count


async def _spawn_s(argv: list[str], n: int) -> float:
    """Mean seconds to spawn and wait for ``argv``."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
        await proc.wait()
        times.append(time.perf_counter() - t)
    return statistics.mean(times)


def _cpu_s() -> float:
    """Busy CPU seconds of the whole machine so far (``/proc/stat``: every process, so also
    a sandbox's processes that are not this process's reaped descendants)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    busy = sum(fields) - fields[3] - fields[4]  # all but idle and iowait
    return busy / os.sysconf("SC_CLK_TCK")


async def _idle_cpu_s(seconds: float) -> float:
    """The machine's busy CPU seconds per second with this process asleep (the background)."""
    cpu0 = _cpu_s()
    await asyncio.sleep(seconds)
    return (_cpu_s() - cpu0) / seconds


def _summary(
    latencies: list[float], cpu_s: float, seconds: float, background: float
) -> dict[str, float]:
    """Latency figures, and the machine's CPU per execution less the background's."""
    return {
        "median_s": round(statistics.median(latencies), 4),
        "mean_s": round(statistics.mean(latencies), 4),
        "cpu_s_per_exec": round((cpu_s - background * seconds) / len(latencies), 4),
    }


async def _paced(
    config: SandboxConfig, token: str, n: int, gap_s: float, background: float
) -> dict[str, float]:
    """``n`` runs one at a time, ``gap_s`` apart: latency and CPU per execution."""
    sandbox = make_sandbox(SandboxConfig(**(vars(config) | {"max_concurrency": 1})))
    request = ExecutionRequest(
        program=TRIVIAL,
        limits=Limits(wall_time_s=60, memory_mb=512),
        collect=(),
        env={"MLERL_BENCH_TOKEN": token},
    )
    latencies = []
    try:
        await sandbox.run(request)
        await asyncio.sleep(gap_s)
        cpu0, t0 = _cpu_s(), time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            await sandbox.run(request)
            latencies.append(time.perf_counter() - t)
            await asyncio.sleep(gap_s)
    finally:
        await sandbox.close()
    return _summary(latencies, _cpu_s() - cpu0, time.perf_counter() - t0, background)


async def _paced_bare(n: int, gap_s: float, background: float) -> dict[str, float]:
    latencies = []
    cpu0, t0 = _cpu_s(), time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            "pass",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await proc.wait()
        latencies.append(time.perf_counter() - t)
        await asyncio.sleep(gap_s)
    return _summary(latencies, _cpu_s() - cpu0, time.perf_counter() - t0, background)


async def _throughput(
    config: SandboxConfig, token: str, concurrency: int, n: int
) -> dict[str, Any]:
    sandbox = make_sandbox(SandboxConfig(**(vars(config) | {"max_concurrency": concurrency})))
    request = ExecutionRequest(
        program=TRIVIAL,
        limits=Limits(wall_time_s=60, memory_mb=512),
        collect=(),
        env={"MLERL_BENCH_TOKEN": token},
    )
    try:
        await sandbox.run(request)  # warm-up (Docker: connect + start-up reaper)
        latencies: list[float] = []

        async def one() -> str:
            t = time.perf_counter()
            r = await sandbox.run(request)
            latencies.append(time.perf_counter() - t)
            return r.status.value

        t0 = time.perf_counter()
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(one()) for _ in range(n)]
        elapsed = time.perf_counter() - t0
    finally:
        await sandbox.close()
    return {
        "concurrency": concurrency,
        "n": n,
        "exec_per_s": round(n / elapsed, 2),
        "mean_latency_incl_queue_s": round(statistics.mean(latencies), 4),
        "statuses": dict(Counter(t.result() for t in tasks)),
    }


async def _leaks(config: SandboxConfig, token: str) -> dict[str, int]:
    return {"processes": _processes_with(token), **await leftovers(config)}


async def _backend(backend: str, soak: int, root: str) -> dict[str, Any]:
    config = SandboxConfig(backend=backend, work_root=root)
    token = uuid.uuid4().hex
    rows = [await _throughput(config, token, c, n) for c, n in ((1, 20), (2, 30), (4, 40))]
    out: dict[str, Any] = {
        "throughput": rows,
        "overhead_s": {"sandbox_run": round(1 / rows[0]["exec_per_s"], 4)},
    }
    if backend == "docker" and shutil.which("docker"):
        out["overhead_s"]["docker_run_rm"] = round(
            await _spawn_s(
                [
                    "docker",
                    "run",
                    "--rm",
                    "--network",
                    "none",
                    config.image,
                    "python3",
                    "-c",
                    "pass",
                ],
                10,
            ),
            4,
        )
    if backend == "local":
        n, gap = 30, 0.25
        background = await _idle_cpu_s(n * gap)
        paced = {
            "runs": n,
            "gap_s": gap,
            "background_cpu_per_s": round(background, 4),
            "bare_python_spawn": await _paced_bare(n, gap, background),
            "prewarm": await _paced(
                SandboxConfig(**(vars(config) | {"prewarm": 2})), token, n, gap, background
            ),
            "prewarm_0": await _paced(
                SandboxConfig(**(vars(config) | {"prewarm": 0})), token, n, gap, background
            ),
        }
        bare = paced["bare_python_spawn"]["median_s"]
        for key in ("prewarm", "prewarm_0"):
            paced[key]["median_over_bare"] = round(paced[key]["median_s"] / bare, 2)
        out["paced"] = paced
    if soak:
        t0 = time.perf_counter()
        soak_row = await _throughput(config, token, 4, soak)
        out["soak"] = soak_row | {
            "seconds": round(time.perf_counter() - t0, 1),
            "leaked": await _leaks(config, token),
        }
    return out


async def bench(backends: list[str], soak: int, out_path: Path) -> dict[str, Any]:
    """Run the benchmark, write ``out_path`` (JSON) and return the figures."""
    root = tempfile.mkdtemp(prefix="mlerl-sandbox-bench-")
    try:
        results: dict[str, Any] = {
            "program": TRIVIAL.strip(),
            "host": {
                "python": sys.version.split()[0],
                "machine": platform.machine(),
                "cpus": os.cpu_count(),
                "load_avg": os.getloadavg(),
            },
            "bare_python_spawn_s": round(await _spawn_s([sys.executable, "-c", "pass"], 20), 4),
            "soak_count": soak,
        }
        for backend in backends:
            results[backend] = await _backend(backend, soak, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(results, indent=2) + "\n")
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--soak", type=int, default=1000, help="executions in the soak")
    p.add_argument("--backends", default="local,docker")
    p.add_argument("--out", type=Path, default=RESULTS / "sandbox.json")
    args = p.parse_args(argv)
    print(json.dumps(asyncio.run(bench(args.backends.split(","), args.soak, args.out)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
