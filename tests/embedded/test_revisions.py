"""Revisions of settings-block programs, measured by running parent and child."""

import hashlib
import json
import random
from dataclasses import asdict

import pytest

from mlerl.embedded import _revisions as R
from mlerl.embedded import _settings as S
from mlerl.embedded import generate_corpus
from mlerl.embedded._corpus import corpus_hash
from mlerl.embedded._evaluate import ProgramRun, observe_programs

MATERIALS, INSULTS = "standin-materials-rmsle-tiny", "standin-insults-auc-tiny"


def _view(views, task_id):
    return next(v for v in views if v.id == task_id)


def test_the_hold_out_score_is_the_mean_of_the_printed_lines():
    out = "loaded data\nvalidation rmsle a: 0.0200\nvalidation rmsle b: 0.0400\ntrained model"
    assert R.validation_score(out) == pytest.approx(0.03)
    assert R.validation_score("validation log loss: 0.5000") == 0.5
    assert R.validation_score("validation auc Insult: 1e-05") == 1e-05
    assert R.validation_score("loaded data\nTraceback ...") is None
    assert R.validation_score("validation rmsle a: nan") is None  # not a number: no score


def test_the_effect_is_signed_so_that_positive_is_better(views):
    rmsle, auc = _view(views, MATERIALS), _view(views, INSULTS)
    e = R.effect(rmsle, "validation rmsle a: 0.0300", "validation rmsle a: 0.0200")
    assert e is not None and e.gain == pytest.approx(0.01)  # lower is better: 0.03 -> 0.02 helps
    e = R.effect(auc, "validation auc Insult: 0.9000", "validation auc Insult: 0.8500")
    assert e is not None and e.gain == pytest.approx(-0.05)  # higher is better: it hurt
    assert R.effect(auc, "validation auc Insult: 0.9000", "Traceback") is None


@pytest.mark.parametrize("task_id", [MATERIALS, INSULTS, "standin-wine-logloss-tiny"])
def test_a_revision_changes_one_decision_and_never_makes_the_held_out_combination(views, task_id):
    view = _view(views, task_id)
    rng = random.Random(0)
    changed_names = set()
    for parent in S.drafts(view, random.Random(1), 150):
        child = R.revise(view, parent.choices, rng)
        assert child is not None
        old, new = dict(parent.choices.lines), dict(child.lines)
        assert list(old) == list(new)  # the same settings, in the same order
        changed = {k for k in old if old[k] != new[k]}
        # a new family redraws its parameters; a new analyzer its n-gram range
        pairs = ({"MODEL", "PARAMS"}, {"ANALYZER", "NGRAMS"})
        assert changed and (len(changed) == 1 or changed in pairs), changed
        assert not S.held_out(view, child)
        changed_names |= changed
        compile(S.code(view, child), "child.py", "exec")
    assert changed_names == set(R.decisions(view))  # every decision gets revised somewhere


def test_the_lead_names_each_changed_line():
    a = S.Settings((("LOG_TARGET", "False"), ("MODEL", '"ridge"'), ("PARAMS", '{"alpha": 1.0}')))
    b = a.replace("MODEL", '"knn"').replace("PARAMS", '{"n_neighbors": 5}')
    assert R.lead(a, b) == "To improve the validation score I will change MODEL and PARAMS."
    assert R.lead(a, a.replace("LOG_TARGET", "True")) == (
        "To improve the validation score I will change LOG_TARGET."
    )


def _fake_runs(revisions, outcomes):
    """A `run` for `measure_revisions`: every parent of `revisions` printed a hold-out score of
    0.05; each child ended as its outcome (None: its parent's submission again)."""
    table = {}
    for e in revisions:
        table[e.parent[1]] = ProgramRun("validation rmsle a: 0.0500", "p" + e.parent[1][-40:], 1.0)
    for e, outcome in zip(revisions, outcomes, strict=True):
        table[e.code] = outcome or table[e.parent[1]]

    def run(items):
        return [table[code] for _, code in items]

    return run


def test_only_revisions_that_both_ran_and_changed_the_submission_are_kept(views):
    view = _view(views, MATERIALS)
    ex = generate_corpus([view], 0, 20, 0, 0, shape="settings", revisions_per_task=8)
    todo = [e for e in ex if e.measure]
    assert len(todo) == 8 and all(e.kind == "improve" and e.effect is None for e in todo)
    assert {e.parent[1] for e in todo} == set([e.code for e in ex if e.kind == "draft"][:4])
    # parents: 0.05; children: better, worse, same submission, crashed, no score, ...
    outcomes = [
        ProgramRun("validation rmsle a: 0.0400", "better", 1.0),
        ProgramRun("validation rmsle a: 0.0700", "worse", 1.0),
        None,  # same submission as its parent
        ProgramRun("Traceback: boom", None, 1.0),
        ProgramRun("no score printed", "other", 1.0),
        ProgramRun("validation rmsle a: 0.0450", "better2", 1.0),
        ProgramRun("validation rmsle a: 0.0500", "same score", 1.0),
        ProgramRun("validation rmsle a: 0.0600", "worse2", 1.0),
    ]
    out, counts = R.measure_revisions(ex, [view], _fake_runs(todo, outcomes))
    assert counts == {
        "kept": 5,
        "helped": 2,
        "hurt": 2,
        "unchanged": 1,
        "failed": 1,
        "no_score": 1,
        "reversed": 0,
    }
    kept = [e for e in out if e.kind == "improve"]
    assert [round(e.effect, 4) for e in kept] == [0.01, -0.02, 0.005, 0.0, -0.01]
    assert not any(e.measure for e in out)
    assert all("validation rmsle a: 0.0500" in e.messages[-1][1] for e in kept)
    assert [e for e in out if e.kind != "improve"] == [e for e in ex if e.kind != "improve"]
    with pytest.raises(ValueError, match="results"):
        R.measure_revisions(ex, [view], lambda items: [])


