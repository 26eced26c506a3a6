"""Can a bootstrapped policy revise a real solution? (issue #14) Improve prompts from real parents.

``python benchmarks/embedded_improve.py MODEL_DIR [--task standin-wine-logloss-tiny] [--parents 4]
[--per-parent 4] [--out benchmarks/results/embedded_improve.json]``

The parents are corpus programs (one coding style, seeded, correct) run once in the local sandbox
the way an RL action runs, so each improve prompt shows the terminal output the actors would
show. For each parent the policy writes ``--per-parent`` answers (T = 0.9, 320 new tokens, the
embedded actors' settings); each answer's program runs in the sandbox and is validated and
graded outside it. For comparison the same number of from-scratch (C.1) answers are drawn.
Reported: valid fraction of improve and of scratch answers, how often a valid improved program
beats its (valid) parent, the failure kinds, and the best score. Results are appended to
``--out`` as one record per call (model, task, counts, command, commit, machine).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, command_line, git_commit, machine_info  # noqa: E402


def measure(model_dir: Path, task_id: str, parents: int, per_parent: int, seed: int = 123) -> dict:
    from mlerl.actors import PromptConfig
    from mlerl.bench import default_data_dir
    from mlerl.embedded import task_views
    from mlerl.embedded._evaluate import run_programs, sample_answers, terminal_outputs
    from mlerl.embedded._config import read_manifest
    from mlerl.embedded._programs import generate_program, sample_choices
    from mlerl.embedded._prompts import draft_messages, extract_code, improve_messages
    from transformers import AutoModelForCausalLM, AutoTokenizer

    trained_on = ((read_manifest(model_dir) or {}).get("config") or {}).get("prompts")
    prompts = PromptConfig(**trained_on) if trained_on else PromptConfig()
    view = task_views(default_data_dir(), [task_id])[0]
    task, lower = view.task, bool(view.task.lower_is_better)
    rng = random.Random(seed)
    progs = [generate_program(view, rng, sample_choices(view, rng, False)) for _ in range(parents)]
    outputs = terminal_outputs([(task, p.code) for p in progs])
    parent_runs = asyncio.run(run_programs([p.code for p in progs], task, 120))
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    improve, beats, errors = [], [0, 0], {}
    for i, (p, out, pr) in enumerate(zip(progs, outputs, parent_runs, strict=True)):
        answers = sample_answers(model, tok, improve_messages(task, p.plan, p.code, out, prompts),
                                 per_parent, 0.9, 320, seed=i)
        for r in asyncio.run(run_programs([extract_code(a) or "" for a in answers], task, 120)):
            improve.append(r)
            if r.error:
                errors[r.error] = errors.get(r.error, 0) + 1
            if r.valid and pr.valid:
                beats[1] += 1
                beats[0] += (r.score < pr.score) if lower else (r.score > pr.score)
    answers = sample_answers(model, tok, draft_messages(task, prompts), parents * per_parent, 0.9, 320, seed=99)
    scratch = asyncio.run(run_programs([extract_code(a) or "" for a in answers], task, 120))
    scores = [r.score for r in improve + scratch if r.valid]
    return {
        "model": str(model_dir), "task": task_id, "parents": parents, "per_parent": per_parent,
        "parents_valid": sum(r.valid for r in parent_runs),
        "improve_n": len(improve), "improve_valid": sum(r.valid for r in improve) / len(improve),
        "improved_beats_parent": beats[0], "improved_and_parent_valid": beats[1],
        "scratch_n": len(scratch), "scratch_valid": sum(r.valid for r in scratch) / len(scratch),
        "improve_errors": errors,
        "best_score": (min(scores) if lower else max(scores)) if scores else None,
        "lower_is_better": lower,
    }


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
