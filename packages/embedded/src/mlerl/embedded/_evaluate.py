"""Measure a policy directory: sample programs for tasks, run them, validate and grade them.

Two measurements: :func:`evaluate_drafts` (from-scratch answers per task) and
:func:`evaluate_improvement` (improve answers to real, correct parent programs, beside as many
from-scratch ones: can the policy revise a solution?).

Programs are model-written, so they run where RL runs them: in `mlerl.sandbox`'s local backend
(allowlisted bubblewrap view, cgroups, no network; `./input` is the task's public data), with a
wall-clock limit. The submission is copied out of the sandbox and validated and graded here,
outside it.
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import shutil
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from mlerl.embedded._config import read_manifest
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


def sample_answers(
    model,
    tok,
    messages: list[dict[str, str]],
    n: int,
    temperature: float,
    max_new_tokens: int,
    seed: int,
    batch: int = 16,
) -> list[str]:
    """`n` sampled assistant turns for one prompt."""
    import torch

    prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    ids = tok(prompt, return_tensors="pt", add_special_tokens=False)["input_ids"]
    torch.manual_seed(seed)
    out: list[str] = []
    while len(out) < n:
        k = min(batch, n - len(out))
        with torch.no_grad():
            gen = model.generate(
                ids.repeat(k, 1),
                attention_mask=torch.ones(k, ids.shape[1], dtype=torch.long),
                do_sample=True,
                temperature=temperature,
                top_p=1.0,
                top_k=0,
                max_new_tokens=max_new_tokens,
                pad_token_id=tok.pad_token_id,
                eos_token_id=tok.eos_token_id,
            )
        out += tok.batch_decode(gen[:, ids.shape[1] :], skip_special_tokens=True)
    return out


def run_program(code: str, task, timeout_s: float) -> RunOutcome:
    """Run `code` as main.py against `task`'s public data in the sandbox; validate and grade
    its submission."""
    return asyncio.run(run_programs([code], task, timeout_s, workers=1))[0]


async def run_programs(
    codes: list[str], task, timeout_s: float, workers: int = 2
) -> list[RunOutcome]:
    """`run_program` for many programs, ``workers`` at a time through one sandbox."""
    from mlerl.sandbox import SandboxConfig, make_sandbox

    sandbox = make_sandbox(SandboxConfig(max_concurrency=workers))
    try:
        return list(await asyncio.gather(*(_run_one(sandbox, c, task, timeout_s) for c in codes)))
    finally:
        await sandbox.close()


async def _run_one(sandbox, code: str, task, timeout_s: float) -> RunOutcome:
    from mlerl.bench import grade_submission, validate_submission
    from mlerl.protocol import ExecStatus
    from mlerl.sandbox import ExecutionRequest, Limits

    if not code.strip():
        return RunOutcome(False, None, False, None, 0.0, "NoCodeBlock")
    try:
        ast.parse(code)
    except SyntaxError as exc:
        return RunOutcome(False, None, False, None, 0.0, f"SyntaxError: {exc.msg}")
    result = await sandbox.run(
        ExecutionRequest(
            program=code, data_dir=task.public_dir, limits=Limits(wall_time_s=timeout_s)
        )
    )
    try:
        seconds = result.duration_s
        if result.status is ExecStatus.TIMEOUT:
            return RunOutcome(True, None, False, None, seconds, "Timeout")
        if result.status is ExecStatus.INFRA_ERROR:
            return RunOutcome(True, None, False, None, seconds, "InfraError")
        lines = result.stderr.text().strip().splitlines()
        error = lines[-1].split(":")[0] if result.exit_code != 0 and lines else ""
        sub = result.files.get("submission.csv")
        if result.exit_code != 0 or sub is None:
            why = error or (result.status.value if result.exit_code != 0 else "NoSubmission")
            return RunOutcome(True, result.exit_code, False, None, seconds, why)
        valid, _ = validate_submission(task, sub)
        score = grade_submission(task, sub).score if valid else None
        return RunOutcome(True, 0, valid, score, seconds, "" if valid else "Invalid")
    finally:
        for path in {p.parent for p in result.files.values()}:
            shutil.rmtree(path, ignore_errors=True)


@dataclass(frozen=True)
class ProgramRun:
    """One program run as an actor runs it."""

    output: str
    """Terminal output as an improve prompt shows it (the last `tail_chars` characters)."""
    submission: str | None
    """sha256 of the submission file it wrote, None when it wrote none or exited non-zero."""
    seconds: float


def observe_programs(
    items: list[tuple[object, str]],
    timeout_s: float = 120.0,
    workers: int = 2,
    tail_chars: int = 8000,
) -> list[ProgramRun]:
    """Run each (task, program) the way an RL action runs: AST instrumentation, the secure
    marker channel, the local sandbox on the task's public data; the output is stdout then
    stderr with channel lines turned back into plain markers (`mlerl.instrument.clean_output`),
    the last `tail_chars` characters."""
    return asyncio.run(_observe(items, timeout_s, workers, tail_chars))


def terminal_outputs(
    items: list[tuple[object, str]],
    timeout_s: float = 120.0,
    workers: int = 2,
    tail_chars: int = 8000,
) -> list[str]:
    """The terminal output of each (task, program) as an actor's improve prompt shows it."""
    return [r.output for r in observe_programs(items, timeout_s, workers, tail_chars)]


