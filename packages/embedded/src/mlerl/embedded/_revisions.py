"""Revisions of settings-block programs, measured by running parent and child.

A revision changes ONE decision of its parent (a line of the settings block; a new family
also redraws its parameters), so it is a one- or two-line edit. The corpus writes revision
examples unmeasured (`revision_examples`); the bootstrap then runs every parent and child the
way the actors run a program (`mlerl.embedded._evaluate.observe_programs`) and
`measure_revisions` keeps a revision only when both ran and the child's submission differs
from its parent's: the prompt shows the parent's real terminal output (its hold-out scores
included) and the example records the measured effect on the printed hold-out score.
Revisions that help and revisions that hurt both stay, so the initial policy proposes edits
without knowing which help: telling them apart from the parent's output is what RL has to
learn. With hindsight (`BootstrapConfig.revision_hindsight`) a revision that hurt is kept
reversed instead: its child, with the child's real output, revised back into its parent.
"""

from __future__ import annotations

import ast
import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from mlerl.embedded._example import Example, _msgs
from mlerl.embedded._prompts import format_answer, improve_messages
from mlerl.embedded._settings import (
    Settings,
    _columns,
    _literal,
    _params,
    families,
    held_out,
    param_grid,
    product,
)
from mlerl.embedded._settings import program as settings_program
from mlerl.embedded._tasks import TaskView

if TYPE_CHECKING:
    from mlerl.actors import PromptConfig
    from mlerl.embedded._evaluate import ProgramRun
    from mlerl.embedded._programs import Program

_SCORE = re.compile(r"^validation [^:]+: (?P<value>-?\d+(?:\.\d+)?(?:e-?\d+)?)$")


def decisions(view: TaskView) -> list[str]:
    """The settings a revision may change for `view`'s program shape."""
    if view.modality == "text":
        return ["ANALYZER", "NGRAMS", "MAX_FEATURES", "MODEL", "PARAMS"]
    numeric, few = _columns(view)
    names = ["LOG_TARGET"] if view.problem == "regression" else []
    names += ["ONE_HOT"] if few else []
    names += ["PRODUCTS"] if len(numeric) >= 2 else []
    return [*names, "MODEL", "PARAMS"]


def _param_items(text: str) -> list[tuple[str, str]]:
    """The (name, value as written) pairs of a PARAMS dict literal."""
    node = ast.parse(text, mode="eval").body
    assert isinstance(node, ast.Dict)
    return [
        (ast.literal_eval(k), ast.get_source_segment(text, v) or "")
        for k, v in zip(node.keys, node.values, strict=True)
        if k is not None
    ]


def _new_params(view: TaskView, s: Settings, rng: random.Random) -> str | None:
    """PARAMS with one parameter moved to another value of its family's grid, every value
    written as a draft writes it."""
    grid = param_grid(s.get("MODEL").strip('"'), view)
    current = dict(_param_items(s.get("PARAMS")))
    options = [
        (key, _literal(v))
        for key, values in grid.items()
        if key in current
        for v in values
        if _literal(v) != current[key]
    ]
    if not options:
        return None
    key, value = rng.choice(options)
    return "{" + ", ".join(f'"{k}": {value if k == key else v}' for k, v in current.items()) + "}"


