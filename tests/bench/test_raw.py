"""Real-task preparers on synthetic raw Kaggle files of the right shape."""

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import train_test_split

from mlerl.bench import TaskError, grade_submission, prepare
from mlerl.bench._raw import PREPARERS

N = 60
rng = np.random.default_rng(0)
# plant's AUC needs both classes in every column of the 6 test rows: alternate the labels over
# the rows that MLE-bench's split (test_size=0.1, random_state=0) sends to the test set.
_, _TEST_ROWS = train_test_split(np.arange(N), test_size=0.1, random_state=0)
PLANT_LABELS = np.zeros((N, 4), dtype=int)
PLANT_LABELS[_TEST_ROWS, np.arange(len(_TEST_ROWS)) % 4] = 1
PLANT_LABELS[_TEST_ROWS[4:], 0] = 0
PLANT_LABELS[_TEST_ROWS[4:], 1:] = 1 - PLANT_LABELS[_TEST_ROWS[:2], 1:]


def _raw_files(task_id: str, raw):
    """Write minimal raw files with Kaggle's column names for ``task_id``."""
    ids = [f"x{i:04d}" for i in range(N)]
    binary = np.resize([0, 1], N)
    frames = {
        "learning-agency-lab-automated-essay-scoring-2": {
            "train.csv": pd.DataFrame(
                {"essay_id": ids, "full_text": "text", "score": np.resize([1, 2, 3, 4, 5, 6], N)}
            )
        },
        "tweet-sentiment-extraction": {
            "train.csv": pd.DataFrame(
                {
                    "textID": ids,
                    "text": "so happy today",
                    "selected_text": "happy",
                    "sentiment": "positive",
                }
            )
        },
        "tabular-playground-series-may-2022": {
            "train.csv": pd.DataFrame(
                {"id": range(N), "f_00": rng.normal(size=N), "f_27": "ABCD", "target": binary}
            )
        },
        "tabular-playground-series-dec-2021": {
            "train.csv": pd.DataFrame(
                {
                    "Id": range(N),
                    "Elevation": rng.normal(size=N),
                    "Cover_Type": np.resize([1, 2, 3], N),
                }
            )
        },
        "us-patent-phrase-to-phrase-matching": {
            "train.csv": pd.DataFrame(
                {
                    "id": ids,
                    "anchor": "a",
                    "target": "b",
                    "context": "A01",
                    "score": np.resize([0, 0.25, 0.5, 1.0], N),
                }
            )
        },
        "plant-pathology-2020-fgvc7": {
            "train.csv": pd.DataFrame(
                {
                    "image_id": [f"Train_{i}" for i in range(N)],
                    **{
                        c: PLANT_LABELS[:, j]
                        for j, c in enumerate(["healthy", "multiple_diseases", "rust", "scab"])
                    },
                }
            )
        },
        "leaf-classification": {
            "train.csv": pd.DataFrame(
                {
                    "id": range(1, N + 1),
                    "species": np.resize(["Acer", "Quercus", "Salix"], N),
                    "margin1": rng.random(N),
                }
            )
        },
        "nomad2018-predict-transparent-conductors": {
            "train.csv": pd.DataFrame(
                {
                    "id": range(1, N + 1),
                    "spacegroup": 12,
                    "formation_energy_ev_natom": rng.random(N),
                    "bandgap_energy_ev": 1 + rng.random(N),
                }
            )
        },
        "spooky-author-identification": {
            "train.csv": pd.DataFrame(
                {"id": ids, "text": "it was dark", "author": np.resize(["EAP", "HPL", "MWS"], N)}
            )
        },
        "lmsys-chatbot-arena": {
            "train.csv": pd.DataFrame(
                {
                    "id": range(N),
                    "model_a": "m1",
                    "model_b": "m2",
                    "prompt": "p",
                    "response_a": "r",
                    "response_b": "s",
                    **{
                        c: (np.arange(N) % 3 == j).astype(int)
                        for j, c in enumerate(["winner_model_a", "winner_model_b", "winner_tie"])
                    },
                }
            )
        },
        "detecting-insults-in-social-commentary": {
            "train.csv": pd.DataFrame(
                {"Insult": binary, "Date": "20120618", "Comment": [f'"c{i}"' for i in range(N)]}
            ),
            "test_with_solutions.csv": pd.DataFrame(
                {
                    "Insult": binary[:20],
                    "Date": "20120619",
                    "Comment": [f'"t{i}"' for i in range(20)],
                    "Usage": "PrivateTest",
                }
            ),
        },
        "random-acts-of-pizza": {
            "train.json": pd.DataFrame(
                {
                    "request_id": [f"t3_{i}" for i in range(N)],
                    "request_text": "pizza please",
                    "giver_username_if_known": "N/A",
                    "requester_received_pizza": binary.astype(bool),
                }
            ),
            "test.json": pd.DataFrame(
                {
                    "request_id": [f"t3_z{i}" for i in range(20)],
                    "request_text": "pizza",
                    "giver_username_if_known": "N/A",
                }
            ),
        },
    }[task_id]
    raw.mkdir()
    for name, frame in frames.items():
        if name.endswith(".json"):
            frame.to_json(raw / name, orient="records")
        else:
            frame.to_csv(raw / name, index=False)
    if task_id == "plant-pathology-2020-fgvc7":
        (raw / "images").mkdir()
        (raw / "images" / "Train_0.jpg").write_bytes(b"jpg")


@pytest.mark.parametrize("task_id", sorted(PREPARERS))
def test_raw_preparer_writes_gradable_split(tmp_path, task_id):
    _raw_files(task_id, tmp_path / "raw")
    task = prepare(task_id, tmp_path / "data", raw_dir=tmp_path / "raw")
    answers = pd.read_csv(task.answers_path)
    files = task.files
    assert (task.public_dir / "description.md").is_file()
    assert not (task.public_dir / files["answers"]).exists() or files["answers"] == files["test"]
    test_name = files["test"]
    test = (
        pd.read_json(task.public_dir / test_name)
        if test_name.endswith(".json")
        else pd.read_csv(task.public_dir / test_name)
    )
    assert not set(task.target_columns) & set(test.columns)
    expected = {
        "detecting-insults-in-social-commentary": 20,
        "random-acts-of-pizza": 15,
        "tabular-playground-series-may-2022": 30,
    }.get(task_id, 6)  # 0.1 * 60 = 6
    assert len(test) == len(answers) == expected
    if task_id == "random-acts-of-pizza":
        assert "giver_username_if_known" not in test.columns  # the label leak is dropped
    sample = grade_submission(task, task.sample_submission_path)
    assert sample.submission_exists
    if task_id != "tweet-sentiment-extraction":  # empty sample spans are valid there too
        assert sample.valid_submission, sample.error


def test_real_task_needs_raw_dir(tmp_path):
    with pytest.raises(TaskError, match="--raw"):
        prepare("leaf-classification", tmp_path)
    with pytest.raises(TaskError, match="missing"):
        (tmp_path / "empty").mkdir()
        prepare("leaf-classification", tmp_path, raw_dir=tmp_path / "empty")
