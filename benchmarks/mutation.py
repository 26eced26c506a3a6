"""Mutation testing of the modules that decide what is learned and what is safe (issue #26).

Runs cosmic-ray over one module at a time, each against its own test files only (a mutant is
killed when those tests fail or time out), and merges the outcome into
``benchmarks/results/mutation.json``::

    {"modules": {"<module path>": {"killed": n, "survived": n, "equivalent": n,
                                   "incompetent": n, "score": killed / (killed + survived)}},
     "survivors": [{"module", "line", "operator", "mutation"}, ...],
     "equivalent": [{"module", "line", "operator", "mutation", "reason"}, ...]}

A survivor listed in :data:`EQUIVALENT` (keyed by module, operator and the source line before
and after the mutation, so edits elsewhere keep the key) is counted as ``equivalent`` with its
reason: a mutant no test can kill because the program means the same. ``incompetent``: the
mutant could not run (e.g. a mutation cosmic-ray cannot apply); it counts toward neither side.
A module not run keeps its earlier entry, or has none ("not run").

Not part of CI (minutes to hours): ``python benchmarks/mutation.py [MODULE ...]`` (module paths
as in :data:`MODULES`, default all) with cosmic-ray from the ``bench`` extra. It mutates the
module files in place while it runs and restores them; do not edit them meanwhile.
The reward module is left out while it is being rewritten.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "mutation.json"
PYTEST = f"{sys.executable} -m pytest -x -q -p no:cacheprovider"

MODULES: dict[str, list[str]] = {
    # module path -> its own test files (what must kill its mutants)
    "packages/learner/src/mlerl/learner/_weights.py": ["tests/learner/test_weights.py"],
    "packages/learner/src/mlerl/learner/_advantages.py": [
        "tests/learner/test_advantages.py", "tests/learner/test_whiten.py"],
    "packages/learner/src/mlerl/learner/_losses.py": ["tests/learner/test_losses.py"],
    "packages/protocol/src/mlerl/protocol/_validate.py": ["tests/protocol/test_validate.py"],
    "packages/bench/src/mlerl/bench/_metrics.py": ["tests/bench/test_metrics.py"],
    "packages/sandbox/src/mlerl/sandbox/_bwrap.py": ["tests/sandbox/test_units.py"],
    "packages/learner/src/mlerl/learner/_checkpoint.py": [
        "tests/learner/test_checkpoint.py", "tests/learner/test_checkpoint_integrity.py"],
}

_W = "packages/learner/src/mlerl/learner/_weights.py"
EQUIVALENT: dict[tuple[str, str, str, str], str] = {
    # (module, operator, line before, line after) -> why no test can tell them apart
    ("packages/learner/src/mlerl/learner/_weights.py", "core/ReplaceComparisonOperator_Is_Eq",
     "if mode is DurationWeighting.none or d.numel() == 0:",
     "if mode == DurationWeighting.none or d.numel() == 0:"):
        "an enum member compares equal only to itself: `is` and `==` agree",
    **{(_W, "core/ReplaceComparisonOperator_Is_Eq", f"if mode is DurationWeighting.{m}:",
        f"if mode == DurationWeighting.{m}:"):
       "an enum member compares equal only to itself: `is` and `==` agree"
       for m in ("paper", "clipped", "log", "running")},
    (_W, "core/ReplaceComparisonOperator_Is_LtE", "if mode is DurationWeighting.running:",
     "if mode <= DurationWeighting.running:"):
        "a str enum: only 'running' reaches this line (every other mode returned above)",
    (_W, "core/ReplaceComparisonOperator_Eq_Lt",
     "if mode is DurationWeighting.none or d.numel() == 0:",
     "if mode is DurationWeighting.none or d.numel() < 0:"):
        "an empty batch then gets an empty tensor all the same (its mean is nan, every branch "
        "divides an empty tensor)",
    ("packages/learner/src/mlerl/learner/_weights.py", "core/ReplaceComparisonOperator_Is_LtE",
     "if mode is DurationWeighting.clipped:", "if mode <= DurationWeighting.clipped:"):
        "a str enum: of the modes that reach this line (clipped, log, running) only 'clipped' "
        "sorts <= 'clipped'",
    ("packages/learner/src/mlerl/learner/_weights.py", "core/ReplaceComparisonOperator_Eq_LtE",
     "if n == 0:", "if n <= 0:"):
        "n is a numel(), never negative",
    (_W, "core/ReplaceComparisonOperator_Gt_NotEq",
     '"grad_mass_fast": (1.0 - slow_share) if total > 0 else 0.0,',
     '"grad_mass_fast": (1.0 - slow_share) if total != 0 else 0.0,'):
        "total = sum w |A| with duration weights w >= 0: never negative",
    ("packages/protocol/src/mlerl/protocol/_validate.py", "core/NumberReplacer",
     '"duration_s", sample.duration_s, 0.0, limits.max_duration_s',
     '"duration_s", sample.duration_s, -1.0, limits.max_duration_s'):
        "a Sample with duration_s < 0 cannot exist: Sample (and decode) refuse it first",
}

SESSIONS = ROOT / "benchmarks" / "results" / "mutation_sessions"
"""cosmic-ray's session databases (not checked in): a run interrupted by ``--budget-s`` resumes."""