def change_setting(view: TaskView, s: Settings, name: str, rng: random.Random) -> Settings | None:
    """`s` with decision `name` drawn again to a different value (None when it has none).
    `name` must be one of `decisions(view)`: a ValueError names the ones that are."""
    d = dict(s.lines)
    if name not in decisions(view) or name not in d:
        raise ValueError(f"{name!r} is not a decision of this program: {decisions(view)}")
    numeric, few = _columns(view) if view.modality != "text" else ([], [])
    if name == "LOG_TARGET":
        return s.replace(name, str(d[name] != "True"))
    if name == "ONE_HOT":
        cols = ast.literal_eval(d[name])
        col = rng.choice(few)
        new = [c for c in few if (c in cols) != (c == col)]
        return s.replace(name, repr(new))
    if name == "PRODUCTS":
        products = ast.literal_eval(d[name])
        if products and rng.random() < 0.5:
            products.pop(rng.randrange(len(products)))
        else:
            pick = product(numeric, rng)
            if pick in products:
                return None
            products.append(pick)
        return s.replace(name, repr(products))
    if name == "MODEL":
        family = rng.choice([f for f in families(view) if f != d[name].strip('"')])
        return s.replace(name, f'"{family}"').replace("PARAMS", _params(family, view, rng))
    if name == "PARAMS":
        params = _new_params(view, s, rng)
        return s.replace(name, params) if params else None
    if name == "ANALYZER":
        analyzer = "word" if d[name] == '"char_wb"' else "char_wb"
        ngrams = "(1, 2)" if analyzer == "word" else "(2, 4)"
        return s.replace(name, f'"{analyzer}"').replace("NGRAMS", ngrams)
    if name == "NGRAMS":
        lo = 1 if d["ANALYZER"] == '"word"' else 2
        his = [h for h in ((1, 2, 3) if lo == 1 else (3, 4, 5)) if f"({lo}, {h})" != d[name]]
        return s.replace(name, f"({lo}, {rng.choice(his)})")
    if name == "MAX_FEATURES":
        sizes = [v for v in ("5000", "20000", "50000") if v != d[name]]
        return s.replace(name, rng.choice(sizes))
    raise AssertionError(f"decisions() lists {name!r} but change_setting does not handle it")


def revise(view: TaskView, s: Settings, rng: random.Random, tries: int = 20) -> Settings | None:
    """A child of `s` that changes one decision, drawn at random, and does not make the task's
    held-out best combination; None when `tries` draws found none."""
    names = decisions(view)
    for _ in range(tries):
        child = change_setting(view, s, rng.choice(names), rng)
        if child is not None and child != s and not held_out(view, child):
            return child
    return None


def lead(parent: Settings, child: Settings) -> str:
    """The sentence an improve answer opens with: which settings change (the new values follow
    in the edits, or in the plan and the program of a full rewrite)."""
    old = dict(parent.lines)
    changed = [k for k, v in child.lines if old.get(k) != v]
    return f"To improve the validation score I will change {' and '.join(changed)}."


def validation_score(output: str) -> float | None:
    """The mean of the hold-out scores a settings-block program prints (one line per target:
    ``validation rmsle formation_energy_ev_natom: 0.0187``); None when it printed none."""
    values = []
    for line in output.splitlines():
        m = _SCORE.match(line.strip())
        if m:
            values.append(float(m["value"]))
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else None


@dataclass(frozen=True)
class Effect:
    """What running a parent and its revision measured."""

    parent: float
    child: float
    gain: float
    """Improvement of the hold-out score, signed so that positive is better (the task's metric
    direction: the printed score is the task's metric on a hold-out of train)."""


def effect(view: TaskView, parent_output: str, child_output: str) -> Effect | None:
    """The revision's measured effect, or None when either program printed no hold-out score."""
    a, b = validation_score(parent_output), validation_score(child_output)
    if a is None or b is None:
        return None
    gain = (a - b) if view.lower_is_better else (b - a)
    return Effect(a, b, gain)


