"""Is the held-out best configuration the best in the settings space? A random search.

``python benchmarks/experiments/settings_search.py --data-dir DATA
[--task standin-materials-rmsle-tiny] [--programs 80] [--per-decision 2] [--seed 0]
[--name settings_search]``

Draws ``--programs`` settings blocks from the corpus generator's own distribution
(`mlerl.embedded._settings.draw`, the held-out combination NOT excluded), plus the task's best
known configuration (`embedded_prior.BEST`); then, around the three best by PUBLIC score, every
single-decision neighbour (``--per-decision`` draws per decision: a local search). Every program
runs in the sandbox on the public data and is graded on both halves; selection reads only the
public half.
Reports the top programs by public and by private score, the best known configuration's rank,
and the share of random draws within 10 % of it. Writes ``benchmarks/results/NAME.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common
from _common import RESULTS, command_line, git_commit, machine_info
from embedded_prior import BEST, _run


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", required=True, type=Path)
    p.add_argument("--task", default="standin-materials-rmsle-tiny")
    p.add_argument("--programs", type=int, default=80)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--per-decision", type=int, default=2)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--name", default="settings_search")
    args = p.parse_args()

    from mlerl.bench import Registry, prepare
    from mlerl.embedded import (
        Settings,
        change_setting,
        draw_settings,
        held_out,
        setting_decisions,
        settings_code,
        task_views,
    )

    t0 = time.time()
    prepare(args.task, args.data_dir)
    task = Registry.load(data_dir=args.data_dir).get(args.task)
    view = task_views(args.data_dir, [args.task])[0]
    rng = random.Random(f"search:{args.seed}")
    drawn: list[Settings] = []
    while len(drawn) < args.programs:
        s = draw_settings(view, rng)
        if s not in drawn:
            drawn.append(s)
    best = Settings(BEST[args.task]) if args.task in BEST else None
    first = [*drawn, *([best] if best else [])]
    runs = asyncio.run(_run([settings_code(view, s) for s in first], task, args.timeout))
    lower = bool(task.lower_is_better)
    # stage 2, a local search: single-decision neighbours (a few draws per decision) of the
    # three best by PUBLIC score
    ranked = sorted((r["public"], i) for i, r in enumerate(runs) if r["valid"])
    tops = [first[i] for _, i in (ranked if lower else ranked[::-1])[:3]]
    neighbours: list[Settings] = []
    for top in tops:
        for name in setting_decisions(view):
            for k in range(args.per_decision):
                child = change_setting(view, top, name, random.Random(f"{name}:{k}:{args.seed}"))
                if child is not None and child not in first and child not in neighbours:
                    neighbours.append(child)
    runs += asyncio.run(_run([settings_code(view, s) for s in neighbours], task, args.timeout))
    todo = [*first, *neighbours]
    rows = []
    for i, (s, r) in enumerate(zip(todo, runs, strict=True)):
        kind = (
            "random"
            if i < len(drawn)
            else ("best_known" if first[i : i + 1] == [best] else "neighbour")
        )
        rows.append({"kind": kind, "held_out": held_out(view, s), "settings": dict(s.lines), **r})
    valid = [r for r in rows if r["valid"]]

    def order(key: str) -> list[dict]:
        return sorted(valid, key=lambda r: r[key], reverse=not lower)

    known = next((r for r in rows if r["kind"] == "best_known"), None)
    result = {
        "command": command_line(),
        "commit": git_commit(),
        "machine": machine_info(),
        "task": args.task,
        "programs": len(todo),
        "random": len(drawn),
        "valid": len(valid),
        "best_known": known,
        "best_known_rank_private": (
            1 + [r["private"] for r in order("private")].index(known["private"])
            if known and known["valid"]
            else None
        ),
        "best_known_rank_public": (
            1 + [r["public"] for r in order("public")].index(known["public"])
            if known and known["valid"]
            else None
        ),
        "random_within_10pct_of_best_known_private": (
            sum(
                (r["private"] <= known["private"] * 1.1)
                if lower
                else (r["private"] >= known["private"] * 0.9)
                for r in valid
                if r["kind"] == "random"
            )
            if known and known["valid"]
            else None
        ),
        "top_private": order("private")[:10],
        "top_public": order("public")[:10],
        "rows": rows,
        "seconds": round(time.time() - t0, 1),
    }
    out = RESULTS / f"{args.name}.json"
    out.write_text(json.dumps(result, indent=1))
    for r in order("private")[:10]:
        print(
            f"{r['private']:.4f} (public {r['public']:.4f}) {r['kind']:10s} "
            f"{'H ' if r['held_out'] else '  '}{r['settings']}"
        )
    print(
        {
            k: result[k]
            for k in (
                "programs",
                "valid",
                "best_known_rank_private",
                "best_known_rank_public",
                "random_within_10pct_of_best_known_private",
                "seconds",
            )
        }
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
