"""benchmarks/experiments/edit_applier.py: which programs become parents, and what counts as
a revision beating its parent."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "experiments"))
edit_applier = importlib.import_module("edit_applier")


def test_parents_are_the_first_distinct_programs_that_ran_to_the_end():
    rows = [
        {"status": "program_error", "code": "a"},
        {"status": "ok", "code": "b"},
        {"status": "ok", "code": "b"},  # the same program again
        {"status": "ok", "code": ""},  # nothing ran
        {"status": "timeout", "code": "c"},
        {"status": "ok", "code": "d"},
        {"status": "ok", "code": "e"},
    ]
    assert [r["code"] for r in edit_applier.parents_of(rows, 2)] == ["b", "d"]
    assert [r["code"] for r in edit_applier.parents_of(rows, 10)] == ["b", "d", "e"]
    # the latest: the last distinct ones, in the order they finished
    assert [r["code"] for r in edit_applier.parents_of(rows, 2, latest=True)] == ["d", "e"]
    assert [r["code"] for r in edit_applier.parents_of(rows + rows[1:2], 2, latest=True)] == [
        "e",
        "b",
    ]


def test_a_revision_beats_its_parent_in_the_task_direction_and_never_a_missing_one():
    assert edit_applier.beats(0.05, 0.06, lower=True)
    assert not edit_applier.beats(0.06, 0.06, lower=True)  # a tie is not a win
    assert edit_applier.beats(0.91, 0.90, lower=False)
    assert not edit_applier.beats(0.89, 0.90, lower=False)
    assert not edit_applier.beats(0.01, None, lower=True)
