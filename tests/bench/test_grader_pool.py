"""The warm grading pool: same reports as in-process grading, warm reuse, recovery from a hung,
crashed or memory-starved child, thread safety, and no child outliving the pool or its parent."""

import json
import os
import select
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pytest

from mlerl.bench import GraderPool, grade_submission

TASK = "us-patent-phrase-to-phrase-matching"
IDS = [f"p{i}" for i in range(10)]


@pytest.fixture
def task(grading):
    grading.answers(TASK, pd.DataFrame({"id": IDS, "score": np.linspace(0, 1, 10)}))
    return grading.registry.get(TASK)


def _submission(tmp_path, name, power=2.0):
    path = tmp_path / f"{name}.csv"
    pd.DataFrame({"id": IDS, "score": np.linspace(0, 1, 10) ** power}).to_csv(path, index=False)
    return path


def _fields(report):
    return {
        **{k: v for k, v in report.to_dict().items() if k != "created_at"},
        "error": report.error,
    }


def _assert_same_as_in_process(report, task, path):
    assert _fields(report) == _fields(grade_submission(task, path))


def _alive(pid):
    """Running (a zombie nobody reaped yet counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def _wait_gone(pids, within_s):
    deadline = time.monotonic() + within_s
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


def test_valid_and_invalid_match_in_process_and_the_child_stays_warm(task, tmp_path):
    good = _submission(tmp_path, "good")
    bad = tmp_path / "bad.csv"
    bad.write_text("id,wrong\np0,1\n", encoding="utf-8")
    with GraderPool(size=2) as pool:
        first = pool.grade(task, good)
        (pid,) = pool.pids
        invalid = pool.grade(task, bad)
        again = pool.grade(task, good)
        assert pool.pids == [pid]  # sequential calls reuse the one warm child
    assert first.valid_submission and first.score is not None
    _assert_same_as_in_process(first, task, good)
    _assert_same_as_in_process(again, task, good)
    assert (
        invalid.valid_submission is False
        and invalid.score is None
        and "missing column" in invalid.error
    )
    _assert_same_as_in_process(invalid, task, bad)


def test_a_hung_child_times_out_and_is_replaced(task, tmp_path):
    good = _submission(tmp_path, "good")
    with GraderPool(size=1, timeout_s=2.0) as pool:
        assert pool.grade(task, good).valid_submission
        (pid,) = pool.pids
        os.kill(pid, signal.SIGSTOP)  # a grader stuck on a file: it never answers
        t0 = time.monotonic()
        late = pool.grade(task, good)
        assert time.monotonic() - t0 >= 2.0
        assert late.valid_submission is False and late.score is None
        assert late.error == "grading timed out after 2.0 s"
        assert not _alive(pid)
        after = pool.grade(task, good)
        assert pool.pids and pid not in pool.pids
    _assert_same_as_in_process(after, task, good)


def test_a_submission_over_the_memory_cap_is_invalid_and_the_pool_recovers(
    task, tmp_path, monkeypatch
):
    monkeypatch.setenv(
        "OPENBLAS_NUM_THREADS", "1"
    )  # keep the child's baseline small on many-core hosts
    # 30,000 answers, so that the bomb below is within the pre-parse shape limits (at most
    # 2 * 30,000 + 1024 lines and 1024 columns) and reaches pandas
    ids = [f"p{i}" for i in range(30_000)]
    pd.DataFrame({"id": ids, "score": np.linspace(0, 1, len(ids))}).to_csv(
        task.answers_path, index=False
    )
    good = tmp_path / "good.csv"
    pd.DataFrame({"id": ids, "score": np.linspace(0, 1, len(ids)) ** 2}).to_csv(good, index=False)
    # 60 MB of empty cells: 60 million floats plus the tokenizer's buffers, > 1.5 GB to parse
    hostile = tmp_path / "hostile.csv"
    with hostile.open("w", encoding="utf-8") as f:
        f.write("id,score," + ",".join(f"c{i}" for i in range(998)) + "\n")
        block = ("," * 999 + "\n") * 1000
        for _ in range(60):
            f.write(block)
    with GraderPool(size=1, memory_bytes=768 * 1024**2) as pool:
        assert pool.grade(task, good).valid_submission  # the cap leaves room for normal grading
        bomb = pool.grade(task, hostile)
        assert bomb.valid_submission is False and bomb.score is None
        assert "not a readable CSV" in bomb.error or "grading process failed" in bomb.error
        after = pool.grade(task, good)
    _assert_same_as_in_process(after, task, good)


def test_a_child_that_cannot_start_reports_its_last_stderr_line(task, tmp_path):
    good = _submission(tmp_path, "good")
    with GraderPool(size=1, memory_bytes=64 * 1024**2) as pool:  # too small to import pandas
        report = pool.grade(task, good)
        assert pool.pids == []
    assert report.valid_submission is False and report.score is None
    assert report.error.startswith("grading process failed (exit ")
    # the child's last stderr line: Python's MemoryError, or OpenBLAS's own "error" when its
    # thread buffers fail first (which one depends on the host's OpenBLAS build and load)
    assert "error" in report.error.split("): ", 1)[1].lower()


@pytest.mark.parametrize("noticed", ["before asking", "when asked"])
def test_a_child_killed_while_idle_is_replaced_and_costs_no_grade(
    task, tmp_path, monkeypatch, noticed
):
    from mlerl.bench._grader_worker import _Worker

    good = _submission(tmp_path, "good")
    with GraderPool(size=1) as pool:
        pool.grade(task, good)
        (pid,) = pool.pids
        os.kill(pid, signal.SIGKILL)
        assert _wait_gone([pid], 10) == []
        if noticed == "when asked":  # the death shows only when the request is sent (a CI race)
            monkeypatch.setattr(_Worker, "alive", lambda self: True)
        after = pool.grade(task, good)
        assert pool.pids and pid not in pool.pids
    _assert_same_as_in_process(after, task, good)


def test_a_child_is_recycled_after_max_requests(task, tmp_path):
    good = _submission(tmp_path, "good")
    with GraderPool(size=1, max_requests=2) as pool:
        pool.grade(task, good)
        (pid,) = pool.pids
        pool.grade(task, good)
        assert pool.pids == []  # retired after its second grade
        third = pool.grade(task, good)
        assert pool.pids and pid not in pool.pids
    assert not _alive(pid)
    _assert_same_as_in_process(third, task, good)


def test_concurrent_grades_from_threads(task, tmp_path):
    paths = [_submission(tmp_path, f"s{i}", power=1.0 + i / 4) for i in range(10)]
    broken = tmp_path / "broken.csv"
    broken.write_text("id,score\np0,0.5\n", encoding="utf-8")
    paths.append(broken)
    with GraderPool(size=2) as pool, ThreadPoolExecutor(max_workers=6) as threads:
        reports = list(threads.map(lambda p: pool.grade(task, p), paths))
        assert 1 <= len(pool.pids) <= 2
    for path, report in zip(paths, reports, strict=True):
        _assert_same_as_in_process(report, task, path)
    assert len({r.score for r in reports[:-1]}) > 1 and reports[-1].valid_submission is False


def test_close_ends_every_child(task, tmp_path):
    good = _submission(tmp_path, "good")
    pool = GraderPool(size=2)
    with ThreadPoolExecutor(max_workers=2) as threads:
        list(threads.map(lambda _: pool.grade(task, good), range(4)))
    pids = pool.pids
    assert pids
    pool.close()
    assert pool.pids == [] and _wait_gone(pids, 5) == []
    with pytest.raises(RuntimeError, match="closed"):
        pool.grade(task, good)
    pool.close()  # idempotent


PARENT = """
import json, sys, time
from pathlib import Path
from mlerl.bench import GraderPool
from mlerl.bench._task import load_task
task_dir, data_dir, submission = sys.argv[1:4]
pool = GraderPool(size=2)
report = pool.grade(load_task(Path(task_dir), Path(data_dir)), submission)
print(json.dumps({"pids": pool.pids, "valid": report.valid_submission}), flush=True)
time.sleep(600)
"""


def test_children_exit_when_the_parent_is_killed(task, tmp_path):
    good = _submission(tmp_path, "good")
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(task.task_dir), str(task.data_dir), str(good)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        ready, _, _ = select.select([parent.stdout], [], [], 120)
        assert ready, "the parent did not grade within 120 s"
        line = json.loads(parent.stdout.readline())
    finally:
        parent.kill()  # SIGKILL: no finalizer, no close()
        parent.wait()
    assert line["valid"] and line["pids"]
    assert _wait_gone(line["pids"], 5) == []


def test_warm_starts_the_children_up_front_and_replaces_a_retired_one(task, tmp_path):
    good = _submission(tmp_path, "good")
    with GraderPool(size=2, max_requests=1) as pool:
        assert pool.warm() == 2 and len(pool.pids) == 2
        assert pool.warm() == 0  # already full
        first = set(pool.pids)
        t0 = time.monotonic()
        report = pool.grade(task, good)
        assert time.monotonic() - t0 < 30
        _assert_same_as_in_process(report, task, good)
        # the child retired after max_requests=1 and a fresh one took its place right away
        assert len(pool.pids) == 2 and len(first & set(pool.pids)) == 1
        pids = pool.pids
    assert _wait_gone(pids, 5) == []
