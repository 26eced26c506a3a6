"""Can a bootstrapped policy revise a real solution? Improve prompts from real parents.

``python benchmarks/experiments/embedded_improve.py MODEL_DIR [--task standin-wine-logloss-tiny] [--parents 4]
[--per-parent 4] [--out benchmarks/results/embedded_improve.json]``

The parents are corpus programs (one coding style, seeded, correct) run once in the local sandbox
the way an RL action runs, so each improve prompt shows the terminal output the actors would
show. For each parent the policy writes ``--per-parent`` answers (T = 0.9, 320 new tokens, the
embedded actors' settings); each answer's program runs in the sandbox and is validated and
graded outside it. For comparison the same number of from-scratch (C.1) answers are drawn.
Reported: valid fraction of improve and of scratch answers, how often a valid improved program
beats its (valid) parent, the failure kinds, and the best score (``mlerl.embedded.evaluate_improvement``). Results are appended to
``--out`` as one record per call (model, task, counts, command, commit, machine).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common
from _common import RESULTS, command_line, git_commit, machine_info  # noqa: E402


def measure(model_dir: Path, task_id: str, parents: int, per_parent: int, seed: int = 123) -> dict:
    from mlerl.bench import default_data_dir
    from mlerl.embedded import evaluate_improvement

    return evaluate_improvement(
        model_dir, task_id, default_data_dir(), parents=parents, per_parent=per_parent, seed=seed
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model_dir", type=Path)
    p.add_argument("--task", default="standin-wine-logloss-tiny")
    p.add_argument("--parents", type=int, default=4)
    p.add_argument("--per-parent", type=int, default=4)
    p.add_argument("--out", type=Path, default=RESULTS / "embedded_improve.json")
    args = p.parse_args(argv)
    record = measure(args.model_dir, args.task, args.parents, args.per_parent)
    record.update(command=command_line(), commit=git_commit(), machine=machine_info())
    print(json.dumps(record, indent=1))
    old = json.loads(args.out.read_text()) if args.out.is_file() else {"runs": []}
    old["runs"].append(record)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(old, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
