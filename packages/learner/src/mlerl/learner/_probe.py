"""The decision probe: where the policy's from-scratch answers stand after an update.

For settings-block programs (each decision one ``NAME = literal`` line at the top level of the
program, as the embedded tasks' answers are written), the probe samples ``n`` answers to a
task's scratch prompt from the current policy, at the temperature the actors sample with, and
reports the share of answers making each decision: ``<task>/<NAME>=<value>`` for scalar
values, ``<task>/<NAME>[]=<item>`` for each item of a list value and
``<task>/<NAME>.<key>=<value>`` for each entry of a dict value, each over all ``n`` answers (an
answer without the decision counts as not making it), plus ``<task>/parsed``,
the share whose program parsed. It is a Monte Carlo estimate from ``n`` generations (standard
error at most 0.5 / sqrt(n)), not the policy's exact marginal: the answer is one sequence, and
its plan names the decisions before the program does. It answers "is RL moving toward what
scores better?" per update without reading samples by hand.

Pure parsing here (:func:`settings_of`, :func:`decision_shares`); :func:`probe_decisions`
generates. The prompts are the scratch prompts the learner has seen in its batches, so the
probe needs no knowledge of tasks or prompt templates.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from typing import Any

import torch

_FENCE = re.compile(r"^ {0,3}```[^\n]*\n(.*?)^ {0,3}```", re.DOTALL | re.MULTILINE)
_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")


def _program(text: str) -> str:
    match = _FENCE.search(text)
    return match.group(1) if match else text


def _show(value: object) -> str:
    return value if isinstance(value, str) else repr(value)


def settings_of(text: str) -> dict[str, object] | None:
    """The top-level ``NAME = literal`` assignments (upper-case names) of the answer's program
    (its first fenced block, else the whole text), as Python values; None when it does not
    parse."""
    try:
        tree = ast.parse(_program(text))
    except (SyntaxError, ValueError):
        return None
    out: dict[str, object] = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target = node.targets[0]
        if not (isinstance(target, ast.Name) and _NAME.match(target.id)):
            continue
        try:
            out[target.id] = ast.literal_eval(node.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
    return out


def decisions(settings: Mapping[str, object]) -> set[str]:
    """The decision keys one program makes (see the module docstring for their form)."""
    keys: set[str] = set()
    for name, value in settings.items():
        if isinstance(value, list | set):
            keys.update(f"{name}[]={_show(item)}" for item in value)
            if not value:
                keys.add(f"{name}=[]")
        elif isinstance(value, dict):
            keys.update(f"{name}.{_show(k)}={_show(v)}" for k, v in value.items())
        else:
            keys.add(f"{name}={_show(value)}")
    return keys


def answer_decisions(text: str) -> set[str] | None:
    """The decision keys the program of one answer makes (its first fenced block, else the whole
    text); None when it does not parse."""
    settings = settings_of(text)
    return None if settings is None else decisions(settings)


def decision_shares(texts: Sequence[str]) -> dict[str, float]:
    """Over ``texts`` (answers): ``parsed`` and each decision key's share of all answers."""
    if not texts:
        return {}
    counts: dict[str, int] = {}
    parsed = 0
    for text in texts:
        keys = answer_decisions(text)
        if keys is None:
            continue
        parsed += 1
        for key in keys:
            counts[key] = counts.get(key, 0) + 1
    n = len(texts)
    return {"parsed": parsed / n, **{k: c / n for k, c in sorted(counts.items())}}


@torch.no_grad()
def probe_decisions(
    policy: Any,
    decode: Any,
    prompts: Mapping[str, tuple[list[int], float]],
    *,
    n: int,
    max_new_tokens: int,
    seed: int,
    eos_token_id: int | None = None,
) -> dict[str, float]:
    """``<task>/<key>`` shares from ``n`` answers per task, sampled from ``policy`` (an HF
    causal LM) on each task's prompt ids at its temperature. ``decode(ids) -> str``. The global
    RNG is left as it was (the draws use a fork of it, seeded by ``seed``)."""
    out: dict[str, float] = {}
    was_training = policy.training
    policy.eval()
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for task, (prompt_ids, temperature) in sorted(prompts.items()):
                ids = torch.tensor([prompt_ids] * n, dtype=torch.long)
                device = next(policy.parameters()).device
                generated = policy.generate(
                    input_ids=ids.to(device),
                    attention_mask=torch.ones_like(ids).to(device),
                    do_sample=True,
                    temperature=temperature,
                    top_p=1.0,
                    top_k=0,
                    max_new_tokens=max_new_tokens,
                    eos_token_id=eos_token_id,
                    pad_token_id=eos_token_id if eos_token_id is not None else 0,
                    use_cache=True,
                )
                texts = [decode(row[len(prompt_ids) :].tolist()) for row in generated]
                for key, share in decision_shares(texts).items():
                    out[f"{task}/{key}"] = share
    finally:
        policy.train(was_training)
    return out
