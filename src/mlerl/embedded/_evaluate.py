"""Measure a policy directory: sample programs for tasks, run them, validate and grade them.

Programs run as plain subprocesses in a fresh temporary work dir with `./input` linked to the
task's public data (the program contract). This is NOT a sandbox: nothing is isolated beyond
the working directory and a wall-clock timeout, so use it only on the policy's own samples on
a development machine; RL runs go through `mlerl.sandbox`. Grading reads the private answers
in this process (it is an evaluation tool, not part of the RL reward path).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mlerl.embedded._prompts import draft_messages, extract_code


@dataclass
class RunOutcome:
    parsed: bool
    exit_code: int | None
    """None: not run (no code block / syntax error) or timed out."""
    valid: bool
    score: float | None
    seconds: float
    error: str = ""


@dataclass
class TaskEval:
    task_id: str
    samples: int
    parseable: int
    ran_ok: int
    valid: int
    distinct_programs: int
    mean_score: float | None
    scores: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)


def sample_answers(model, tok, messages: list[dict[str, str]], n: int, temperature: float,
                   max_new_tokens: int, seed: int, batch: int = 16) -> list[str]:
    """`n` sampled assistant turns for one prompt."""
    import torch

    prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    ids = tok(prompt, return_tensors="pt", add_special_tokens=False)["input_ids"]
    torch.manual_seed(seed)
    out: list[str] = []
    while len(out) < n:
        k = min(batch, n - len(out))
        with torch.no_grad():
            gen = model.generate(ids.repeat(k, 1), attention_mask=torch.ones(k, ids.shape[1], dtype=torch.long),
                                 do_sample=True, temperature=temperature, top_p=1.0, top_k=0,
                                 max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id,
                                 eos_token_id=tok.eos_token_id)
        out += tok.batch_decode(gen[:, ids.shape[1]:], skip_special_tokens=True)
    return out


def run_program(code: str, task, timeout_s: float) -> RunOutcome:
    """Run `code` as main.py against `task`'s public data; validate and grade its submission."""
    from mlerl.bench import grade_submission, validate_submission

    if not code.strip():
        return RunOutcome(False, None, False, None, 0.0, "NoCodeBlock")
    try:
        ast.parse(code)
    except SyntaxError as exc:
        return RunOutcome(False, None, False, None, 0.0, f"SyntaxError: {exc.msg}")
    with tempfile.TemporaryDirectory(prefix="mlerl-embedded-") as work:
        os.symlink(task.public_dir, Path(work) / "input")
        Path(work, "main.py").write_text(code, encoding="utf-8")
        start = time.monotonic()
        try:
            proc = subprocess.run([sys.executable, "main.py"], cwd=work, capture_output=True,
                                  text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return RunOutcome(True, None, False, None, time.monotonic() - start, "Timeout")
        seconds = time.monotonic() - start
        lines = proc.stderr.strip().splitlines()
        error = lines[-1].split(":")[0] if proc.returncode != 0 and lines else ""
        sub = Path(work, "submission.csv")
        if proc.returncode != 0 or not sub.is_file():
            return RunOutcome(True, proc.returncode, False, None, seconds, error or "NoSubmission")
        valid, reason = validate_submission(task, sub)
        score = grade_submission(task, sub).score if valid else None
        return RunOutcome(True, 0, valid, score, seconds, "" if valid else "Invalid")


def evaluate_policy(model_dir: str | Path, task_ids: list[str], data_dir: str | Path, *,
                    samples: int = 32, temperature: float = 0.8, max_new_tokens: int = 768,
                    timeout_s: float = 120.0, workers: int = 2, seed: int = 0) -> list[TaskEval]:
    """Sample `samples` C.1 answers per task, run them, and count what parses / runs / is valid.

    Prompts are built with the `PromptConfig` the policy was bootstrapped with (its manifest),
    so a policy trained on short data snippets is not evaluated on long ones."""
    from mlerl.actors import PromptConfig
    from mlerl.bench import Registry, prepare
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mlerl.embedded._model import read_manifest

    trained_on = ((read_manifest(Path(model_dir)) or {}).get("config") or {}).get("prompts")
    prompts = PromptConfig(**trained_on) if trained_on else None

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    registry = Registry.load(data_dir=data_dir)
    results = []
    for task_id in task_ids:
        task = registry.get(task_id)
        if not task.is_prepared():
            prepare(task_id, data_dir)
        answers = sample_answers(model, tok, draft_messages(task, prompts), samples,
                                 temperature, max_new_tokens, seed)
        codes = [extract_code(a) or "" for a in answers]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            outcomes = list(pool.map(lambda c: run_program(c, task, timeout_s), codes))
        errors: dict[str, int] = {}
        for o in outcomes:
            if o.error:
                errors[o.error] = errors.get(o.error, 0) + 1
        scores = [o.score for o in outcomes if o.score is not None]
        results.append(TaskEval(
            task_id, samples, sum(o.parsed for o in outcomes), sum(o.exit_code == 0 for o in outcomes),
            sum(o.valid for o in outcomes), len({c for c in codes if c}),
            round(sum(scores) / len(scores), 5) if scores else None, scores, errors))
    return results


def as_dict(results: list[TaskEval]) -> list[dict]:
    return [asdict(r) for r in results]
