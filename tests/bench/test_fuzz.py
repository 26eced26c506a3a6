"""Adversarial submissions end invalid (or validly scored) quickly, without raising."""

import os

import numpy as np
import pandas as pd
import pytest

from mlerl.bench import grade_submission, validate_submission

TASK = "tabular-playground-series-may-2022"
IDS = np.arange(10)


@pytest.fixture
def may(grading):
    grading.answers(TASK, pd.DataFrame({"id": IDS, "target": [0, 1] * 5}))
    return grading


HOSTILE = {
    "nan": "id,target\n" + "".join(f"{i},{'nan' if i == 3 else 0.5}\n" for i in IDS),
    "inf": "id,target\n" + "".join(f"{i},{'inf' if i == 3 else 0.5}\n" for i in IDS),
    "duplicate_ids": "id,target\n" + "".join(f"{min(i, 8)},0.5\n" for i in IDS),
    "strings": "id,target\n" + "".join(f"{i},high\n" for i in IDS),
    "empty": "",
    "header_only": "id,target\n",
    "ragged": "id,target\n1,0.5,7,8\n2\n",
    "binary": "\x00\x01\x02\xff\xfe",
    "huge_number": "id,target\n" + "".join(f"{i},1e400\n" for i in IDS),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_contents_are_invalid(may, name):
    report = may.grade(TASK, HOSTILE[name])
    assert report.valid_submission is False and report.score is None
    assert report.any_medal is False


def test_bom_and_crlf_are_read_like_pandas(may, tmp_path):
    text = "id,target\r\n" + "".join(f"{i},{i / 10}\r\n" for i in IDS)
    path = tmp_path / "crlf.csv"
    path.write_bytes(text.encode("utf-8-sig"))  # BOM + CRLF
    report = grade_submission(may.registry.get(TASK), path)
    # pandas strips the BOM, so "id" is found; scores 0.0..0.9 rank positives (odd ids) higher
    # in every pair except (i, j) with odd i < even j: pairs where the positive is smaller.
    # positives 1,3,5,7,9 vs negatives 0,2,4,6,8: correct pairs = 5+4+3+2+1 = 15 of 25 -> 0.6
    assert report.valid_submission and report.score == 0.6


def test_missing_file_directory_and_wrong_suffix(may, tmp_path):
    task = may.registry.get(TASK)
    for path in (tmp_path / "absent.csv", tmp_path):
        report = grade_submission(task, path)
        assert report.submission_exists is False and report.valid_submission is False
    txt = tmp_path / "sub.txt"
    txt.write_text("id,target\n")
    assert grade_submission(task, txt).submission_exists is False


def test_one_gigabyte_file_is_rejected_before_reading(may, tmp_path):
    big = tmp_path / "big.csv"
    with open(big, "wb") as fh:  # sparse file: 1 GiB apparent size, no disk blocks
        fh.write(b"id,target\n")
        fh.truncate(1024**3)
    assert os.path.getsize(big) == 1024**3
    report = grade_submission(may.registry.get(TASK), big)
    assert report.submission_exists is True and report.valid_submission is False
    assert "cap" in report.error
    ok, reason = validate_submission(may.registry.get(TASK), big)
    assert not ok and "cap" in reason


def test_validation_reveals_no_answers_or_score(may, tmp_path):
    task = may.registry.get(TASK)
    path = tmp_path / "v.csv"
    pd.DataFrame({"id": IDS, "target": 0.5}).to_csv(path, index=False)
    assert validate_submission(task, path) == (True, "submission is valid")
    pd.DataFrame({"id": IDS + 100, "target": 0.5}).to_csv(path, index=False)
    ok, reason = validate_submission(task, path)
    assert not ok and "ids" in reason and "0.5" not in reason


def test_symlink_to_answers_is_refused(may, tmp_path):
    task = may.registry.get(TASK)
    link = tmp_path / "link.csv"
    link.symlink_to(task.answers_path)
    report = grade_submission(task, link)
    assert report.valid_submission is False and "symbolic link" in report.error
