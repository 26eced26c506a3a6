"""The exploration-enriched SFT corpus: diverse drafts, improve steps and instrumentations.

Following ML-Agent's exploration-enriched fine-tuning, every task gets many programs that
differ in model family, features, hyperparameters, budget, validation scheme and coding style,
so the bootstrapped policy samples varied programs and RL has reward variance to learn from.
Three example kinds, each a chat (messages) plus the assistant answer that SFT learns:
- ``draft``: C.1 prompt (task description) -> plan + code; a `mistake_rate` fraction carry one
  realistic bug (`_mistakes.MISTAKES`) and are marked `correct=False`.
- ``improve``: C.2 prompt (previous plan + code and its terminal output) -> revised plan +
  code: either the bug fixed (`fix_share` of them) or a stronger / slower model; with the
  ``edit`` improve format, a one-sentence reason and the search/replace edits of one change
  (the bug fixed, new hyperparameters, another model family or another feature set). The output
  is simulated (the markers each chunk prints) until `with_real_outputs` replaces it with what
  the program really prints when run the way the actors run it: the actors show that, with
  the markers' values, the program's own prints and library warnings, and a policy trained
  only on the clean simulated output wrote no valid program for any real improve prompt
  (docs/experiments/bootstrap-corpus.md).
- ``instrument``: C.3 prompt (a program) -> the same program with the marker prints inserted.
Generation is deterministic in (views, seed, counts); `corpus_hash` identifies a corpus.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

from mlerl.embedded._example import Example, _msgs
from mlerl.embedded._families import families_for, make_model
from mlerl.embedded._mistakes import inject, with_mistake
from mlerl.embedded._programs import MISTAKES, Program, generate_program, sample_choices
from mlerl.embedded._prompts import (
    draft_messages,
    format_answer,
    improve_messages,
    instrument_messages,
)
from mlerl.embedded._revisions import revision_examples
from mlerl.embedded._settings import drafts as settings_drafts
from mlerl.embedded._settings import supports
from mlerl.embedded._tasks import TaskView

if TYPE_CHECKING:
    from mlerl.actors import PromptConfig

_STRONG = ("hist_gb", "lightgbm", "random_forest", "extra_trees", "grad_boost", "mlp", "logistic")
_FIX = {
    "missing_import": "I will add the missing import.",
    "wrong_path": "The data lives in ./input/, so I will read the files from there.",
    "wrong_column": "I will use the correct target column `{label}`.",
    "typo": "I will fix the misspelled variable name.",
    "no_proba": (
        "The metric needs probabilities, so I will submit predict_proba instead of hard labels."
    ),
    "index": "I will write the CSV without the index column.",
}


LEGACY_DRAFTS = 32
"""Drafts per task of the legacy generator where the settings shape does not apply (image and
span tasks under ``shape="settings"``): its ~30 distinct programs per task gain nothing from
thousands of copies."""


def _output(program: Program, until: str | None = None) -> str:
    """What an instrumented run prints: its markers, up to the chunk holding line `until`."""
    lines: list[str] = []
    for chunk, markers in program.chunks:
        if until is not None and until in chunk.splitlines():
            break
        lines.extend(markers)
    return "\n".join(lines)


def _crash_output(program: Program) -> str:
    tb = program.error.splitlines()
    offending = tb[2][4:] if len(tb) >= 3 else None
    return (_output(program, offending) + "\n" + program.error).strip()


def _draft(view: TaskView, program: Program, prompts: PromptConfig | None = None) -> Example:
    return Example(
        "draft",
        view.id,
        _msgs(draft_messages(view.task, prompts)),
        format_answer(program.plan, program.code),
        program.family,
        program.correct,
        program.mistake,
        program.code,
    )


def _improve(
    view: TaskView,
    rng: random.Random,
    prompts: PromptConfig | None = None,
    styles: bool = True,
    fix_share: float = 0.5,
) -> Example:
    if getattr(prompts, "improve_format", "rewrite") == "edit":
        return _revise(view, rng, prompts, styles, fix_share)
    choices = sample_choices(view, rng, styles)
    good = generate_program(view, rng, choices)
    if rng.random() < fix_share:
        bad = inject(good, view, rng.choice(MISTAKES), rng)
        if bad is not None and bad.mistake is not None:  # inject() names the mistake it made
            fix = _FIX[bad.mistake].format(label=view.label_column)
            lead = (
                f"The previous solution failed: {bad.error.splitlines()[-1]}. "
                if bad.error
                else "The previous solution had a bug. "
            )
            output = _crash_output(bad) if bad.error else _output(bad)
            return Example(
                "improve",
                view.id,
                _msgs(improve_messages(view.task, bad.plan, bad.code, output, prompts)),
                format_answer(lead + fix + " " + good.plan, good.code),
                good.family,
                True,
                None,
                good.code,
                (bad.plan, bad.code),
            )
    weak = replace(choices, budget=0)
    weak_prog = generate_program(view, rng, weak)
    allowed = [f for f in families_for(view.problem, view.modality) if f in _STRONG]
    family = rng.choice(allowed)
    model = make_model(
        family,
        view.problem,
        view.modality,
        rng,
        2,
        choices.seed,
        view.problem in ("binary", "proba"),
    )
    strong = replace(
        choices,
        model=model,
        budget=2,
        validation="holdout"
        if choices.validation == "none" and rng.random() < 0.5
        else choices.validation,
    )
    if len(view.target_columns) > 1 and view.problem in ("binary", "regression"):
        strong = replace(strong, validation="none")
    better = generate_program(view, rng, strong)
    lead = (
        f"The previous solution used {weak.model.phrase}. To improve the score I will switch to "
        f"{model.phrase}. "
    )
    return Example(
        "improve",
        view.id,
        _msgs(
            improve_messages(view.task, weak_prog.plan, weak_prog.code, _output(weak_prog), prompts)
        ),
        format_answer(lead + better.plan, better.code),
        better.family,
        True,
        None,
        better.code,
        (weak_prog.plan, weak_prog.code),
    )


def _revise(
    view: TaskView, rng: random.Random, prompts: PromptConfig | None, styles: bool, fix_share: float
) -> Example:
    """An ``edit``-format improve example: a parent program and the search/replace edits of ONE
    change to it (the bug fixed; or a new hyperparameter setting, model family or feature set,
    drawn at random, so revisions that help and revisions that hurt both appear)."""
    from mlerl.actors import edit_answer

    choices = sample_choices(view, rng, styles)
    parent = generate_program(view, rng, choices)
    proba = view.problem in ("binary", "proba")
    if rng.random() < fix_share:
        bad = inject(parent, view, rng.choice(MISTAKES), rng)
        if bad is not None and bad.mistake is not None:  # inject() names the mistake it made
            lead = (
                f"The previous solution failed: {bad.error.splitlines()[-1]}. "
                if bad.error
                else "The previous solution had a bug. "
            )
            output = _crash_output(bad) if bad.error else _output(bad)
            return Example(
                "improve",
                view.id,
                _msgs(improve_messages(view.task, bad.plan, bad.code, output, prompts)),
                format_answer(
                    lead + _FIX[bad.mistake].format(label=view.label_column),
                    edit_answer(bad.code, parent.code),
                ),
                parent.family,
                True,
                None,
                parent.code,
                (bad.plan, bad.code),
            )
    change = rng.choice(["params", "params", "family", "family", "features"])
    old, span = choices.model, view.problem == "span"
    if change == "params" and not span:
        budget = rng.choice([b for b in (0, 1, 2) if b != choices.budget])
        model = make_model(
            old.family, view.problem, view.modality, rng, budget, choices.seed, proba
        )
        revised = replace(choices, model=model, budget=budget)
        lead = (
            f"The previous solution used {old.phrase}. I will change its settings to "
            f"{model.phrase}."
        )
    elif change == "features" and view.modality == "tabular":
        features = rng.choice(
            [f for f in ("drop", "list", "numeric", "rowstats") if f != choices.features]
        )
        revised = replace(choices, features=features)
        lead = f"I will keep {old.phrase} and change the features the model sees."
    else:
        families = [f for f in families_for(view.problem, view.modality) if f != old.family]
        if span or not families:  # no family to switch to (span tasks): a whole program
            child = generate_program(view, rng, sample_choices(view, rng, styles))
            if child.code == parent.code:
                return _revise(view, rng, prompts, styles, fix_share)
            return Example(
                "improve",
                view.id,
                _msgs(
                    improve_messages(view.task, parent.plan, parent.code, _output(parent), prompts)
                ),
                format_answer("I will try another approach: " + child.plan, child.code),
                child.family,
                True,
                None,
                child.code,
                (parent.plan, parent.code),
            )
        family = rng.choice(families)
        model = make_model(
            family, view.problem, view.modality, rng, choices.budget, choices.seed, proba
        )
        revised = replace(choices, model=model)
        lead = f"The previous solution used {old.phrase}. I will try {model.phrase} instead."
    child = generate_program(view, rng, revised)
    if child.code == parent.code:  # the draw changed nothing the program shows: draw again
        return _revise(view, rng, prompts, styles, fix_share)
    return Example(
        "improve",
        view.id,
        _msgs(improve_messages(view.task, parent.plan, parent.code, _output(parent), prompts)),
        format_answer(lead, edit_answer(parent.code, child.code)),
        child.family,
        True,
        None,
        child.code,
        (parent.plan, parent.code),
    )


def with_real_outputs(
    examples: list[Example],
    views: list[TaskView],
    run: Callable[[list[tuple[Any, str]]], list[str]],
    prompts: PromptConfig | None = None,
) -> list[Example]:
    """`examples` with every improve prompt showing its parent's real terminal output.

    `run` takes (task, program) pairs and returns each program's terminal output as the actors
    show it (`mlerl.embedded._evaluate.terminal_outputs` runs them in the sandbox)."""
    tasks = {v.id: v.task for v in views}
    todo = [
        (i, ex.parent)
        for i, ex in enumerate(examples)
        if ex.kind == "improve" and ex.parent is not None
    ]
    outputs = run([(tasks[examples[i].task_id], parent[1]) for i, parent in todo])
    if len(outputs) != len(todo):
        raise ValueError(f"run returned {len(outputs)} outputs for {len(todo)} programs")
    out = list(examples)
    for (i, (plan, code)), output in zip(todo, outputs, strict=True):
        ex = examples[i]
        out[i] = replace(
            ex, messages=_msgs(improve_messages(tasks[ex.task_id], plan, code, output, prompts))
        )
    return out


def _instrument(view: TaskView, program: Program) -> Example:
    from mlerl.instrument import drop_unjustified

    # only the markers the verifier accepts (a rule-based program defines no library model)
    answer = f"```python\n{drop_unjustified(program.code, program.instrumented)}```"
    return Example(
        "instrument",
        view.id,
        _msgs(instrument_messages(program.code)),
        answer,
        program.family,
        program.correct,
        program.mistake,
        program.code,
    )


def generate_corpus(
    views: list[TaskView],
    seed: int = 0,
    drafts_per_task: int = 48,
    improves_per_task: int = 16,
    instruments_per_task: int = 8,
    mistake_rate: float = 0.2,
    prompts: PromptConfig | None = None,
    styles: bool = True,
    fix_share: float = 0.5,
    shape: str = "legacy",
    revisions_per_task: int = 0,
    revision_hindsight: bool = False,
) -> list[Example]:
    """Deterministic corpus for `views`; duplicate answers are dropped (an
    improve answer only when it revises the same parent).

    `prompts` (a `mlerl.actors.PromptConfig`, default when None) must be the one the actors
    use during RL, so SFT trains on exactly the prompts the policy will see. `styles=False`
    writes every program in one coding style (see `_programs.sample_choices`). `fix_share` of
    the improve examples revise a buggy program, the others a weak one.

    ``shape="settings"`` writes the tasks that support it (`_settings.supports`: tabular and
    text) as settings-block programs: `drafts_per_task` distinct drafts drawn independently,
    none making the task's held-out best combination (`_settings.HELD_OUT`), no injected bugs;
    `revisions_per_task` revisions of the first drafts (two per parent, one decision changed
    each) that `measure_revisions` must run before SFT, with `revision_hindsight` each also
    written reversed (`revision_examples`); instrument examples as usual. Other tasks keep the
    legacy generator."""
    if shape not in ("legacy", "settings"):
        raise ValueError(f"shape must be 'legacy' or 'settings', got {shape!r}")
    for name, value in (("mistake_rate", mistake_rate), ("fix_share", fix_share)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {value}")
    examples: list[Example] = []
    for view in views:
        rng = random.Random(f"{seed}:{view.id}")
        if shape == "settings" and supports(view):
            programs = settings_drafts(view, rng, drafts_per_task)
            examples.extend(_draft(view, p, prompts) for p in programs)
            examples.extend(_instrument(view, p) for p in programs[:instruments_per_task])
            examples.extend(
                revision_examples(
                    view, programs, revisions_per_task, rng, prompts, revision_hindsight
                )
            )
            continue
        legacy = drafts_per_task if shape == "legacy" else min(drafts_per_task, LEGACY_DRAFTS)
        for _ in range(legacy):
            mistake = rng.choice(MISTAKES) if rng.random() < mistake_rate else None
            program = with_mistake(generate_program(view, rng, styles=styles), view, mistake, rng)
            examples.append(_draft(view, program, prompts))
        for _ in range(improves_per_task):
            examples.append(_improve(view, rng, prompts, styles, fix_share))
        for _ in range(instruments_per_task):
            examples.append(_instrument(view, generate_program(view, rng, styles=styles)))
    seen: set[str] = set()
    unique = []
    for ex in examples:
        # an improve answer is a duplicate only for the same parent: one edit (LOG_TARGET to
        # True) is a different example for every parent it revises
        parent = ex.parent[1] if ex.parent else ""
        key = ex.kind + "\0" + ex.task_id + "\0" + ex.answer + "\0" + parent
        if key not in seen:
            seen.add(key)
            unique.append(ex)
    return unique


def corpus_hash(examples: list[Example]) -> str:
    """sha256 over the examples' content (order-sensitive), hex, 16 characters. `hindsight`
    enters only where set: it came after policies were cached, which keep their keys."""
    h = hashlib.sha256()
    for ex in examples:
        fields = asdict(ex)
        if not fields["hindsight"]:
            del fields["hindsight"]
        h.update(json.dumps(fields, sort_keys=True).encode())
    return h.hexdigest()[:16]


def corpus_stats(examples: list[Example]) -> dict[str, object]:
    drafts = [e for e in examples if e.kind == "draft"]
    return {
        "examples": len(examples),
        "by_kind": {
            k: sum(e.kind == k for e in examples) for k in ("draft", "improve", "instrument")
        },
        "families": sorted({e.family for e in drafts}),
        "distinct_programs": len({e.code for e in drafts}),
        "mistakes": sum(not e.correct for e in drafts),
        "chars": sum(len(e.answer) + sum(len(c) for _, c in e.messages) for e in examples),
    }
