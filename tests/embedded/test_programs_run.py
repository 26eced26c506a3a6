"""Correct corpus programs really run and write a valid submission; bugs really crash."""

import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from mlerl.embedded import generate_program, run_program
from mlerl.embedded._mistakes import with_mistake
from mlerl.embedded._programs import sample_choices

FAST = {
    "logistic",
    "ridge",
    "linear",
    "naive_bayes",
    "knn",
    "full_text",
    "last_words",
    "word_scores",
    "sentiment_word_scores",
    "sgd",
    "random_forest",
    "extra_trees",
}


def _cheap_programs(view, count, seed=0):
    """The first `count` budget-0 correct programs of fast families (deterministic)."""
    rng, out = random.Random(f"{seed}:{view.id}"), []
    while len(out) < count:
        c = sample_choices(view, rng)
        if c.model.family in FAST and c.budget == 0:
            out.append(generate_program(view, rng, c))
    return out


def _run_all(jobs, registry):
    """Run (view, program) pairs two at a time (the machine has 2 cores)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda j: run_program(j[1].code, registry.get(j[0].id), 300), jobs))


def test_one_correct_program_per_tiny_task_is_valid(views, registry):
    jobs = [(view, _cheap_programs(view, 1)[0]) for view in views]
    for (view, program), outcome in zip(jobs, _run_all(jobs, registry)):
        assert outcome.exit_code == 0, (view.id, outcome.error, program.code)
        assert outcome.valid and outcome.score is not None, (view.id, program.code)


@pytest.mark.slow
def test_varied_correct_programs_are_valid(views, registry):
    jobs = [(view, _cheap_programs(view, 2, seed=1)[1]) for view in views]
    for (view, program), outcome in zip(jobs, _run_all(jobs, registry)):
        assert outcome.valid, (view.id, program.family, outcome.error, program.code)


@pytest.mark.parametrize("mistake", ["missing_import", "wrong_path", "wrong_column", "typo"])
def test_crashing_mistake_prints_the_error_the_corpus_shows(views, registry, mistake):
    view = next(v for v in views if v.id.startswith("standin-cancer"))
    rng = random.Random(mistake)
    program = with_mistake(
        generate_program(view, rng, _cheap_programs(view, 1)[0].choices), view, mistake, rng
    )
    assert program.mistake == mistake and not program.correct
    outcome = run_program(program.code, registry.get(view.id), timeout_s=300)
    assert outcome.exit_code not in (0, None)
    # the synthesized traceback ends with the exception the real run raised
    assert program.error.splitlines()[-1].split(":")[0] == outcome.error


def test_run_program_reports_syntax_error_and_missing_code(views, registry):
    task = registry.get(views[0].id)
    assert run_program("", task, 10).error == "NoCodeBlock"
    bad = run_program("def f(:\n", task, 10)
    assert not bad.parsed and bad.error.startswith("SyntaxError")
    quiet = run_program("print('no submission')\n", task, 30)
    assert quiet.exit_code == 0 and not quiet.valid and quiet.error == "NoSubmission"


def test_terminal_outputs_are_what_the_actors_show(views, registry):
    """The improve examples' outputs come from the sandbox the way an RL action's do: plain
    markers (with their values), the program's own prints, and the real traceback."""
    from mlerl.embedded._evaluate import terminal_outputs

    view = next(v for v in views if v.id == "standin-wine-logloss-tiny")
    good = _cheap_programs(view, 1)[0]
    bad = good.code.replace("import pandas as pd\n", "")
    ok, crashed = terminal_outputs(
        [(registry.get(view.id), good.code), (registry.get(view.id), bad)]
    )
    assert ok.startswith("imported packages\nloaded data\n") and "predicted test labels" in ok
    assert ":key " not in ok and "Traceback" not in ok  # channel lines cleaned, nothing raised
    assert (
        "Traceback (most recent call last)" in crashed
        and "NameError: name 'pd' is not defined" in crashed
    )