async def _observe(items, timeout_s: float, workers: int, tail_chars: int) -> list[ProgramRun]:
    from mlerl.instrument import clean_output, instrument_ast, prepare_run
    from mlerl.sandbox import ExecutionRequest, Limits, SandboxConfig, make_sandbox

    sandbox = make_sandbox(SandboxConfig(max_concurrency=workers))

    async def one(task, code: str) -> ProgramRun:
        run = prepare_run(instrument_ast(code), "secure")
        result = await sandbox.run(
            ExecutionRequest(
                program=run.program, data_dir=task.public_dir, limits=Limits(wall_time_s=timeout_s)
            )
        )
        sub = result.files.get("submission.csv")
        wrote = result.exit_code == 0 and sub is not None and sub.is_file()
        digest = hashlib.sha256(sub.read_bytes()).hexdigest() if wrote and sub else None
        for path in {p.parent for p in result.files.values()}:
            shutil.rmtree(path, ignore_errors=True)
        out, err = result.stdout.text(), result.stderr.text()
        joined = out + ("\n" if out and err and not out.endswith("\n") else "") + err
        text = clean_output(joined, run.nonce)
        tail = text[len(text) - tail_chars :] if tail_chars else ""
        return ProgramRun(tail, digest, result.duration_s)

    try:
        return list(await asyncio.gather(*(one(task, code) for task, code in items)))
    finally:
        await sandbox.close()


