"""``mlerl-bench``: list, prepare, grade, grade-batch, validate, compare, calibrate.

Exit status: 0 on success (a graded-but-invalid submission is still a success for ``grade``;
``validate`` exits 1 when invalid), 2 on bad arguments or an unknown / unprepared task.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from mlerl.bench._task import Registry, TaskError


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data-dir", default=None, help="prepared data root (default ~/.cache/mle-bench/data)"
    )
    p.add_argument(
        "--tasks-dir", default=None, help="extra task directories (task.yaml + description.md)"
    )


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="mlerl-bench", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("list", help="list tasks")
    _common(p)
    p.add_argument("--kind", choices=["standin", "mlebench"], default=None)
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("prepare", help="build a task's prepared/public and prepared/private")
    _common(p)
    p.add_argument("task", nargs="+")
    p.add_argument("--raw", default=None, help="unzipped Kaggle files (real tasks only)")
    p.add_argument("--force", action="store_true")
    p = sub.add_parser("grade", help="grade one submission; prints one JSON report")
    _common(p)
    p.add_argument(
        "--public-fraction",
        type=float,
        default=None,
        help="share of the answers on the public leaderboard (default: the task's; 1: no split)",
    )
    p.add_argument("--task", required=True)
    p.add_argument("--submission", required=True)
    p.add_argument(
        "--timeout", type=float, default=None, help="grade in a subprocess with this timeout"
    )
    p = sub.add_parser("grade-batch", help="grade a JSONL of {competition_id, submission_path}")
    _common(p)
    p.add_argument("--submissions", required=True)
    p.add_argument("--output", default=None, help="write the aggregate JSON here (default stdout)")
    p = sub.add_parser("validate", help="valid/invalid and a reason; never a score")
    _common(p)
    p.add_argument("--task", required=True)
    p.add_argument("--submission", required=True)
    p = sub.add_parser("compare", help="tables and plots from run metrics JSONL files")
    p.add_argument("metrics", nargs="+", help="metrics JSONL file(s) (see docs/bench.md)")
    p.add_argument("--out", required=True, help="output folder for table.md, table.csv, *.png")
    p.add_argument("--k", type=int, default=None, help="samples per task for best-of-K / mean@K")
    p = sub.add_parser(
        "calibrate", help="(maintainers) run reference solutions, rewrite stand-in task.yaml"
    )
    p.add_argument("--work-dir", required=True)
    p.add_argument("--only", nargs="*", default=None)
    p.add_argument("--resume", action="store_true", help="reuse existing leaderboard.csv files")
    return ap


def _cmd_list(a: argparse.Namespace) -> int:
    reg = Registry.load(a.tasks_dir, a.data_dir)
    rows = [
        {
            "id": t.id,
            "kind": t.kind,
            "modality": t.modality,
            "metric": t.metric,
            "direction": "min" if t.lower_is_better else "max",
            "prepared": t.is_prepared(),
        }
        for t in reg
        if a.kind is None or t.kind == a.kind
    ]
    if a.json:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            print(
                f"{r['id']:48s} {r['kind']:9s} {r['modality']:8s} {r['metric']:26s} "
                f"{r['direction']}  {'prepared' if r['prepared'] else ''}"
            )
    return 0


def _cmd_prepare(a: argparse.Namespace) -> int:
    from mlerl.bench._prepare import prepare

    for tid in a.task:
        task = prepare(tid, a.data_dir, raw_dir=a.raw, tasks_dir=a.tasks_dir, force=a.force)
        print(f"{task.id}: {task.public_dir.parent}")
    return 0


def _cmd_grade(a: argparse.Namespace) -> int:
    from mlerl.bench._grade import grade_submission
    from mlerl.bench._subprocess import grade_in_subprocess

    task = Registry.load(a.tasks_dir, a.data_dir, public_fraction=a.public_fraction).get(a.task)
    if a.timeout is not None:
        report = grade_in_subprocess(task, a.submission, a.timeout)
    else:
        report = grade_submission(task, a.submission)
    if report.error:
        print(f"invalid: {report.error}", file=sys.stderr)
    print(json.dumps(report.to_json()))
    return 0


def _cmd_grade_batch(a: argparse.Namespace) -> int:
    from mlerl.bench._grade import aggregate, grade_submission, read_batch

    reg = Registry.load(a.tasks_dir, a.data_dir)
    reports = [grade_submission(reg.get(tid), path) for tid, path in read_batch(a.submissions)]
    text = json.dumps(aggregate(reports), indent=2)
    if a.output:
        Path(a.output).write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


def _cmd_validate(a: argparse.Namespace) -> int:
    from mlerl.bench._grade import validate_submission

    ok, reason = validate_submission(
        Registry.load(a.tasks_dir, a.data_dir).get(a.task), a.submission
    )
    print(json.dumps({"valid": ok, "reason": reason}))
    return 0 if ok else 1


def _cmd_compare(a: argparse.Namespace) -> int:
    from mlerl.bench._compare import compare_runs

    for path in compare_runs([Path(p) for p in a.metrics], Path(a.out), k=a.k):
        print(path)
    return 0


def _cmd_calibrate(a: argparse.Namespace) -> int:
    from mlerl.bench._reference import calibrate

    calibrate(Path(a.work_dir), only=a.only, resume=a.resume)
    return 0


COMMANDS = {
    "list": _cmd_list,
    "prepare": _cmd_prepare,
    "grade": _cmd_grade,
    "grade-batch": _cmd_grade_batch,
    "validate": _cmd_validate,
    "compare": _cmd_compare,
    "calibrate": _cmd_calibrate,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.cmd](args)
    except (TaskError, FileNotFoundError, ValueError) as exc:
        print(f"mlerl-bench {args.cmd}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