def rule_equivalent(before: str, after: str) -> str | None:
    """Mutants equivalent by construction, whatever the line: an operator swapped inside a
    ``X | None`` annotation (every module here has ``from __future__ import annotations``, so
    annotations are never evaluated)."""
    start = before.find("| None")
    while start >= 0:
        for op in ("%", "//", "/", "*", "+", "-", "**", "<<", ">>", "&", "^", "@"):
            if before[:start] + op + before[start + 1:] == after:
                return "operator inside a postponed annotation (never evaluated)"
        start = before.find("| None", start + 1)
    return None


def mutation_key(module: str, operator: str, before: str, after: str) -> tuple[str, str, str, str]:
    return (module, operator, before.strip(), after.strip())


def parse_diff(diff: str) -> tuple[int, str, str]:
    """(line number, line before, line after) of a one-hunk unified diff from cosmic-ray."""
    line, before, after = 0, "", ""
    for text in diff.splitlines():
        if text.startswith("@@"):
            line = int(text.split()[1].lstrip("-").split(",")[0])
        elif text.startswith("-") and not text.startswith("---"):
            before = before or text[1:]
        elif text.startswith("+") and not text.startswith("+++"):
            after = after or text[1:]
        elif text.startswith(" ") and not before:
            line += 1
    return line, before, after


def summarize(module: str, records: Iterable[dict[str, Any]],
              equivalent: dict[tuple[str, str, str, str], str]
              ) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """cosmic-ray ``dump`` records of one module -> (counts, survivors, equivalents)."""
    counts = {"killed": 0, "survived": 0, "equivalent": 0, "incompetent": 0, "not_run": 0}
    survivors: list[dict[str, Any]] = []
    equivalents: list[dict[str, Any]] = []
    for record in records:
        result = record.get("result") or {}
        outcome = result.get("test_outcome")
        if outcome is None:
            counts["not_run"] += 1  # an interrupted session
            continue
        outcome = outcome.lower()
        if outcome == "killed":
            counts["killed"] += 1
            continue
        if outcome == "incompetent":
            counts["incompetent"] += 1
            continue
        mutation = record["work_item"]["mutations"][0]
        operator = mutation["operator_name"]
        line, before, after = parse_diff(result.get("diff") or "")
        line = mutation.get("start_pos", [line])[0]
        entry = {"module": module, "line": line, "operator": operator,
                 "mutation": f"{before.strip()}  ->  {after.strip()}"}
        reason = (equivalent.get(mutation_key(module, operator, before, after))
                  or rule_equivalent(before, after))
        if reason is not None:
            counts["equivalent"] += 1
            equivalents.append(entry | {"reason": reason})
        else:
            counts["survived"] += 1
            survivors.append(entry)
    decided = counts["killed"] + counts["survived"]
    counts["score"] = round(counts["killed"] / decided, 4) if decided else None
    counts["complete"] = counts["not_run"] == 0
    return counts, survivors, equivalents


