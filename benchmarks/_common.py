"""Small helpers shared by the system benchmarks: machine facts, results files, statistics and
the workload (real Python programs of chosen durations for a stand-in task).

The workload: every program reads the task's ``./input/train.csv`` and ``test.csv``, fits a
one-feature nearest-centroid classifier, spends the rest of its drawn duration (sleeping, or
busy in pure-Python arithmetic for ``compute_frac`` of it), writes a real ``submission.csv``
(graded by mlerl.bench) and finally prints its own start and end time (``SELF_TIME``), so a
benchmark can tell the program's own time from the sandbox's time around it.
"""

from __future__ import annotations

import json
import math
import os
import platform
import random
import re
import shlex
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
TASK_ID = "standin-cancer-auc-tiny"
SELF_TIME = "MLERL_BENCH_SELF_TIME"
_PID_RE = re.compile(r"^PROGRAM_ID = (\d+)$", re.MULTILINE)
_SELF_RE = re.compile(rf"^{SELF_TIME} ([0-9.]+) ([0-9.]+)$", re.MULTILINE)


# ---- machine and results --------------------------------------------------------------------
def git_commit() -> str:
    """The checked-out commit, with ``+dirty`` when the working tree has changes."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def command_line() -> str:
    """The exact command that is running (interpreter path shortened to ``python``)."""
    return " ".join(["python", *map(shlex.quote, sys.argv)])


def machine_info() -> dict[str, Any]:
    """Facts about the host that change how a timing should be read."""
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
    }


def host_cpu_jiffies() -> tuple[int, int] | None:
    """(busy, total) CPU jiffies of the whole host since boot (Linux ``/proc/stat``), else None."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            values = [int(x) for x in fh.readline().split()[1:9]]  # user .. steal
    except (OSError, ValueError):
        return None
    return sum(values) - values[3] - values[4], sum(values)  # minus idle and iowait


