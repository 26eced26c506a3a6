"""benchmarks/tools/mutation.py's bookkeeping (the mutation run itself is a script, not CI): how
cosmic-ray's records become killed / survived / equivalent counts and the survivor list, and
that every module it names exists with its test files."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODULE = "pkg/_fake.py"


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "mutation", REPO / "benchmarks" / "tools" / "mutation.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _record(outcome, operator="core/NumberReplacer", before="x = 1", after="x = 2", line=7):
    diff = (
        f"--- mutation diff ---\n--- a{MODULE}\n+++ b{MODULE}\n@@ -{line - 1},3 +{line - 1},3 @@\n"
        f" def f():\n-{before}\n+{after}\n     return x\n"
    )
    result = None if outcome is None else {"test_outcome": outcome, "diff": diff}
    return {
        "work_item": {"mutations": [{"operator_name": operator, "start_pos": [line, 4]}]},
        "result": result,
    }


def test_counts_survivors_and_equivalents_from_records():
    m = _script()
    equivalent = {
        m.mutation_key(MODULE, "core/NumberReplacer", "    y = 0", "    y = 1"): "y unused"
    }
    records = [
        _record("killed"),
        _record("KILLED"),
        _record("incompetent"),
        _record(None),
        _record("survived", before="    y = 0", after="    y = 1", line=9),
        _record(
            "survived",
            before="    z = a < b",
            after="    z = a <= b",
            line=12,
            operator="core/ReplaceComparisonOperator_Lt_LtE",
        ),
        _record(
            "survived",
            before="def g(a: int | None) -> int:",
            after="def g(a: int % None) -> int:",
            line=3,
        ),
    ]
    counts, survivors, equivalents = m.summarize(MODULE, records, equivalent)
    assert counts == {
        "killed": 2,
        "survived": 1,
        "equivalent": 2,
        "incompetent": 1,
        "not_run": 1,
        "score": round(2 / 3, 4),
        "complete": False,
    }
    assert survivors == [
        {
            "module": MODULE,
            "line": 12,
            "operator": "core/ReplaceComparisonOperator_Lt_LtE",
            "mutation": "z = a < b  ->  z = a <= b",
        }
    ]
    assert [(e["line"], e["reason"]) for e in equivalents] == [
        (9, "y unused"),
        (3, "operator inside a postponed annotation (never evaluated)"),
    ]


def test_a_bitwise_or_outside_an_annotation_is_not_equivalent():
    m = _script()
    assert m.rule_equivalent("mask = a | b", "mask = a % b") is None
    assert m.rule_equivalent("x: int | None = None", "x: int // None = None") is not None


def test_parse_diff_reads_the_line_and_both_texts():
    m = _script()
    diff = _record("survived", before="    return a + b", after="    return a - b", line=20)[
        "result"
    ]["diff"]
    assert m.parse_diff(diff) == (20, "    return a + b", "    return a - b")


def test_merge_replaces_one_module_and_keeps_the_others():
    m = _script()
    old = {
        "modules": {"a.py": {"killed": 1}, "b.py": {"killed": 2}},
        "survivors": [{"module": "a.py", "line": 1}, {"module": "b.py", "line": 2}],
        "equivalent": [{"module": "a.py", "line": 3, "reason": "r"}],
    }
    new = m.merge(old, "a.py", {"killed": 5}, [{"module": "a.py", "line": 9}], [])
    assert new["modules"] == {"a.py": {"killed": 5}, "b.py": {"killed": 2}}
    assert new["survivors"] == [{"module": "b.py", "line": 2}, {"module": "a.py", "line": 9}]
    assert new["equivalent"] == []


def test_every_module_and_test_file_exists():
    m = _script()
    for module, tests in m.MODULES.items():
        assert (REPO / module).is_file(), module
        assert tests and all((REPO / t).is_file() for t in tests), tests
    for module, *_ in m.EQUIVALENT:
        assert module in m.MODULES
    # the modules that decide what is learned and what is safe: losses, advantages, duration weights, reward, the graders' metrics,
    # the learner's door, the sandbox's mounts, checkpoint verification
    assert {Path(module).stem for module in m.MODULES} == {
        "_losses",
        "_advantages",
        "_duration_weights",
        "_reward",
        "_metrics",
        "_validate",
        "_bwrap",
        "_checkpoint",
    }


def test_forget_survivors_marks_them_not_run(tmp_path):
    import sqlite3

    m = _script()
    db = tmp_path / "s.sqlite"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE work_results (job_id TEXT, test_outcome TEXT)")
        c.executemany(
            "INSERT INTO work_results VALUES (?, ?)",
            [("a", "KILLED"), ("b", "SURVIVED"), ("c", "SURVIVED")],
        )
    assert m.forget_survivors(db) == 2
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT job_id FROM work_results").fetchall() == [("a",)]


def test_the_annotation_rule_finds_the_mutated_one_of_several():
    m = _script()
    before = "def f(a: int | None) -> str | None:"
    assert m.rule_equivalent(before, "def f(a: int | None) -> str >> None:") is not None
    assert m.rule_equivalent(before, "def f(a: int - None) -> str | None:") is not None
    assert m.rule_equivalent(before, "def f(a: int | None) -> str | 1:") is None


def test_project_modules_are_dropped_by_each_mutants_run_and_third_party_ones_kept():
    m = _script()
    assert m.is_project_module("mlerl.learner._duration_weights", None)
    assert m.is_project_module("tests.learner.test_duration_weights", None)
    assert m.is_project_module("conftest", str(REPO / "tests" / "conftest.py"))
    assert m.is_project_module("whatever", str(REPO / "benchmarks" / "tools" / "mutation.py"))
    import pytest as third_party

    assert not m.is_project_module("pytest", third_party.__file__)
    assert not m.is_project_module("sys", None)


def test_fastest_tests_run_first():
    m = _script()

    class Item:
        def __init__(self, nodeid):
            self.nodeid = nodeid

    items = [Item("slow"), Item("unknown"), Item("fast")]
    m._Order({"slow": 11.0, "fast": 0.01}).pytest_collection_modifyitems(items)
    assert [i.nodeid for i in items] == ["unknown", "fast", "slow"]


def test_a_session_of_another_version_of_the_module_is_not_current(tmp_path, monkeypatch):
    m = _script()
    monkeypatch.setattr(m, "ROOT", tmp_path)
    (tmp_path / "mod.py").write_text("x = 1\n")
    session = tmp_path / "mod.sqlite"
    session.with_suffix(".sha256").write_text(m.source_hash("mod.py"))
    assert m.session_is_current("mod.py", session, tmp_path / "mod.toml")
    (tmp_path / "mod.py").write_text("x = 2\n")
    assert not m.session_is_current("mod.py", session, tmp_path / "mod.toml")


def test_parse_diff_of_a_removed_decorator_names_the_decorator():
    m = _script()
    diff = (
        "--- mutation diff ---\n--- a/m.py\n+++ b/m.py\n@@ -90,9 +90,6 @@\n     return out\n-\n-\n"
        "-@torch.no_grad()\n def whiten(a):\n"
    )
    assert m.parse_diff(diff)[1:] == ("@torch.no_grad()", "")


def test_a_whole_line_can_be_marked_equivalent():
    m = _script()
    equivalent = {m.mutation_key(MODULE, "*", "    dead = a + b", "*"): "dead is never read"}
    records = [
        _record("survived", before="    dead = a + b", after="    dead = a - b", line=4),
        _record(
            "survived",
            before="    dead = a + b",
            after="    dead = a * b",
            line=4,
            operator="core/ReplaceBinaryOperator_Add_Mul",
        ),
        _record("survived", before="    live = a + b", after="    live = a - b", line=5),
    ]
    counts, survivors, equivalents = m.summarize(MODULE, records, equivalent)
    assert (counts["equivalent"], counts["survived"]) == (2, 1)
    assert [e["reason"] for e in equivalents] == ["dead is never read"] * 2
    assert survivors[0]["mutation"] == "live = a + b  ->  live = a - b"


def test_any_union_in_an_annotation_is_equivalent_but_not_one_in_a_default():
    m = _script()
    before = "def read(path: str | Path, flags=A | B) -> dict[str, Any]:"
    assert m.rule_equivalent(before, before.replace("str | Path", "str // Path")) is not None
    assert m.rule_equivalent(before, before.replace("A | B", "A // B")) is None
    assert m.rule_equivalent("    root: str | Path = x", "    root: str ^ Path = x") is not None
    assert m.rule_equivalent("    root: int = a | b", "    root: int = a ^ b") is None
    assert m.rule_equivalent("mask = a | b", "mask = a ^ b") is None