def evaluate_drafts(
    model_dir: str | Path,
    task_ids: list[str],
    data_dir: str | Path,
    *,
    samples: int = 32,
    temperature: float = 0.8,
    max_new_tokens: int = 768,
    timeout_s: float = 120.0,
    workers: int = 2,
    seed: int = 0,
) -> list[TaskEval]:
    """Sample `samples` C.1 answers per task, run them, and count what parses / runs / is valid.

    Prompts are built with the `PromptConfig` the policy was bootstrapped with (its manifest),
    so a policy trained on short data snippets is not evaluated on long ones."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mlerl.actors import PromptConfig
    from mlerl.bench import Registry, prepare

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
        answers = sample_answers(
            model, tok, draft_messages(task, prompts), samples, temperature, max_new_tokens, seed
        )
        codes = [extract_code(a) or "" for a in answers]
        outcomes = asyncio.run(run_programs(codes, task, timeout_s, workers))
        errors: dict[str, int] = {}
        for o in outcomes:
            if o.error:
                errors[o.error] = errors.get(o.error, 0) + 1
        scores = [o.score for o in outcomes if o.score is not None]
        results.append(
            TaskEval(
                task_id,
                samples,
                sum(o.parsed for o in outcomes),
                sum(o.exit_code == 0 for o in outcomes),
                sum(o.valid for o in outcomes),
                len({c for c in codes if c}),
                round(sum(scores) / len(scores), 5) if scores else None,
                scores,
                errors,
            )
        )
    return results


def evaluate_improvement(
    model_dir: str | Path,
    task_id: str,
    data_dir: str | Path,
    *,
    parents: int = 4,
    per_parent: int = 4,
    temperature: float = 0.9,
    max_new_tokens: int = 320,
    timeout_s: float = 120.0,
    seed: int = 123,
) -> dict:
    """Improve answers to ``parents`` corpus programs (seeded, correct, one coding style), each
    run once in the sandbox first so its prompt shows the terminal output the actors would show;
    ``per_parent`` answers each, then as many from-scratch (C.1) answers for comparison. Every
    answer runs in the sandbox and is validated and graded outside it. Returns the valid
    fractions, how often a valid improved program beats its valid parent, the failure kinds and
    the best score."""
    import random

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mlerl.actors import PromptConfig, parse_response
    from mlerl.embedded._programs import generate_program, sample_choices
    from mlerl.embedded._prompts import improve_messages
    from mlerl.embedded._settings import drafts as settings_drafts
    from mlerl.embedded._settings import supports
    from mlerl.embedded._tasks import task_views

    built_with = (read_manifest(Path(model_dir)) or {}).get("config") or {}
    trained_on = built_with.get("prompts")
    prompts = PromptConfig(**trained_on) if trained_on else PromptConfig()
    view = task_views(Path(data_dir), [task_id])[0]
    task = view.task
    if task is None:
        raise ValueError(f"{task_id}: not a prepared task under {data_dir}")
    lower = bool(task.lower_is_better)
    rng = random.Random(seed)
    if built_with.get("shape", "legacy") == "settings" and supports(view):
        progs = settings_drafts(view, rng, parents)  # the program shape the policy writes
    else:
        progs = [
            generate_program(view, rng, sample_choices(view, rng, False)) for _ in range(parents)
        ]
    outputs = terminal_outputs([(task, p.code) for p in progs])
    parent_runs = asyncio.run(run_programs([p.code for p in progs], task, timeout_s))
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    improve, beats, errors = [], [0, 0], dict[str, int]()
    for i, (p, out, pr) in enumerate(zip(progs, outputs, parent_runs, strict=True)):
        answers = sample_answers(
            model,
            tok,
            improve_messages(task, p.plan, p.code, out, prompts),
            per_parent,
            temperature,
            max_new_tokens,
            seed=i,
        )
        parent = p.code if prompts.improve_format == "edit" else None
        parsed = [parse_response(a, parent=parent) for a in answers]  # edits applied
        runs = asyncio.run(run_programs([x.code for x in parsed], task, timeout_s))
        for r, x in zip(runs, parsed, strict=True):
            if not x.code:  # not run: why the actor would not run it (edit_mismatch, truncated)
                r = replace(r, error=x.status.value)
            improve.append(r)
            if r.error:
                errors[r.error] = errors.get(r.error, 0) + 1
            if r.valid and pr.valid and r.score is not None and pr.score is not None:
                beats[1] += 1
                beats[0] += (r.score < pr.score) if lower else (r.score > pr.score)
    answers = sample_answers(
        model,
        tok,
        draft_messages(task, prompts),
        parents * per_parent,
        temperature,
        max_new_tokens,
        seed=99,
    )
    scratch = asyncio.run(run_programs([extract_code(a) or "" for a in answers], task, timeout_s))
    scores = [r.score for r in improve + scratch if r.valid and r.score is not None]
    return {
        "model": str(model_dir),
        "task": task_id,
        "parents": parents,
        "per_parent": per_parent,
        "parents_valid": sum(r.valid for r in parent_runs),
        "improve_n": len(improve),
        "improve_valid": sum(r.valid for r in improve) / len(improve),
        "improved_beats_parent": beats[0],
        "improved_and_parent_valid": beats[1],
        "scratch_n": len(scratch),
        "scratch_valid": sum(r.valid for r in scratch) / len(scratch),
        "improve_errors": errors,
        "best_score": (min(scores) if lower else max(scores)) if scores else None,
        "lower_is_better": lower,
    }


def as_dict(results: list[TaskEval]) -> list[dict]:
    return [asdict(r) for r in results]
