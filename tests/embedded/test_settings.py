"""Settings-block programs: one decision per line, a fixed body, a hold-out score
printed per target, the held-out best combination never in the corpus."""

import ast
import random
import subprocess
import sys

import pytest

from mlerl.embedded import BootstrapConfig, generate_corpus
from mlerl.embedded import _settings as S
from mlerl.protocol import ConfigError

MATERIALS, INSULTS = "standin-materials-rmsle-tiny", "standin-insults-auc-tiny"


def _view(views, task_id):
    return next(v for v in views if v.id == task_id)


def test_supported_tasks_are_tabular_and_text_but_not_span_or_image(views):
    by_id = {v.id: S.supports(v) for v in views}
    assert by_id[MATERIALS] and by_id[INSULTS] and by_id["standin-wine-logloss-tiny"]
    assert not by_id["standin-tweets-jaccard-tiny"] and not by_id["standin-digits-accuracy-tiny"]


@pytest.mark.parametrize(
    "task_id",
    [
        MATERIALS,
        INSULTS,
        "standin-wine-logloss-tiny",
        "standin-diabetes-pearson-tiny",
        "standin-essays-qwk-tiny",
    ],
)
def test_drafts_differ_only_in_their_settings_block(views, task_id):
    view = _view(views, task_id)
    programs = S.drafts(view, random.Random(0), 40)
    assert len({p.code for p in programs}) == len(programs) == 40
    for p in programs:
        ast.parse(p.code)
        chunks = [c for c, _ in p.chunks]
        settings = chunks[1].splitlines()
        assert all(" = " in line and "\n" not in line for line in settings)  # one decision per line
        assert p.code.replace(chunks[1], "") == programs[0].code.replace(
            programs[0].chunks[1][0], ""
        )
        assert p.instrumented.replace('print("', "").count("\n") > p.code.count("\n") - 1


def test_the_held_out_combination_is_never_drafted(views):
    for task_id in (MATERIALS, INSULTS):
        view = _view(views, task_id)
        programs = S.drafts(view, random.Random(1), 300)
        assert not any(S.held_out(view, p.choices) for p in programs)
        drawn = [S.draw(view, random.Random(i)) for i in range(4000)]
        assert any(S.held_out(view, s) for s in drawn)  # the generator alone would write it


def test_a_settings_corpus_has_drafts_and_instrumentations_and_legacy_programs_elsewhere(views):
    chosen = [_view(views, MATERIALS), _view(views, "standin-tweets-jaccard-tiny")]
    ex = generate_corpus(
        chosen,
        seed=0,
        drafts_per_task=50,
        improves_per_task=2,
        instruments_per_task=3,
        shape="settings",
    )
    mat = [e for e in ex if e.task_id == MATERIALS]
    assert (
        sum(e.kind == "draft" for e in mat) == 50 and sum(e.kind == "instrument" for e in mat) == 3
    )
    assert all("MODEL = " in e.answer for e in mat if e.kind == "draft")
    tweets = [e for e in ex if e.task_id != MATERIALS]
    assert any(e.kind == "improve" for e in tweets) and not any(
        "MODEL = " in e.answer for e in tweets
    )
    with pytest.raises(ValueError, match="shape"):
        generate_corpus(chosen, shape="fancy")
    with pytest.raises(ConfigError):
        BootstrapConfig(shape="fancy")


