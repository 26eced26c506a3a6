"""Every stand-in: prepare (tiny) -> layout and no leak -> grade the sample -> grade a reference."""

import math

import pandas as pd
import pytest

from mlerl.bench import Registry, grade_submission, prepare
from mlerl.bench._reference import solutions
from mlerl.bench._standins import BUILDERS, tiny_size

TINY = [f"{b}-tiny" for b in BUILDERS]
# the sample submission's expected score: constant probabilities -> AUC 0.5, constant Pearson
# -> NaN, uniform 3-class -> ln 3, constant QWK -> 0; None = task-specific (checked as valid).
SAMPLE_ORACLE = {
    "standin-cancer-auc-tiny": 0.5,
    "standin-insults-auc-tiny": 0.5,
    "standin-digits-colauc-tiny": 0.5,
    "standin-diabetes-pearson-tiny": math.nan,
    "standin-wine-logloss-tiny": 1.09861,
    "standin-essays-qwk-tiny": 0.0,
}
REFERENCE = {"jaccard": "lexicon-f1.0-a2-span"}


@pytest.mark.parametrize("task_id", TINY)
def test_prepare_layout_and_no_label_leak(tiny_data, task_id):
    task = prepare(task_id, tiny_data)
    pub, priv = task.public_dir, task.private_dir
    for name in ("description.md", "train.csv", "test.csv", "sample_submission.csv"):
        assert (pub / name).is_file()
    assert sorted(p.name for p in priv.iterdir()) == ["answers.csv"]
    assert not any(p.name == "answers.csv" for p in pub.rglob("*"))
    train, test = pd.read_csv(pub / "train.csv"), pd.read_csv(pub / "test.csv")
    answers, sample = pd.read_csv(task.answers_path), pd.read_csv(task.sample_submission_path)
    rows, test_share = tiny_size(task_id.removesuffix("-tiny"))
    assert len(train) + len(test) == min(rows, len(train) + len(test)) <= 1200
    assert abs(len(test) / (len(train) + len(test)) - test_share) < 0.02
    assert not set(task.target_columns) & set(test.columns)
    assert (
        sorted(answers[task.id_column])
        == sorted(test[task.id_column])
        == sorted(sample[task.id_column])
    )
    assert not set(train[task.id_column]) & set(test[task.id_column])
    assert "./input/" in task.description and "./submission.csv" in task.description
    if task.modality == "image":
        assert len(list((pub / "images").glob("*.png"))) == len(train) + len(test)


@pytest.mark.parametrize("task_id", TINY)
def test_sample_and_reference_solution_grade(tiny_data, task_id):
    task = Registry.load(data_dir=tiny_data).get(task_id)
    prepare(task_id, tiny_data)
    sample = grade_submission(task, task.sample_submission_path)
    assert sample.valid_submission, sample.error
    want = SAMPLE_ORACLE.get(task_id)
    if want is not None:
        assert math.isnan(sample.score) if math.isnan(want) else sample.score == want
    name = REFERENCE.get(task.grader, "linear-C1.0-frac1.0")
    fn = dict(solutions(task))[name]
    train, test = (
        pd.read_csv(task.public_dir / "train.csv"),
        pd.read_csv(task.public_dir / "test.csv"),
    )
    path = tiny_data / f"{task_id}-ref.csv"
    fn(train, test).to_csv(path, index=False)
    ref = grade_submission(task, path)
    assert ref.valid_submission, ref.error
    if not math.isnan(sample.score):
        better = ref.score < sample.score if task.lower_is_better else ref.score > sample.score
        assert better, (ref.score, sample.score)


def test_prepare_is_deterministic(tmp_path):
    a = prepare("standin-essays-qwk-tiny", tmp_path / "a")
    b = prepare("standin-essays-qwk-tiny", tmp_path / "b")
    for rel in ("public/train.csv", "public/test.csv", "private/answers.csv"):
        assert (a.public_dir.parent / rel).read_bytes() == (b.public_dir.parent / rel).read_bytes()


def test_a_stale_prepared_standin_is_rebuilt(tmp_path):
    """A prepared dir built from another data version (or before versions were stamped) is not
    'prepared': `prepare` rebuilds it instead of serving the old rows."""
    task = prepare("standin-materials-rmsle-tiny", tmp_path)
    assert task.is_prepared() and "data_version" in task.extra
    task.stamp_path.write_text('{"data_version": 1, "seed": 0}', encoding="utf-8")
    assert not task.is_prepared()
    task.stamp_path.unlink()
    assert not task.is_prepared()
    again = prepare("standin-materials-rmsle-tiny", tmp_path)
    assert again.is_prepared()


def test_a_task_variant_passes_its_generator_options_and_stamps_them(tmp_path):
    """A tasks dir may redefine a stand-in with `extra.generator` (the materials generator's
    wave amplitude here): the data differ from the built-in task's, the stamp records the
    options, and an option the generator does not take is a TaskError naming it."""
    import shutil

    import yaml

    from mlerl.bench import TaskError

    task_id = "standin-materials-rmsle-tiny"
    builtin = prepare(task_id, tmp_path / "builtin")

    def variant(generator, name):
        task_dir = tmp_path / name / "tasks" / task_id
        shutil.copytree(builtin.task_dir, task_dir)
        raw = yaml.safe_load((task_dir / "task.yaml").read_text(encoding="utf-8"))
        raw["extra"]["generator"] = generator
        (task_dir / "task.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
        return task_dir.parent

    tasks = variant({"wave": 0.0}, "flat")
    flat = prepare(task_id, tmp_path / "flat" / "data", tasks_dir=tasks)
    assert flat.is_prepared() and '"wave": 0.0' in flat.stamp_path.read_text()
    assert flat.answers_path.read_bytes() != builtin.answers_path.read_bytes()
    # the built-in definition sees the variant's data as stale, and the variant sees its own
    assert not Registry.load(data_dir=tmp_path / "flat" / "data").get(task_id).is_prepared()
    with pytest.raises(TaskError, match=r"bad extra\.generator"):
        prepare(task_id, tmp_path / "bad" / "data", tasks_dir=variant({"wav": 1}, "bad"))


def test_insults_irony_hashtag_inverts_its_word():
    """Data version 3: a hashtagged praise word addressed to the reader is an insult, a
    hashtagged insult is not; the word tokenizer cannot see the tag, and each insult shares its
    first three letters with a praise word (only five-character n-grams tie the tag to it)."""
    from mlerl.bench import _synthetic as syn

    assert all(
        i[:3] == p[:3] and i[3] != p[3] for i, p in zip(syn.INSULTS, syn.PRAISE, strict=True)
    )
    frame = syn.insults(3000, 0)
    text = frame["Comment"].str.strip('"')
    you = text.str.contains(r"\b(?:you|ur)\b") & ~text.str.contains(r"\b(?:not|never|hardly)\b")
    for words, want in ((syn.PRAISE, 1), (syn.INSULTS, 0)):
        tagged = text.str.contains("|".join(f"#{w}\\b" for w in words))
        share = frame.loc[you & tagged, "Insult"].mean()
        assert abs(share - want) < 0.1, (words, share)
    assert 0.25 < text.str.contains("#").mean() < 0.45
