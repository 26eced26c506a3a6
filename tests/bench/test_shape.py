"""Submissions of absurd shape are invalid in bounded time, before pandas parses them.

pandas needs minutes on a 400,000-column header (measured: still parsing after 10 minutes on
the dev machine), so each hostile file here must be refused within BOUND_S (generous, so a
loaded CI machine does not flake; the real times are a few to a few tens of milliseconds).
"""

import time

import numpy as np
import pandas as pd
import pytest

from mlerl.bench import grade_submission, validate_submission
from mlerl.bench._shape import MAX_LINE_BYTES, max_columns, max_lines

TASK = "tabular-playground-series-may-2022"
ROWS = 1000
BOUND_S = 10.0
SECRET_IDS = np.arange(7_340_000, 7_340_000 + ROWS)  # distinctive answer values to look for


@pytest.fixture
def may(grading):
    grading.answers(TASK, pd.DataFrame({"id": SECRET_IDS, "target": [0, 1] * (ROWS // 2)}))
    return grading


def _rows(n: int = ROWS) -> str:
    return "".join(f"{i},0.5\n" for i in SECRET_IDS[:n])


def _multiline_header(segments: int) -> str:
    # '"q<LF>"' is one quoted field holding a line break; 500 short fields follow on the
    # same line: a header RECORD of segments * 501 columns spread over short lines
    return "".join('"q\n",' + "c," * 500 for _ in range(segments)) + "x\n"


HOSTILE = {
    # name: (builder of the file text, words the reason must contain); built lazily (~50 MB each)
    "million_column_header": (
        lambda: "id,target," + ",".join(f"c{i}" for i in range(1_000_000)) + "\n" + _rows(),
        "line longer",
    ),
    "400k_short_columns_under_line_cap": (
        lambda: "id,target" + ",a" * 400_000 + "\n" + _rows(),
        "columns",
    ),
    "single_50MB_line": (lambda: "id,target\n" + "0," * 25_000_000, "line longer"),
    "50MB_without_line_breaks": (lambda: "x" * 50_000_000, "line longer"),
    "five_million_rows": (lambda: "id,target\n" + "1,0.5\n" * 5_000_000, "non-empty lines"),
    "header_record_over_quoted_line_breaks": (lambda: _multiline_header(400) + _rows(), "columns"),
    "header_record_longer_than_cap": (
        lambda: _multiline_header(1200) + _rows(),
        "header is longer",
    ),
    "rows_far_beyond_answers": (lambda: "id,target\n" + _rows() * 4, "non-empty lines"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_shape_is_invalid_quickly_and_leaks_nothing(may, tmp_path, name):
    build, why = HOSTILE[name]
    path = tmp_path / f"{name}.csv"
    path.write_text(build(), encoding="utf-8")
    task = may.registry.get(TASK)
    start = time.perf_counter()
    report = grade_submission(task, path)
    elapsed = time.perf_counter() - start
    assert report.valid_submission is False and report.score is None
    assert report.submission_exists is True and report.any_medal is False
    assert why in report.error, report.error
    assert elapsed < BOUND_S, f"{name}: {elapsed:.2f} s"
    start = time.perf_counter()
    ok, reason = validate_submission(task, path)
    assert not ok and reason == report.error and time.perf_counter() - start < BOUND_S
    # counts and limits only: no answer id appears in the reason
    assert not any(str(v) in reason for v in SECRET_IDS[:50]), reason


def test_limits_follow_the_answers_shape():
    assert max_lines(1000) == 2 * 1000 + 1024
    assert max_columns(2) == 1024 and max_columns(100) == 1024 and max_columns(500) == 5000
    assert MAX_LINE_BYTES == 1 << 20


def test_boundaries_are_inclusive(may, tmp_path):
    task = may.registry.get(TASK)
    path = tmp_path / "edge.csv"
    # exactly max_lines(ROWS) non-empty lines (header + 3023 rows): passes the shape check and
    # fails later on the row count, as MLE-bench would
    body = "id,target\n" + "".join(f"{i},0.5\n" for i in range(max_lines(ROWS) - 1))
    path.write_text(body)
    report = grade_submission(task, path)
    assert report.valid_submission is False and "rows, expected" in report.error
    path.write_text(body + "1,0.5\n")  # one more
    assert "non-empty lines" in grade_submission(task, path).error
    # exactly max_columns columns is accepted (extra columns are fine for this task)
    extra = [f"x{j}" for j in range(max_columns(2) - 2)]
    frame = pd.DataFrame({"id": SECRET_IDS, "target": 0.5})
    frame = pd.concat([frame, pd.DataFrame(0, index=frame.index, columns=extra)], axis=1)
    frame.to_csv(path, index=False)
    assert grade_submission(task, path).score == 0.5
    frame.assign(one_more=0).to_csv(path, index=False)
    assert "columns" in grade_submission(task, path).error
    # a line of exactly MAX_LINE_BYTES bytes (before its line break) is accepted by the scan
    path.write_text(
        "id,target,note\n"
        + "".join(f"{i},0.5,\n" for i in SECRET_IDS[:-1])
        + f"{SECRET_IDS[-1]},0.5,"
        + "y" * (MAX_LINE_BYTES - len(f"{SECRET_IDS[-1]},0.5,"))
        + "\n"
    )
    assert grade_submission(task, path).score == 0.5


def test_ordinary_files_still_read_like_pandas(may, tmp_path):
    task = may.registry.get(TASK)
    path = tmp_path / "ok.csv"
    rows = [
        f"{i},{0.9 if k % 2 else 0.1}" for k, i in enumerate(SECRET_IDS)
    ]  # odd rows are positives
    for newline in ("\n", "\r\n", "\r"):  # pandas' C parser accepts all three line endings
        path.write_bytes(("id,target" + newline + newline.join(rows) + newline).encode())
        assert grade_submission(task, path).score == 1.0, repr(newline)
    # blank lines are skipped by pandas and not counted; a quoted field may span lines
    path.write_text("\n\nid,target,note\n" + "\n".join(f'{r},"two\nlines"' for r in rows) + "\n\n")
    assert grade_submission(task, path).score == 1.0