@pytest.mark.parametrize("task_id,label", [(MATERIALS, "rmsle"), (INSULTS, "auc")])
def test_a_program_prints_a_hold_out_score_per_target_and_writes_a_valid_submission(
    views, task_id, label, tmp_path
):
    from mlerl.bench import grade_submission

    view = _view(views, task_id)
    settings = S.draw(view, random.Random(3))
    settings = settings.replace("MODEL", '"ridge"' if task_id == MATERIALS else '"logistic"')
    settings = settings.replace(
        "PARAMS", '{"alpha": 1.0}' if task_id == MATERIALS else '{"C": 1.0}'
    )
    (tmp_path / "input").symlink_to(view.task.public_dir)
    (tmp_path / "p.py").write_text(S.code(view, settings))
    run = subprocess.run(
        [sys.executable, "p.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    lines = [line for line in run.stdout.splitlines() if line.startswith(f"validation {label} ")]
    targets = view.target_columns if task_id == MATERIALS else ("Insult",)
    assert [line.split()[2].rstrip(":") for line in lines] == list(targets)
    assert all(0 < float(line.split()[-1]) < 1 for line in lines)
    report = grade_submission(view.task, tmp_path / "submission.csv")
    assert report.valid_submission, report.error


@pytest.mark.parametrize(
    "model,params",
    [
        ('"random_forest"', '{"n_estimators": 20, "max_depth": None}'),
        ('"mlp"', '{"hidden_layer_sizes": (8,), "max_iter": 50}'),
    ],
)
def test_a_program_of_a_randomised_family_writes_the_same_submission_on_every_run(
    views, model, params, tmp_path
):
    """Revisions are measured by running programs and RL compares their scores: a forest or a
    network must not score differently from one run to the next."""
    view = _view(views, MATERIALS)
    settings = S.draw(view, random.Random(3)).replace("MODEL", model).replace("PARAMS", params)
    (tmp_path / "input").symlink_to(view.task.public_dir)
    (tmp_path / "p.py").write_text(S.code(view, settings))
    outputs = []
    for _ in range(2):
        run = subprocess.run(
            [sys.executable, "p.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300
        )
        assert run.returncode == 0, run.stderr
        outputs.append((run.stdout, (tmp_path / "submission.csv").read_bytes()))
    assert outputs[0] == outputs[1]


def test_the_held_out_predicates_take_any_settings_block(views):
    """A policy's answer may miss lines: the predicates then say False, they do not raise."""
    for task_id in (MATERIALS, INSULTS):
        view = _view(views, task_id)
        assert not S.held_out(view, S.Settings(()))
        assert not S.held_out(view, S.Settings((("LOG_TARGET", "True"),)))


def test_the_insults_predicate_is_char_ngrams_to_five_and_a_weak_linear_model(views):
    view = _view(views, INSULTS)
    best = S.Settings(
        (
            ("ANALYZER", '"char_wb"'),
            ("NGRAMS", "(2, 5)"),
            ("MAX_FEATURES", "5000"),
            ("MODEL", '"logistic"'),
            ("PARAMS", '{"C": 30.0, "max_iter": 1000}'),
        )
    )
    sgd = best.replace("MODEL", '"sgd"')
    assert S.held_out(view, best)
    assert S.held_out(view, best.replace("PARAMS", '{"C": 10.0, "max_iter": 1000}'))
    assert S.held_out(view, sgd.replace("PARAMS", '{"alpha": 1e-05, "loss": "log_loss"}'))
    assert not S.held_out(view, sgd.replace("PARAMS", '{"alpha": 0.001, "loss": "log_loss"}'))
    assert not S.held_out(view, best.replace("PARAMS", '{"C": 1.0, "max_iter": 1000}'))
    assert not S.held_out(view, best.replace("NGRAMS", "(2, 4)"))
    assert not S.held_out(view, best.replace("ANALYZER", '"word"'))
    assert not S.held_out(
        view, best.replace("MODEL", '"naive_bayes"').replace("PARAMS", '{"alpha": 0.1}')
    )
    assert not S.held_out(view, best.replace("NGRAMS", "(2, 5"))  # broken
    assert not S.held_out(view, best.replace("PARAMS", '{"C": "big"}'))


def test_the_materials_predicate_is_a_log_target_lightgbm_and_the_basal_area_product(views):
    view = _view(views, MATERIALS)
    best = S.Settings(
        (
            ("LOG_TARGET", "True"),
            ("ONE_HOT", "[]"),
            (
                "PRODUCTS",
                "['percent_atom_al*percent_atom_in', 'lattice_vector_1_ang*lattice_vector_2_ang']",
            ),
            ("MODEL", '"lightgbm"'),
            ("PARAMS", '{"n_estimators": 50}'),
        )
    )
    assert S.held_out(view, best)
    swapped = "['lattice_vector_2_ang*lattice_vector_1_ang']"
    assert S.held_out(view, best.replace("PRODUCTS", swapped))  # either order names the product
    assert not S.held_out(
        view, best.replace("PRODUCTS", "['lattice_vector_1_ang*lattice_vector_3_ang']")
    )
    assert not S.held_out(view, best.replace("LOG_TARGET", "False"))
    assert not S.held_out(view, best.replace("MODEL", '"hist_gb"'))
    assert not S.held_out(
        view, best.replace("PRODUCTS", "['lattice_vector_1_ang*lattice_")
    )  # broken
