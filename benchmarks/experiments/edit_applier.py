"""How a policy's improve answers fare under the actor's edit applier (docs/experiments/edit-applier.md): sample once,
parse and run under any commit.

``python benchmarks/experiments/edit_applier.py sample --model-dir DIR --run RUN_DIR --parents 16
--per-parent 8 --answers ANSWERS.json [--latest]``
    Improve answers of the policy in ``DIR`` (T = 0.9, 320 new tokens: the embedded actors'
    settings) for the first (``--latest``: last) ``--parents`` distinct programs that ran to
    the end in ``RUN_DIR/samples.jsonl`` (each prompt shows the parent's plan, code and terminal output as
    the run recorded them).

``python benchmarks/experiments/edit_applier.py score --answers ANSWERS.json [--name NAME]``
    Parses every answer against its parent with the installed ``mlerl.actors.parse_response``
    (edits applied), runs each parent and each parsed program in the local sandbox and grades
    it outside; reports the parse statuses, valid submissions, how often a valid revision beats
    its valid parent, and the failures. Run it under two commits to compare two appliers on
    the same answers, e.g. the older one from a worktree:
    ``PYTHONPATH=WORKTREE/packages/actors/src python ... score ...``.

Results are appended to ``benchmarks/results/NAME.json`` (default ``edit_applier``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common
from _common import RESULTS, command_line, git_commit, machine_info


def parents_of(samples: list[dict[str, Any]], n: int, latest: bool = False) -> list[dict[str, Any]]:
    """The first ``n`` distinct programs of a run that ran to the end (status ``ok``), in the
    order they finished; with ``latest`` the last ``n`` (the kind of parent late training
    revises), in the same order."""
    seen: set[str] = set()
    out = []
    for row in reversed(samples) if latest else samples:
        if row.get("status") == "ok" and row.get("code") and row["code"] not in seen:
            seen.add(row["code"])
            out.append(row)
    return out[:n][::-1] if latest else out[:n]


def beats(child: float, parent: float | None, lower: bool) -> bool:
    if parent is None:
        return False
    return child < parent if lower else child > parent


def sample(args: argparse.Namespace) -> int:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mlerl.actors import PromptConfig, improve_prompt
    from mlerl.bench import default_data_dir
    from mlerl.embedded import read_manifest, sample_answers, task_views

    built = (read_manifest(args.model_dir) or {}).get("config") or {}
    prompts = PromptConfig(**built["prompts"]) if built.get("prompts") else PromptConfig()
    rows = [json.loads(line) for line in (args.run / "samples.jsonl").open()]
    parents = parents_of(rows, args.parents, args.latest)
    task_id = parents[0]["task_id"]
    task = task_views(default_data_dir(), [task_id])[0].task
    if task is None:
        raise SystemExit(f"{task_id}: not a prepared task (run `mlerl train` once)")
    tok = AutoTokenizer.from_pretrained(args.model_dir)
    model = AutoModelForCausalLM.from_pretrained(args.model_dir).eval()
    out = []
    for i, p in enumerate(parents):
        messages = [
            {"role": m.role, "content": m.content}
            for m in improve_prompt(task, p["plan"], p["code"], p["output_tail"], prompts)
        ]
        for a in sample_answers(model, tok, messages, args.per_parent, 0.9, 320, seed=i):
            out.append({"task_id": task_id, "parent": p["code"], "answer": a})
    args.answers.write_text(json.dumps({"model": str(args.model_dir), "answers": out}, indent=1))
    print(f"{len(out)} answers for {len(parents)} parents -> {args.answers}")
    return 0


def score(args: argparse.Namespace) -> int:
    from mlerl.actors import parse_response
    from mlerl.bench import default_data_dir
    from mlerl.embedded import run_program, task_views

    data = json.loads(args.answers.read_text())
    answers = data["answers"]
    task = task_views(default_data_dir(), [answers[0]["task_id"]])[0].task
    if task is None:
        raise SystemExit(f"{answers[0]['task_id']}: not a prepared task (run `mlerl train` once)")
    lower = bool(task.lower_is_better)
    parsed = [parse_response(a["answer"], parent=a["parent"]) for a in answers]
    statuses = Counter(x.status.value for x in parsed)

    def run_all(codes: list[str]) -> list[Any]:  # two at a time, as the actors' sandbox runs
        with ThreadPoolExecutor(max_workers=2) as pool:
            return list(pool.map(lambda c: run_program(c, task, args.timeout), codes))

    parents = sorted({a["parent"] for a in answers})
    parent_score = {
        p: (r.score if r.valid else None) for p, r in zip(parents, run_all(parents), strict=True)
    }
    kids = [
        (a["parent"], x.code)
        for a, x in zip(answers, parsed, strict=True)
        if x.status.value == "ok"
    ]
    runs = run_all([c for _, c in kids])
    pairs = [
        (r.score, parent_score[p])
        for (p, _), r in zip(kids, runs, strict=True)
        if r.valid and r.score is not None and parent_score[p] is not None
    ]
    record = {
        "answers_file": str(args.answers),
        "model": data.get("model"),
        "task": answers[0]["task_id"],
        "answers": len(answers),
        "parents": len(parents),
        "parse": dict(statuses),
        "run": len(kids),
        "valid": sum(r.valid for r in runs),
        "valid_share_of_answers": sum(r.valid for r in runs) / len(answers),
        "pairs": len(pairs),
        "beats_parent": sum(beats(c, p, lower) for c, p in pairs),
        "failures": dict(Counter(r.error for r in runs if r.error)),
        "command": command_line(),
        "commit": git_commit(),
        "actors_module": sys.modules[parse_response.__module__].__file__,
        "machine": machine_info(),
    }
    print(json.dumps(record, indent=1))
    out = RESULTS / f"{args.name}.json"
    old = json.loads(out.read_text()) if out.is_file() else {"runs": []}
    old["runs"].append(record)
    out.write_text(json.dumps(old, indent=1) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sample")
    s.add_argument("--model-dir", type=Path, required=True)
    s.add_argument("--run", type=Path, required=True, help="a run dir whose samples are parents")
    s.add_argument("--parents", type=int, default=16)
    s.add_argument("--per-parent", type=int, default=8)
    s.add_argument("--latest", action="store_true", help="the run's last parents, not its first")
    s.add_argument("--answers", type=Path, required=True)
    c = sub.add_parser("score")
    c.add_argument("--answers", type=Path, required=True)
    c.add_argument("--timeout", type=float, default=120.0)
    c.add_argument("--name", default="edit_applier")
    args = p.parse_args(argv)
    return sample(args) if args.cmd == "sample" else score(args)


if __name__ == "__main__":
    raise SystemExit(main())