def host_busy_frac(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """Share of the host's CPU time that was busy between two :func:`host_cpu_jiffies` readings."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def int_list(text: str) -> list[int]:
    """A comma-separated list of integers, as the scripts' ``--seeds`` and ``--chosen-on`` take
    (``argparse`` type; empty items are skipped)."""
    return [int(x) for x in text.split(",") if x]


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n", encoding="utf-8")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """One dict per non-empty line of a run's ``samples.jsonl`` / ``metrics.jsonl`` ([] for a
    missing file); a malformed line raises ``ValueError`` naming the file and line, so a figure
    is never computed over silently dropped samples."""
    if not path.is_file():
        return []
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{n}: not JSON ({exc})") from None
    return rows


def mean_se(values: list[float | None]) -> dict[str, Any]:
    """Mean and standard error (sample std / sqrt(n); None below two values) over the defined
    values, with their count."""
    v = [float(x) for x in values if x is not None]
    if not v:
        return {"mean": None, "se": None, "n": 0}
    mean = sum(v) / len(v)
    se = math.sqrt(sum((x - mean) ** 2 for x in v) / (len(v) - 1) / len(v)) if len(v) > 1 else None
    return {"mean": mean, "se": se, "n": len(v)}


def fmt_mean_se(x: dict[str, Any], spec: str = ".3f", none: str = "-") -> str:
    """A ``{"mean", "se"}`` summary as ``mean ± se`` (``mean`` alone without an s.e.; ``none``
    without a mean)."""
    if x["mean"] is None:
        return none
    return f"{x['mean']:{spec}}" + (f" ± {x['se']:{spec}}" if x["se"] is not None else "")


def stats(values: list[float]) -> dict[str, float]:
    """mean, median, p90, min, max (all 0 for no values)."""
    if not values:
        return {"n": 0, "mean": 0.0, "median": 0.0, "p90": 0.0, "min": 0.0, "max": 0.0}
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)]
    return {
        "n": len(values),
        "mean": statistics.fmean(values),
        "median": statistics.median(values),
        "p90": p90,
        "min": ordered[0],
        "max": ordered[-1],
    }


def overlap(a: float, b: float, lo: float, hi: float) -> float:
    """Length of [a, b] inside [lo, hi]."""
    return max(0.0, min(b, hi) - max(a, lo))


def lanes(intervals: list[tuple[float, float]]) -> list[int]:
    """Assign intervals to the lowest free lane (for drawing executions as slots)."""
    ends: list[float] = []
    out = [0] * len(intervals)
    for i in sorted(range(len(intervals)), key=lambda k: intervals[k][0]):
        start, end = intervals[i]
        free = next((j for j, e in enumerate(ends) if e <= start + 1e-6), None)
        if free is None:
            ends.append(end)
            free = len(ends) - 1
        ends[free] = end
        out[i] = free
    return out


# ---- workload -------------------------------------------------------------------------------
def draw_durations(
    n: int, median_s: float, sigma: float, seed: int, lo: float, hi: float
) -> list[float]:
    """``n`` seeded lognormal durations (median ``median_s``, log-std ``sigma``) clipped to [lo, hi]."""
    if n < 1 or median_s <= 0 or sigma < 0 or not 0 < lo <= hi:
        raise ValueError("draw_durations: need n >= 1, median > 0, sigma >= 0 and 0 < lo <= hi")
    rng = random.Random(seed)
    return [
        round(min(hi, max(lo, rng.lognormvariate(math.log(median_s), sigma))), 3) for _ in range(n)
    ]


def program_source(pid: int, duration_s: float, compute_frac: float = 0.0) -> str:
    """A real program for the stand-in task that runs for about ``duration_s`` seconds."""
    if not 0.0 <= compute_frac <= 1.0:
        raise ValueError("compute_frac: must be in [0, 1]")
    return f'''import time
_t0 = time.time()
import csv
PROGRAM_ID = {pid}
DURATION_S = {duration_s!r}
COMPUTE_S = {duration_s * compute_frac!r}
with open("./input/train.csv", newline="") as fh:
    train = list(csv.DictReader(fh))
with open("./input/test.csv", newline="") as fh:
    test = list(csv.DictReader(fh))
feature = [c for c in train[0] if c not in ("id", "target")][PROGRAM_ID % 5]
pos = [float(r[feature]) for r in train if r["target"] == "1"]
neg = [float(r[feature]) for r in train if r["target"] != "1"]
centre = (sum(pos) / len(pos) + sum(neg) / len(neg)) / 2
values = [float(r[feature]) for r in train]
scale = (sum((v - centre) ** 2 for v in values) / len(values)) ** 0.5 or 1.0
sign = 1.0 if sum(pos) / len(pos) > sum(neg) / len(neg) else -1.0
acc = 0
while time.time() - _t0 < COMPUTE_S:
    acc += sum(i * i for i in range(2000))
time.sleep(max(0.0, DURATION_S - (time.time() - _t0)))
with open("submission.csv", "w", newline="") as fh:
    out = csv.writer(fh)
    out.writerow(["id", "target"])
    for r in test:
        z = max(-30.0, min(30.0, sign * (float(r[feature]) - centre) / scale))
        out.writerow([r["id"], 1.0 / (1.0 + 2.718281828 ** -z)])
print("{SELF_TIME}", repr(_t0), repr(time.time()))
'''


def response_text(pid: int, duration_s: float, compute_frac: float = 0.0) -> str:
    """What the scripted policy 'writes': a short plan and one fenced program."""
    plan = (
        "Fit a nearest-centroid classifier on one feature and predict a sigmoid of the "
        "distance to the midpoint of the two class means."
    )
    return f"{plan}\n```python\n{program_source(pid, duration_s, compute_frac)}```"


def program_id(code: str) -> int | None:
    """The ``PROGRAM_ID`` of a workload program (also after instrumentation), else None."""
    m = _PID_RE.search(code)
    return int(m.group(1)) if m else None


def self_time(stdout: str) -> tuple[float, float] | None:
    """(start, end) Unix times the program printed about itself, else None."""
    m = _SELF_RE.search(stdout)
    return (float(m.group(1)), float(m.group(2))) if m else None


# ---- setup ----------------------------------------------------------------------------------
def prepare_task(data_dir: Path) -> Any:
    """Prepare the stand-in task under ``data_dir`` with mlerl.bench; its TaskSpec."""
    from mlerl.bench import Registry, prepare

    prepare(TASK_ID, data_dir)
    return Registry.load(None, data_dir).get(TASK_ID)


def build_policy(out_dir: Path, hidden_size: int, num_layers: int) -> Path:
    """The tiny Qwen2 test model with its trained BPE tokenizer (mlerl.actors.build_tiny_model_dir)."""
    from mlerl.actors import build_tiny_model_dir

    if hidden_size % 64:
        raise ValueError("hidden_size: must be a multiple of 64 (head_dim 64)")
    return build_tiny_model_dir(out_dir, hidden_size=hidden_size, num_layers=num_layers)
