"""Grading in a separate process: same report as in-process, a timeout ends invalid."""

import numpy as np
import pandas as pd

from mlerl.bench import grade_in_subprocess, grade_submission

TASK = "us-patent-phrase-to-phrase-matching"


def test_subprocess_matches_in_process_and_times_out(grading, tmp_path):
    ids = [f"p{i}" for i in range(10)]
    grading.answers(TASK, pd.DataFrame({"id": ids, "score": np.linspace(0, 1, 10)}))
    path = tmp_path / "s.csv"
    pd.DataFrame({"id": ids, "score": np.linspace(0, 1, 10) ** 2}).to_csv(path, index=False)
    task = grading.registry.get(TASK)
    here = grade_submission(task, path)
    there = grade_in_subprocess(task, path, timeout_s=120)
    assert there.valid_submission and there.score == here.score
    assert {k: v for k, v in there.to_dict().items() if k != "created_at"} == {
        k: v for k, v in here.to_dict().items() if k != "created_at"
    }
    # a fresh interpreter importing pandas cannot finish in 10 ms
    late = grade_in_subprocess(task, path, timeout_s=0.01)
    assert late.valid_submission is False and late.score is None and "timed out" in late.error
