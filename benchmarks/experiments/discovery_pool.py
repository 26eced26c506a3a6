"""One arm's held-out seeds pooled over several results files of the discovery study, at one
budget: the paired differences against each baseline, with a sign test.

``python benchmarks/experiments/discovery_pool.py --at 240 discovery_b16_heldout.json:b16
discovery_budget480.json:b16x2 discovery_b16_seeds12.json:b16 [--name discovery_b16_pooled]``

Each source is ``FILE:ARM`` (a results file of ``discovery.py``, a bare name read from
``benchmarks/results/``). Every value is read from the source's best-so-far curves at ``--at``
executions (the best of the first ``--at`` executions, chosen on public, shown on private), so
a longer run joins at the budget of the rest. A seed the arm was chosen on (the file's
``selection``) is left out, a seed in two sources is refused, and so is a source of another task
or with fewer executions than ``--at``. Writes ``benchmarks/results/NAME.json`` (``rows``: per
seed the arm's and each baseline's private score; ``paired``: per baseline the mean ± s.e. of
the differences, positive = the arm better, their standard deviation, the seeds ahead and the
one-sided sign test).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common
from _common import RESULTS, command_line, git_commit, machine_info
from discovery import best_at, differences, paired


# ---- pure ----------------------------------------------------------------------------------
def sign_test(diffs: list[float]) -> float | None:
    """One-sided sign test: the chance of at least this many positive differences among the
    non-zero ones if each were positive with probability 1/2 (ties dropped); None without any."""
    signs = [d > 0 for d in diffs if d != 0]
    n, k = len(signs), sum(signs)
    if n == 0:
        return None
    return sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n


def source_rows(result: dict[str, Any], arm: str, at: int, source: str) -> list[dict[str, Any]]:
    """Per held-out seed of ``arm`` in one results file: its and each baseline's private score
    after ``at`` executions (None where a curve is shorter or has no valid solution yet)."""
    if arm not in result["arms"]:
        raise ValueError(f"{source}: no arm {arm!r} (its arms: {', '.join(result['arms'])})")
    if int(result["executions"]) < at:
        raise ValueError(f"{source}: {result['executions']} executions, fewer than --at {at}")
    chosen = set((result.get("selection") or {}).get("chosen_on_seeds") or [])
    seeds = sorted(int(s) for s in result["arms"][arm] if int(s) not in chosen)
    by_seed = {int(s): v for s, v in result["arms"][arm].items()}
    rl = best_at(by_seed, seeds, at)
    base = {
        b: best_at({int(s): v for s, v in per.items()}, seeds, at)
        for b, per in result.get("baselines", {}).items()
    }
    return [
        {"seed": s, "source": source, "rl": rl[i], **{b: base[b][i] for b in base}}
        for i, s in enumerate(seeds)
    ]


def pool(rows: list[dict[str, Any]], baselines: list[str], lower: bool) -> dict[str, Any]:
    """Per baseline: the paired differences (``discovery.paired``: mean, s.e., seeds ahead),
    their standard deviation and the one-sided sign test, over the seeds that have both."""
    out = {}
    for b in baselines:
        rl = [r["rl"] for r in rows]
        other = [r.get(b) for r in rows]
        stats = paired(rl, other, lower)
        diffs = differences(rl, other, lower)
        sd = stats["se"] * math.sqrt(stats["n"]) if stats["se"] is not None else None
        out[b] = {**stats, "sd": sd, "seeds": [r["seed"] for r in rows if r.get(b) is not None],
                  "sign_test_p": sign_test(diffs)}  # fmt: skip
    return out


# ---- the script ----------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sources", nargs="+", help="FILE:ARM, a results file of discovery.py")
    p.add_argument("--at", type=int, required=True, help="executions: the budget read")
    p.add_argument("--name", default="discovery_pooled")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    rows: list[dict[str, Any]] = []
    task = direction = None
    for spec in args.sources:
        name, _, arm = spec.rpartition(":")
        if not name or not arm:
            p.error(f"{spec!r}: write FILE:ARM")
        path = Path(name) if Path(name).is_file() else RESULTS / name
        result = json.loads(path.read_text())
        if task is not None and (result["task"], result["direction"]) != (task, direction):
            p.error(f"{spec}: task {result['task']!r}, not {task!r}: pool one task at a time")
        task, direction = result["task"], result["direction"]
        try:
            found = source_rows(result, arm, args.at, path.name)
        except ValueError as e:
            p.error(str(e))
        again = {r["seed"] for r in rows} & {r["seed"] for r in found}
        if again:
            p.error(f"{spec}: seeds {sorted(again)} are already in an earlier source")
        rows += found
    rows.sort(key=lambda r: r["seed"])
    baselines = sorted({k for r in rows for k in r} - {"seed", "source", "rl"})
    result = {
        "task": task,
        "direction": direction,
        "executions": args.at,
        "sources": args.sources,
        "rows": rows,
        "paired": pool(rows, baselines, direction == "lower"),
        "commit": git_commit(),
        "command": command_line(),
        "machine": machine_info(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(result, indent=1) + "\n")
    for b, d in result["paired"].items():
        if d["mean"] is not None:
            print(
                f"arm - {b} at {args.at}: {d['mean']:+.4f} ± {d['se'] or 0:.4f} over {d['n']}"
                f" seeds (s.d. {d['sd'] or 0:.4f}), ahead on {d['better_in']},"
                f" sign test p = {d['sign_test_p']:.3f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