def test_hindsight_writes_each_revision_reversed_and_keeps_the_direction_that_helped(views):
    view = _view(views, MATERIALS)
    plain = generate_corpus([view], 0, 20, 0, 0, shape="settings", revisions_per_task=6)
    both = generate_corpus(
        [view], 0, 20, 0, 0, shape="settings", revisions_per_task=6, revision_hindsight=True
    )
    # the drawn revisions are the same; each is followed by its reverse
    assert [e for e in both if not e.hindsight] == plain
    forward = [e for e in both if e.measure and not e.hindsight]
    back = [e for e in both if e.hindsight]
    assert len(forward) == len(back) == 6
    for f, r in zip(forward, back, strict=True):
        assert both.index(r) == both.index(f) + 1
        assert r.parent[1] == f.code and r.code == f.parent[1]
        assert r.measure and r.kind == "improve"
    # a reverse names the same settings, changed back
    assert [r.answer.split(".")[0] for r in back] == [f.answer.split(".")[0] for f in forward]
    # a corpus without reverses hashes as before the field existed (cached policies keep keys)
    old = hashlib.sha256()
    for e in plain:
        fields = asdict(e)
        del fields["hindsight"]
        old.update(json.dumps(fields, sort_keys=True).encode())
    assert corpus_hash(plain) == old.hexdigest()[:16]
    assert corpus_hash(both) != corpus_hash(plain)

    # parents 0.05; children: better, worse, same submission, crashed, no score, same score
    outcomes = [
        ProgramRun("validation rmsle a: 0.0400", "better", 1.0),
        ProgramRun("validation rmsle a: 0.0700", "worse", 1.0),
        None,
        ProgramRun("Traceback: boom", None, 1.0),
        ProgramRun("no score printed", "other", 1.0),
        ProgramRun("validation rmsle a: 0.0500", "same score", 1.0),
    ]
    out, counts = R.measure_revisions(both, [view], _fake_runs(forward, outcomes))
    assert counts == {
        "kept": 3,
        "helped": 1,
        "hurt": 1,
        "unchanged": 1,
        "failed": 1,
        "no_score": 1,
        "reversed": 1,
    }
    kept = [e for e in out if e.kind == "improve"]
    # one example per kept pair: the better child as drawn, the worse one reversed, the
    # same score as drawn
    assert [e.hindsight for e in kept] == [False, True, False]
    assert [round(e.effect, 4) for e in kept] == [0.01, 0.02, 0.0]
    assert kept[1].code == forward[1].parent[1]
    assert "validation rmsle a: 0.0700" in kept[1].messages[-1][1]  # the worse child's output
    assert forward[1].code in kept[1].messages[-1][1]  # revised: the worse child's program


def test_real_runs_measure_a_revision(views):
    """Parent and child run in the local sandbox as an actor runs them: the parent's output
    (with its hold-out scores) goes into the prompt and the effect is the printed difference."""
    view = _view(views, MATERIALS)
    parent = S.Settings(
        (
            ("LOG_TARGET", "False"),
            ("ONE_HOT", "[]"),
            ("PRODUCTS", "[]"),
            ("MODEL", '"ridge"'),
            ("PARAMS", '{"alpha": 1.0}'),
        )
    )
    child = parent.replace("LOG_TARGET", "True")
    runs = observe_programs([(view.task, S.code(view, s)) for s in (parent, child, parent)])
    assert all(r.submission for r in runs) and runs[0].submission == runs[2].submission
    assert runs[0].submission != runs[1].submission
    measured = R.effect(view, runs[0].output, runs[1].output)
    assert measured is not None and measured.gain != 0
    assert "loaded data" in runs[0].output and "validation rmsle" in runs[0].output


def test_an_edit_format_revision_is_one_anchorable_line_per_changed_setting(views):
    from mlerl.actors import PromptConfig
    from mlerl.actors._edits import apply_edits, parse_edits

    view = _view(views, MATERIALS)
    prompts = PromptConfig(improve_format="edit")
    ex = generate_corpus(
        [view], 0, 30, 0, 0, prompts=prompts, shape="settings", revisions_per_task=20
    )
    revisions = [e for e in ex if e.measure]
    assert any(e.answer.count(">>>>>>> REPLACE") == 2 for e in revisions)  # MODEL and PARAMS
    for e in revisions:
        plan, _, block = e.answer.partition("```python\n")
        assert plan.startswith("To improve the validation score I will change ")
        edits = parse_edits(block.removesuffix("```").strip())
        assert all(len(search) == 1 and len(new) == 1 for search, new in edits)
        assert apply_edits(e.parent[1], edits).strip() == e.code.strip()


def test_the_same_edit_of_different_parents_is_kept_for_each(views):
    from mlerl.actors import PromptConfig

    view = _view(views, MATERIALS)
    prompts = PromptConfig(improve_format="edit")
    ex = generate_corpus(
        [view], 0, 200, 0, 0, prompts=prompts, shape="settings", revisions_per_task=64
    )
    revisions = [e for e in ex if e.measure]
    assert len(revisions) == 64
    assert len({e.answer for e in revisions}) < 64  # some edits repeat across parents
    assert len({(e.answer, e.parent) for e in revisions}) == 64


def test_changing_a_setting_the_program_does_not_have_says_which_it_has(views):
    view = _view(views, INSULTS)
    settings = S.draw(view, random.Random(0))
    with pytest.raises(ValueError, match="LOG_TARGET.*ANALYZER"):
        R.change_setting(view, settings, "LOG_TARGET", random.Random(0))
