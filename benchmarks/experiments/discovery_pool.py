"""One arm's held-out seeds pooled over several results files of the discovery study, at one
budget, on one task or several: the study's results file, with the paired differences against
each baseline and a sign test.

``python benchmarks/experiments/discovery_pool.py --at 240 discovery_b16_heldout.json:b16
discovery_budget480.json:b16x2 discovery_b16_insults.json:b16 [--label b16] [--name discovery]``

Each source is ``FILE:ARM`` (a results file of ``discovery.py``, a bare name read from
``benchmarks/results/``); ``--label`` names the pooled arm in the rows (default: the first
source's arm). Every score is read from the source's best-so-far curves at ``--at`` executions
(the best of the first ``--at`` executions, chosen on public, shown on private), so a longer run
joins at the budget of the rest. A seed the arm was chosen on (the file's ``selection``) is left
out; one task and seed in two sources is refused, and so is a source with fewer executions than
``--at`` or a task whose direction differs between sources.

Writes ``benchmarks/results/NAME.json``: ``rows``, one per task and held-out seed (``task``,
``seed``, ``direction``, ``executions``, ``arm``, ``rl_private``, ``bon_scratch_private``,
``bon_mix_private``, ``aide_private``, and the ``source`` file); ``probe``, per task and seed, the
best known decisions' shares at the run's first and last probe (the last one ends the source's
run, ``run_executions``, which can be longer than ``--at``); ``probe_rose``, per task, in how
many seeds each of those shares rose and in how many all of them did; ``paired``, per task and
baseline, the mean ± s.e. of the differences (positive = the arm better), their standard
deviation, the seeds ahead and the one-sided sign test; ``selection``, per task, the seeds the
arm was chosen on and those pooled (``embedded_rl.selection``). ``NAME.png``: per task, each
seed's differences with their mean ± 2 s.e.
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
from _discovery_figures import best_at, differences, issue_row, paired
from _discovery_plot import pooled_plot
from embedded_rl import selection


# ---- pure ----------------------------------------------------------------------------------
def sign_test(diffs: list[float]) -> float | None:
    """One-sided sign test: the chance of at least this many positive differences among the
    non-zero ones if each were positive with probability 1/2 (ties dropped); None without any."""
    signs = [d > 0 for d in diffs if d != 0]
    n, k = len(signs), sum(signs)
    if n == 0:
        return None
    return sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n


def source_rows(
    result: dict[str, Any], arm: str, at: int, source: str, label: str
) -> list[dict[str, Any]]:
    """Per held-out seed of ``arm`` in one results file, a results row (``issue_row``): its and
    each baseline's private score after ``at`` executions (None where a curve is shorter or has
    no valid solution yet), the arm named ``label``, and the file it came from."""
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
    task, direction = result["task"], result["direction"]
    return [
        {
            **issue_row(task, s, direction, at, label, rl[i], {b: base[b][i] for b in base}),
            "source": source,
        }
        for i, s in enumerate(seeds)
    ]


def source_probe(result: dict[str, Any], arm: str, seeds: list[int]) -> dict[str, Any]:
    """Per seed, the arm's probe in one results file (the best known decisions' shares first and
    last, and the steps) with the executions of the run whose last probe it is."""
    probe = (result.get("probe") or {}).get(result["task"], {}).get(arm, {})
    return {
        str(s): {**probe[str(s)], "run_executions": int(result["executions"])}
        for s in seeds
        if probe.get(str(s))
    }


def probe_rises(probe: dict[str, Any]) -> dict[str, Any]:
    """Over one task's seeds (seed -> first and last shares): per decision, in how many seeds its
    share rose from the first probe to the last; ``all``, in how many every one of them rose."""
    runs = [v for v in probe.values() if v.get("first") and v.get("last")]
    keys = list(dict.fromkeys(k for v in runs for k in v["first"]))
    rose = [{k: v["last"].get(k, 0.0) > v["first"].get(k, 0.0) for k in keys} for v in runs]
    return {
        "seeds": len(runs),
        "rose": {k: sum(r[k] for r in rose) for k in keys},
        "all": sum(all(r.values()) for r in rose),
    }


def pool(rows: list[dict[str, Any]], baselines: list[str], lower: bool) -> dict[str, Any]:
    """Per baseline (a row key ``<baseline>_private``): the paired differences
    (``_discovery_figures.paired``: mean, s.e., seeds ahead), their standard deviation and the
    one-sided sign test, over the seeds that have both."""
    out = {}
    for b in baselines:
        rl = [r["rl_private"] for r in rows]
        other = [r.get(f"{b}_private") for r in rows]
        stats = paired(rl, other, lower)
        diffs = differences(rl, other, lower)
        sd = stats["se"] * math.sqrt(stats["n"]) if stats["se"] is not None else None
        seeds = [r["seed"] for r in rows if r.get(f"{b}_private") is not None]
        out[b] = {**stats, "sd": sd, "seeds": seeds, "sign_test_p": sign_test(diffs)}
    return out


# ---- the script ----------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sources", nargs="+", help="FILE:ARM, a results file of discovery.py")
    p.add_argument("--at", type=int, required=True, help="executions: the budget read")
    p.add_argument("--label", help="the pooled arm's name in the rows (default: the first ARM)")
    p.add_argument("--name", default="discovery")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    rows: list[dict[str, Any]] = []
    probe: dict[str, dict[str, Any]] = {}
    chosen_on: dict[str, set[int]] = {}
    label = args.label or args.sources[0].rpartition(":")[2]
    for spec in args.sources:
        name, _, arm = spec.rpartition(":")
        if not name or not arm:
            p.error(f"{spec!r}: write FILE:ARM")
        path = Path(name) if Path(name).is_file() else RESULTS / name
        result = json.loads(path.read_text())
        task = result["task"]
        if any(r["task"] == task and r["direction"] != result["direction"] for r in rows):
            p.error(f"{spec}: {task!r} is {result['direction']!r} here, not in an earlier source")
        try:
            found = source_rows(result, arm, args.at, path.name, label)
        except ValueError as e:
            p.error(str(e))
        again = {(r["task"], r["seed"]) for r in rows} & {(r["task"], r["seed"]) for r in found}
        if again:
            p.error(f"{spec}: {sorted(again)} are already in an earlier source")
        rows += found
        probe.setdefault(task, {}).update(source_probe(result, arm, [r["seed"] for r in found]))
        chosen = (result.get("selection") or {}).get("chosen_on_seeds") or []
        chosen_on.setdefault(task, set()).update(chosen)
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    rows.sort(key=lambda r: (tasks.index(r["task"]), r["seed"]))
    paired_by_task = {}
    for task in tasks:
        mine = [r for r in rows if r["task"] == task]
        keys = {k.removesuffix("_private") for r in mine for k in r if k.endswith("_private")}
        paired_by_task[task] = pool(mine, sorted(keys - {"rl"}), mine[0]["direction"] == "lower")
    result = {
        "arm": label,
        "executions": args.at,
        "sources": args.sources,
        "rows": rows,
        "probe": probe,
        "probe_rose": {t: probe_rises(by_seed) for t, by_seed in probe.items()},
        "paired": paired_by_task,
        "selection": {
            t: selection(sorted(chosen_on[t]), [r["seed"] for r in rows if r["task"] == t])
            for t in tasks
        },
        "commit": git_commit(),
        "command": command_line(),
        "machine": machine_info(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(result, indent=1) + "\n")
    pooled_plot(result, args.out / f"{args.name}.png")
    for task, by_baseline in paired_by_task.items():
        for b, d in by_baseline.items():
            if d["mean"] is not None:
                print(
                    f"{task}: {label} - {b} at {args.at}: {d['mean']:+.4f} ±"
                    f" {d['se'] or 0:.4f} over {d['n']} seeds (s.d. {d['sd'] or 0:.4f}), ahead"
                    f" on {d['better_in']}, sign test p = {d['sign_test_p']:.3f}"
                )
    for task, r in result["probe_rose"].items():
        shares = ", ".join(f"{k} {n}" for k, n in r["rose"].items())
        print(f"{task}: probe rose over {r['seeds']} seeds: {shares}; all of them {r['all']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
