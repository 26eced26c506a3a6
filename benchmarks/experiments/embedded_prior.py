"""The initial embedded policy's prior over programs (docs/experiments/embedded-testbed.md).

``python benchmarks/experiments/embedded_prior.py --model-dir DIR --data-dir DATA [--task standin-materials-rmsle-tiny]
[--samples 256] [--run 64] [--temperature 0.9] [--max-new-tokens 320] [--seed 0] [--name embedded_prior]``

Samples ``--samples`` scratch (C.1) answers of a bootstrapped policy for one task, with the
prompts it was bootstrapped with, and reports:

- **novel**: the share of answers with a code block whose program is not verbatim a corpus
  draft (the corpus is regenerated from the policy's manifest);
- **held-out prior**: the share of answers whose settings block makes the task's held-out best
  combination (`mlerl.embedded._settings.HELD_OUT`), with a 95 % upper bound (3 / N when none);
- for the first ``--run`` answers, run in the sandbox on the public data and graded with the
  task's grader: validity, the share of valid programs that are novel, and best-of-R (chosen on
  the public part, reported on the private part) against the best known configuration
  (`BEST`), run the same way.

Writes ``benchmarks/results/NAME.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common
from _common import RESULTS, command_line, git_commit, machine_info

BEST: dict[str, tuple[tuple[str, str], ...]] = {
    "standin-materials-rmsle-tiny": (
        ("LOG_TARGET", "True"),
        ("ONE_HOT", "['spacegroup']"),
        (
            "PRODUCTS",
            "['lattice_vector_1_ang*lattice_vector_2_ang', 'percent_atom_in*lattice_vector_3_ang']",
        ),
        ("MODEL", '"lightgbm"'),
        (
            "PARAMS",
            '{"n_estimators": 800, "learning_rate": 0.05, "num_leaves": 7, "n_jobs": 1, '
            '"verbose": -1}',
        ),
    ),
    "standin-insults-auc-tiny": (  # data version 3 (settings_best_of_n_insults_v3.json)
        ("ANALYZER", '"char_wb"'),
        ("NGRAMS", "(2, 5)"),
        ("MAX_FEATURES", "50000"),
        ("MODEL", '"sgd"'),
        ("PARAMS", '{"alpha": 1e-05, "max_iter": 1000, "loss": "log_loss"}'),
    ),
}
"""The best configuration known per task in the settings space, by public score
(``settings_search.py``, benchmarks/results/settings_search_*.json)."""

_LINE = re.compile(r"^([A-Z_]+) = (.+)$")


def settings_of(code: str) -> tuple[tuple[str, str], ...]:
    """The settings block of a program: the ``NAME = literal`` lines before ``FAMILIES``."""
    out = []
    for line in code.splitlines():
        if line.startswith("FAMILIES"):
            break
        m = _LINE.match(line)
        if m:
            out.append((m.group(1), m.group(2)))
    return tuple(out)


async def _run(codes: list[str], task, timeout_s: float) -> list[dict[str, Any]]:
    from mlerl.bench import grade_submission, validate_submission
    from mlerl.sandbox import ExecutionRequest, Limits, SandboxConfig, make_sandbox

    sandbox = make_sandbox(SandboxConfig(max_concurrency=2))

    async def one(code: str) -> dict[str, Any]:
        if not code:
            return {"valid": False, "error": "NoCodeBlock"}
        try:
            compile(code, "main.py", "exec")
        except SyntaxError:
            return {"valid": False, "error": "SyntaxError"}
        result = await sandbox.run(
            ExecutionRequest(
                program=code, data_dir=task.public_dir, limits=Limits(wall_time_s=timeout_s)
            )
        )
        try:
            sub = result.files.get("submission.csv")
            if result.exit_code != 0 or sub is None:
                lines = result.stderr.text().strip().splitlines()
                return {
                    "valid": False,
                    "error": (lines[-1].split(":")[0] if lines else result.status.value),
                    "seconds": result.duration_s,
                }
            ok, _ = validate_submission(task, sub)
            if not ok:
                return {"valid": False, "error": "Invalid", "seconds": result.duration_s}
            rep = grade_submission(task, sub)
            return {
                "valid": True,
                "public": rep.public_score,
                "private": rep.private_score,
                "seconds": result.duration_s,
            }
        finally:
            for path in {p.parent for p in result.files.values()}:
                shutil.rmtree(path, ignore_errors=True)

    try:
        return list(await asyncio.gather(*(one(c) for c in codes)))
    finally:
        await sandbox.close()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--model-dir", required=True, type=Path)
    p.add_argument("--data-dir", required=True, type=Path)
    p.add_argument("--task", default="standin-materials-rmsle-tiny")
    p.add_argument("--samples", type=int, default=256)
    p.add_argument("--run", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.9)
    p.add_argument("--max-new-tokens", type=int, default=320)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--name", default="embedded_prior")
    args = p.parse_args()

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mlerl.actors import PromptConfig
    from mlerl.bench import Registry, prepare
    from mlerl.embedded import (
        BootstrapConfig,
        Settings,
        corpus_for,
        draft_messages,
        extract_code,
        held_out,
        read_manifest,
        sample_answers,
        settings_code,
        task_views,
    )

    t0 = time.time()
    manifest = read_manifest(args.model_dir) or {}
    config = dict(manifest.get("config") or {})
    prompts = PromptConfig(**config.pop("prompts")) if config.get("prompts") else PromptConfig()
    cfg = BootstrapConfig(**config, prompts=prompts)
    prepare(args.task, args.data_dir)
    task = Registry.load(data_dir=args.data_dir).get(args.task)
    view = task_views(args.data_dir, [args.task])[0]
    corpus = {
        e.code
        for e in corpus_for(cfg, args.data_dir)
        if e.kind == "draft" and e.task_id == args.task
    }

    tok = AutoTokenizer.from_pretrained(args.model_dir)
    model = AutoModelForCausalLM.from_pretrained(args.model_dir).eval()
    t_gen = time.time()
    answers = sample_answers(
        model,
        tok,
        draft_messages(task, prompts),
        args.samples,
        args.temperature,
        args.max_new_tokens,
        args.seed,
    )
    gen_s = time.time() - t_gen
    (RESULTS / f"{args.name}.answers.json").write_text(json.dumps(answers))  # kept whatever follows
    codes = [extract_code(a) or "" for a in answers]
    stripped = [c.strip() for c in corpus]
    novel = [bool(c) and c.strip() not in stripped for c in codes]
    held = [bool(c) and held_out(view, Settings(settings_of(c))) for c in codes]
    n = len(codes)
    hits = sum(held)
    prior = {
        "hits": hits,
        "samples": n,
        "estimate": round(hits / n, 5),
        "upper95": round(
            3 / n
            if hits == 0
            else min(1.0, hits / n + 1.96 * math.sqrt(hits / n * (1 - hits / n) / n)),
            5,
        ),
    }

    t_run = time.time()
    runs = asyncio.run(_run(codes[: args.run], task, args.timeout))
    best_cfg = BEST.get(args.task)
    best_known = (
        asyncio.run(_run([settings_code(view, Settings(best_cfg))], task, args.timeout))[0]
        if best_cfg
        else None
    )
    run_s = time.time() - t_run
    valid = [(r, nv) for r, nv in zip(runs, novel[: args.run], strict=True) if r["valid"]]
    lower = task.lower_is_better
    chosen = (min if lower else max)(valid, key=lambda x: x[0]["public"])[0] if valid else None
    errors: dict[str, int] = {}
    for r in runs:
        if not r["valid"]:
            errors[r["error"]] = errors.get(r["error"], 0) + 1
    gap = None
    if chosen and best_known and best_known.get("valid"):
        b, c = best_known["private"], chosen["private"]
        gap = round((c - b) / b if lower else (b - c) / b, 5)
    result = {
        "command": command_line(),
        "commit": git_commit(),
        "machine": machine_info(),
        "model_dir": str(args.model_dir),
        "task": args.task,
        "temperature": args.temperature,
        "samples": n,
        "with_code": sum(bool(c) for c in codes),
        "novel_share": round(sum(novel) / n, 5),
        "distinct": len({c for c in codes if c}),
        "held_out_prior": prior,
        "ran": len(runs),
        "valid": len(valid),
        "valid_share": round(len(valid) / max(1, len(runs)), 5),
        "valid_novel_share": round(sum(nv for _, nv in valid) / max(1, len(valid)), 5),
        "best_of_ran": chosen,
        "best_known": best_known,
        "best_known_config": dict(best_cfg or ()),
        "best_of_ran_gap_to_best_known": gap,
        "errors": errors,
        "valid_private_scores": sorted(r["private"] for r, _ in valid),
        "generate_seconds": round(gen_s, 1),
        "run_seconds": round(run_s, 1),
        "seconds": round(time.time() - t0, 1),
        "examples": [a for a in answers[:3]],
    }
    out = RESULTS / f"{args.name}.json"
    out.write_text(json.dumps(result, indent=1))
    print(
        json.dumps(
            {
                k: v
                for k, v in result.items()
                if k not in ("examples", "machine", "valid_private_scores")
            },
            indent=1,
        )
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