def merge(results: dict[str, Any], module: str, counts: dict[str, Any],
          survivors: list[dict[str, Any]], equivalents: list[dict[str, Any]]) -> dict[str, Any]:
    """``results`` with ``module``'s entry and lists replaced by this run's."""
    out = {"modules": dict(results.get("modules", {})),
           "survivors": [s for s in results.get("survivors", []) if s["module"] != module],
           "equivalent": [e for e in results.get("equivalent", []) if e["module"] != module]}
    out["modules"][module] = counts
    out["survivors"] += survivors
    out["equivalent"] += equivalents
    return out


def forget_survivors(session: Path) -> int:
    """Mark the session's surviving mutants as not run (to test them again after new tests)."""
    with sqlite3.connect(session) as db:
        return db.execute("DELETE FROM work_results WHERE test_outcome = 'SURVIVED'").rowcount


def run_module(module: str, tests: list[str], timeout_s: float, budget_s: float | None,
               retest_survivors: bool = False, run: bool = True) -> list[dict[str, Any]]:
    """Run (or resume) cosmic-ray over ``module`` with its tests, for at most ``budget_s``;
    return its ``dump`` records (those not run yet have no result)."""
    name = Path(module).stem
    SESSIONS.mkdir(parents=True, exist_ok=True)
    config, session = SESSIONS / f"{name}.toml", SESSIONS / f"{name}.sqlite"
    config.write_text(
        "[cosmic-ray]\n"
        f"module-path = {json.dumps(module)}\n"
        f"timeout = {timeout_s}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(PYTEST + ' ' + ' '.join(tests))}\n"
        "[cosmic-ray.distributor]\nname = \"local\"\n")
    cr = [str(Path(sys.executable).with_name("cosmic-ray"))]
    if not session.exists():
        subprocess.run([*cr, "init", str(config), str(session)], cwd=ROOT, check=True)
    elif retest_survivors:
        print(module, "survivors to test again:", forget_survivors(session), flush=True)
    if run:
        proc = subprocess.Popen([*cr, "exec", str(config), str(session)], cwd=ROOT,
                                start_new_session=True)
        try:
            proc.wait(timeout=budget_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # cosmic-ray and the mutant's pytest
            proc.wait()
        finally:
            subprocess.run(["git", "checkout", "--", module], cwd=ROOT, check=True)
    dump = subprocess.run([*cr, "dump", str(session)], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout
    records = []
    for line in dump.splitlines():
        work_item, result = json.loads(line)
        records.append({"work_item": work_item, "result": result})
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("modules", nargs="*", default=list(MODULES))
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per mutant")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="stop each module after this long (resume later)")
    parser.add_argument("--no-run", action="store_true",
                        help="only summarise the stored sessions again (after editing EQUIVALENT)")
    parser.add_argument("--retest-survivors", action="store_true",
                        help="test a resumed session's survivors again (after adding tests)")
    args = parser.parse_args()
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    for module in args.modules:
        if args.no_run and not (SESSIONS / f"{Path(module).stem}.sqlite").exists():
            continue  # not run: no entry
        records = run_module(module, MODULES[module], args.timeout, args.budget_s,
                             args.retest_survivors, run=not args.no_run)
        counts, survivors, equivalents = summarize(module, records, EQUIVALENT)
        results = merge(results, module, counts, survivors, equivalents)
        RESULTS.write_text(json.dumps(results, indent=1) + "\n")
        print(module, counts, flush=True)


if __name__ == "__main__":
    main()
