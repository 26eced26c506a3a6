"""AIDE that samples an unparseable answer again, against AIDE as recorded and the RL arms.

``python benchmarks/experiments/aide_resampling.py --aide-dir DIR --seeds 3,4,5,6,7,8 --arm default=discovery_default_heldout.json:default [--arm NAME=FILE:ARM ...] [--task TASK] [--name discovery_aide_resampling]``

AIDE as published (aideml's ``plan_and_code_query``) asks again, up to three LLM calls, when a
response holds no plan and code; the AIDE baseline of the discovery study turned such a response
into a step that ran nothing. ``DIR/seed<S>/aide.json`` holds ``mlerl eval --aide`` of the same
initial policy at the same executions with the resampling (``--aide-parse-attempts``, default
3), on the same seeds. Each ``--arm NAME=FILE:ARM`` names a discovery results file (under
``benchmarks/results/`` unless the path exists as given) and one of its arms; the first arm's
file also gives the recorded AIDE (``baselines.aide``), the executions and the direction.

Results (``benchmarks/results/NAME.json``): ``per_seed`` (the resampling AIDE's best private and
public score, valid fraction, LLM calls, actions and statuses; the recorded AIDE's private score
and valid fraction); ``paired``: the resampling AIDE against the recorded one, and each arm
against the resampling AIDE (mean ± s.e. of the paired differences, positive when the first is
better, and in how many seeds); ``rows`` (``task``, ``seed``, ``aide_private``,
``aide_recorded_private`` and each arm's ``<arm>_private``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common
from _common import RESULTS, command_line, git_commit, int_list, machine_info, write_json
from _discovery_figures import paired


def aide_seed(path: Path, task: str) -> dict[str, Any]:
    """One ``mlerl eval --aide`` result's figures for ``task``."""
    data = json.loads(path.read_text())
    t = data["per_seed"][0]["tasks"][task]
    return {
        "private": t.get("best_score"),
        "public": t.get("best_public"),
        "valid_frac": t.get("valid_frac"),
        "k": t.get("k"),
        "llm_calls": t.get("llm_calls"),
        "parse_attempts": (data.get("aide") or {}).get("parse_attempts"),
        "actions": t.get("actions"),
        "statuses": t.get("statuses"),
        "best_action": (t.get("best_solution") or {}).get("action"),
    }


def _results_file(name: str) -> Path:
    path = Path(name)
    return path if path.is_file() else RESULTS / name


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--aide-dir", type=Path, required=True)
    p.add_argument("--seeds", type=int_list, required=True)
    p.add_argument("--arm", action="append", required=True, help="NAME=FILE:ARM")
    p.add_argument("--task", default="standin-materials-rmsle-tiny")
    p.add_argument("--name", default="discovery_aide_resampling")
    args = p.parse_args(argv)
    arms: dict[str, dict[str, Any]] = {}
    first: dict[str, Any] | None = None
    for spec in args.arm:
        name, _, source = spec.partition("=")
        file, _, arm = source.rpartition(":")
        if not (name and file and arm):
            p.error(f"--arm {spec!r}: expected NAME=FILE:ARM")
        path = _results_file(file)
        try:
            result = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            p.error(f"--arm {spec!r}: cannot read {path}: {e}")
        if result.get("task") != args.task or arm not in result.get("arms", {}):
            p.error(f"--arm {spec!r}: {path} has no arm {arm!r} for task {args.task}")
        first = first or result
        arms[name] = {
            str(s): (result["arms"][arm].get(str(s)) or {}).get("private") for s in args.seeds
        }
    assert first is not None  # --arm is required
    lower = first["direction"] == "lower"
    recorded = first["baselines"]["aide"]
    per_seed: dict[str, Any] = {}
    for s in args.seeds:
        path = args.aide_dir / f"seed{s}" / "aide.json"
        if not path.is_file():
            p.error(f"no AIDE result for seed {s}: {path}")
        new = aide_seed(path, args.task)
        if new["k"] != first["executions"]:
            p.error(f"seed {s}: AIDE took {new['k']} steps, the study {first['executions']}")
        old = recorded.get(str(s)) or {}
        per_seed[str(s)] = {
            "aide": new,
            "recorded": {"private": old.get("private"), "valid_frac": old.get("valid_frac")},
        }
    seeds = [str(s) for s in args.seeds]
    new_private = [per_seed[s]["aide"]["private"] for s in seeds]
    result = {
        "task": args.task,
        "direction": first["direction"],
        "executions": first["executions"],
        "seeds": args.seeds,
        "per_seed": per_seed,
        "paired": {
            "aide - aide_recorded": paired(
                new_private, [per_seed[s]["recorded"]["private"] for s in seeds], lower
            ),
            **{
                f"{a} - aide": paired([by_seed[s] for s in seeds], new_private, lower)
                for a, by_seed in arms.items()
            },
        },
        "rows": [
            {
                "task": args.task,
                "seed": int(s),
                "aide_private": per_seed[s]["aide"]["private"],
                "aide_recorded_private": per_seed[s]["recorded"]["private"],
                **{f"{a}_private": arms[a][s] for a in arms},
            }
            for s in seeds
        ],
        "arms": {spec.partition("=")[0]: spec.partition("=")[2] for spec in args.arm},
        "commit": git_commit(),
        "command": command_line(),
        "machine": machine_info(),
    }
    write_json(RESULTS / f"{args.name}.json", result)
    for s in seeds:
        a, r = per_seed[s]["aide"], per_seed[s]["recorded"]
        print(
            f"seed {s}: AIDE {a['private']} (valid {a['valid_frac']:.2f}, {a['llm_calls']} LLM "
            f"calls, best by {a['best_action']}), recorded {r['private']} (valid "
            f"{(r['valid_frac'] or 0):.2f})"
        )
    for k, v in result["paired"].items():
        print(f"{k}: {v['mean']:+.4f} ± {v['se']:.4f} (better in {v['better_in']} of {v['n']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