def revision_examples(
    view: TaskView,
    programs: list[Program],
    n: int,
    rng: random.Random,
    prompts: PromptConfig | None,
    hindsight: bool = False,
) -> list[Example]:
    """`n` unmeasured revision examples of settings-block drafts: two children per parent.

    `hindsight` also writes each revision's reverse (the child revised back into its parent,
    an `Example.hindsight` example) right after it, without drawing from `rng`, so the drawn
    revisions are the same either way; `measure_revisions` then keeps the direction that
    helped."""
    out = []
    siblings: set[Settings] = set()
    for i in range(min(n, 2 * len(programs))):
        parent = programs[i // 2]
        settings = parent.choices
        assert isinstance(settings, Settings)
        if i % 2 == 0:
            siblings = set()
        revised = next(
            (c for c in (revise(view, settings, rng) for _ in range(10)) if c not in siblings),
            None,
        )
        if revised is None:
            continue
        siblings.add(revised)
        child = settings_program(view, revised)
        out.append(_revision(view, parent, child, prompts))
        if hindsight:
            out.append(_revision(view, child, parent, prompts, hindsight=True))
    return out


def _revision(
    view: TaskView,
    parent: Program,
    child: Program,
    prompts: PromptConfig | None,
    hindsight: bool = False,
) -> Example:
    """The unmeasured improve example that revises `parent` into `child` (settings programs)."""
    from mlerl.actors import edit_answer

    old, new = parent.choices, child.choices
    assert isinstance(old, Settings) and isinstance(new, Settings)
    if getattr(prompts, "improve_format", "rewrite") == "edit":
        # one single-line edit per changed setting: the actor anchors a line it misquotes
        lines = dict(old.lines)
        code = "\n".join(
            edit_answer(parent.code, settings_program(view, old.replace(k, v)).code)
            for k, v in new.lines
            if lines[k] != v
        )
        text = lead(old, new)
    else:
        code, text = child.code, lead(old, new) + " " + child.plan
    return Example(
        "improve",
        view.id,
        _msgs(improve_messages(view.task, parent.plan, parent.code, "", prompts)),
        format_answer(text, code),
        child.family,
        True,
        None,
        child.code,
        (parent.plan, parent.code),
        measure=True,
        hindsight=hindsight,
    )


def measure_revisions(
    examples: list[Example],
    views: list[TaskView],
    run: Callable[[list[tuple[Any, str]]], list[ProgramRun]],
    prompts: PromptConfig | None = None,
) -> tuple[list[Example], dict[str, Any]]:
    """`examples` with each revision to measure run: kept, with its parent's real terminal
    output in the prompt and its measured `effect`, when parent and child both wrote a
    submission, the submissions differ and both printed a hold-out score; left out otherwise.

    `run` takes (task, program) pairs and returns a `ProgramRun` for each
    (`mlerl.embedded._evaluate.observe_programs` runs them in the sandbox, as the actors do).
    Where a revision's reverse was written (`Example.hindsight`), exactly one direction of
    the pair is kept: the revision unless it hurt, else its reverse (the child's output in
    the prompt, the parent as the answer).

    Returns the examples and counts of the drawn revisions (kept, helped, hurt, unchanged,
    failed, no score) and of the hurt ones kept reversed (reversed)."""
    views_by_id = {v.id: v for v in views}
    todo = [ex for ex in examples if ex.measure]
    codes: dict[tuple[str, str], None] = {}
    for ex in todo:
        assert ex.parent is not None
        codes[(ex.task_id, ex.parent[1])] = None
        codes[(ex.task_id, ex.code)] = None
    keys = list(codes)
    runs = run([(views_by_id[t].task, code) for t, code in keys])
    if len(runs) != len(keys):
        raise ValueError(f"run returned {len(runs)} results for {len(keys)} programs")
    ran = dict(zip(keys, runs, strict=True))
    reversed_ = {(ex.task_id, ex.code, ex.parent[1]) for ex in todo if ex.hindsight and ex.parent}
    counts = dict.fromkeys(
        ("kept", "helped", "hurt", "unchanged", "failed", "no_score", "reversed"), 0
    )
    out = []
    for ex in examples:
        if not ex.measure:
            out.append(ex)
            continue
        assert ex.parent is not None
        view = views_by_id[ex.task_id]
        a, b = ran[(ex.task_id, ex.parent[1])], ran[(ex.task_id, ex.code)]
        measured = None
        if a.submission is None or b.submission is None:
            status = "failed"
        elif a.submission == b.submission:
            status = "unchanged"
        else:
            measured = effect(view, a.output, b.output)
            status = "no_score" if measured is None else "kept"
        if ex.hindsight:  # the same two runs as its revision, which alone is counted
            if measured is None or measured.gain <= 0:
                continue
            counts["reversed"] += 1
        else:
            counts[status] += 1
            if measured is None:
                continue
            if measured.gain != 0:
                counts["helped" if measured.gain > 0 else "hurt"] += 1
            if measured.gain < 0 and (ex.task_id, ex.parent[1], ex.code) in reversed_:
                continue  # its reverse, a measured help, is kept instead
        messages = improve_messages(view.task, ex.parent[0], ex.parent[1], a.output, prompts)
        out.append(replace(ex, messages=_msgs(messages), measure=False, effect=measured.gain))
    return out, counts
