"""Several processes preparing one task at once (parallel sweep jobs): one builds, the others
wait and use its result; none fails or removes the task from under another."""

import threading
import time

from mlerl.bench import _prepare, prepare

TASK = "standin-cancer-auc-tiny"


def test_concurrent_prepares_of_one_task_build_it_once_and_all_succeed(tmp_path, monkeypatch):
    builds: list[str] = []
    real = _prepare._build

    def slow_build(task, tmp, raw_dir):
        builds.append(task.id)
        time.sleep(0.5)  # every caller has checked is_prepared() by now
        real(task, tmp, raw_dir)

    monkeypatch.setattr(_prepare, "_build", slow_build)
    results, errors = [], []

    def call():
        try:
            results.append(prepare(TASK, tmp_path))
        except Exception as exc:  # any failure of a caller is reported below
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == [] and len(results) == 3
    assert builds == [TASK]
    assert all(task.is_prepared() for task in results)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".{TASK}.lock", TASK]  # no temp dir left


def test_force_rebuilds_under_the_lock(tmp_path):
    first = prepare(TASK, tmp_path)
    answers = first.answers_path.read_bytes()
    again = prepare(TASK, tmp_path, force=True)
    assert again.is_prepared() and again.answers_path.read_bytes() == answers
