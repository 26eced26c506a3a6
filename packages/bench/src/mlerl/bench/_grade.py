"""Grading a submission file into an MLE-bench report, validation, batch grading.

Guarantees: every failure (missing file, not ``.csv``, over the size cap, unreadable CSV, any
exception in the grader) yields a report with ``valid_submission=False`` and ``score=None``;
nothing raises for a bad submission. The size cap is checked with ``stat`` before reading, so
a huge file costs no memory, and a file of absurd shape for the answers (far too many columns,
lines or rows, an overlong line) is refused in one bounded streaming pass before pandas parses
it. ``validate_submission`` returns only valid/invalid and a reason
free of answer values and scores. Scores are rounded to 5 places; NaN is a valid score.

Public and private leaderboards (:mod:`mlerl.bench._split`): ``score`` is MLE-bench's, on all
answers; ``public_score`` and ``private_score`` grade each part of the answers as its own
answer set. A submission valid on all answers whose part cannot be scored is invalid.
``baseline_score`` is the sample submission's public score (a reference of the normalised
reward). ``to_dict`` holds MLE-bench's keys only; ``to_json`` adds these.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from mlerl.bench._graders import GRADERS, InvalidSubmission
from mlerl.bench._medals import rank_score, thresholds_from_leaderboard
from mlerl.bench._shape import check_shape
from mlerl.bench._split import part_frames, split_answers
from mlerl.bench._task import TaskSpec

REPORT_KEYS = (
    "competition_id",
    "score",
    "gold_threshold",
    "silver_threshold",
    "bronze_threshold",
    "median_threshold",
    "any_medal",
    "gold_medal",
    "silver_medal",
    "bronze_medal",
    "above_median",
    "submission_exists",
    "valid_submission",
    "is_lower_better",
    "created_at",
    "submission_path",
)
LEADERBOARD_KEYS = ("public_score", "private_score", "baseline_score", "split")
"""Keys beyond MLE-bench's report: the two leaderboards and the normalised reward's baseline."""


@dataclass(frozen=True)
class GradeReport:
    """MLE-bench's CompetitionReport plus ``error`` (why invalid; not part of ``to_dict``)."""

    competition_id: str
    score: float | None
    gold_threshold: float
    silver_threshold: float
    bronze_threshold: float
    median_threshold: float
    any_medal: bool
    gold_medal: bool
    silver_medal: bool
    bronze_medal: bool
    above_median: bool
    submission_exists: bool
    valid_submission: bool
    is_lower_better: bool
    created_at: str
    submission_path: str
    error: str = field(default="", compare=False)
    public_score: float | None = None
    """The score on the public part of the answers (what rewards and selections read)."""
    private_score: float | None = None
    """The score on the private part (what reports show)."""
    baseline_score: float | None = None
    """The sample submission's public score (None when not computed or not valid)."""
    split: str = ""
    """How the answers were split (see :class:`mlerl.bench._split.Parts`)."""

    def to_dict(self) -> dict[str, Any]:
        """Exactly MLE-bench's report keys, JSON-ready."""
        return {k: getattr(self, k) for k in REPORT_KEYS}

    def to_json(self) -> dict[str, Any]:
        """MLE-bench's keys, then :data:`LEADERBOARD_KEYS`."""
        return {**self.to_dict(), **{k: getattr(self, k) for k in LEADERBOARD_KEYS}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GradeReport:
        extra = {k: data[k] for k in LEADERBOARD_KEYS if k in data}
        return cls(**{k: data[k] for k in REPORT_KEYS}, error=str(data.get("error", "")), **extra)


def task_thresholds(task: TaskSpec) -> tuple[float, float, float, float]:
    """Thresholds from the task's leaderboard CSV when it has one, else from ``task.yaml``."""
    if task.leaderboard is not None and task.leaderboard.is_file():
        g, s, b, med, _ = thresholds_from_leaderboard(task.leaderboard)
        return g, s, b, med
    if task.thresholds is None:
        nan = float("nan")
        return nan, nan, nan, nan
    t = task.thresholds
    return t.gold, t.silver, t.bronze, t.median


def _read_csv(path: Path) -> pd.DataFrame:
    """``read_csv(float_precision="round_trip")`` as MLE-bench reads (pandas 3 deprecates the
    argument while keeping round-trip parsing; the warning is silenced here only)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=FutureWarning)
        warnings.simplefilter("ignore", category=DeprecationWarning)
        try:
            return pd.read_csv(path, float_precision="round_trip")
        except TypeError:  # a pandas that has dropped the argument
            return pd.read_csv(path)


def _check_file(task: TaskSpec, path: Path) -> None:
    """A regular, non-link ``.csv`` file within the task's byte cap (``stat`` only)."""
    if not path.is_file() or path.suffix.lower() != ".csv":
        raise InvalidSubmission("submission must be a regular .csv file")
    if path.is_symlink():  # stricter than MLE-bench: a link could point at the answers
        raise InvalidSubmission("submission must be a regular file, not a symbolic link")
    size = path.stat().st_size
    if size > task.max_submission_bytes:
        raise InvalidSubmission(
            f"submission is {size} bytes, over the {task.max_submission_bytes}-byte cap"
        )


def read_submission(
    task: TaskSpec, path: Path, answers: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Read a submission CSV as MLE-bench does; raise :class:`InvalidSubmission` on any problem.

    With ``answers``, a file of absurd shape for them (see :mod:`mlerl.bench._shape`: too many
    columns, lines or rows, an overlong line) is refused in one bounded pass before pandas
    parses it.
    """
    _check_file(task, path)
    if answers is not None:
        check_shape(path, len(answers), answers.shape[1])
    try:
        return _read_csv(path)
    except Exception as exc:  # noqa: BLE001 - any parse failure means invalid
        raise InvalidSubmission(
            f"submission is not a readable CSV ({type(exc).__name__})"
        ) from None


def _read_pair(task: TaskSpec, path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(submission, answers): file checks, then the answers, then the bounded shape check."""
    _check_file(task, path)
    answers = load_answers(task)
    return read_submission(task, path, answers), answers


def load_answers(task: TaskSpec) -> pd.DataFrame:
    if not task.answers_path.is_file():
        raise FileNotFoundError(f"{task.id} is not prepared: run `mlerl-bench prepare {task.id}`")
    return _read_csv(task.answers_path)


def score_frame(task: TaskSpec, submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Run the task's grader and round to 5 places (raises on an invalid submission)."""
    grader = GRADERS[task.grader]
    score = float(grader(submission, answers, task.id_column, task.target_columns))
    return score if math.isnan(score) else round(score, 5)


def _report(
    task: TaskSpec,
    path: Path,
    score: float | None,
    exists: bool,
    error: str,
    parts: tuple[float | None, float | None, str] = (None, None, ""),
    baseline: float | None = None,
) -> GradeReport:
    g, s, b, med = task_thresholds(task)
    r = rank_score(score, g, s, b, med, task.lower_is_better)
    return GradeReport(
        competition_id=task.id,
        score=score,
        gold_threshold=g,
        silver_threshold=s,
        bronze_threshold=b,
        median_threshold=med,
        any_medal=r.any_medal,
        gold_medal=r.gold_medal,
        silver_medal=r.silver_medal,
        bronze_medal=r.bronze_medal,
        above_median=r.above_median,
        submission_exists=exists,
        valid_submission=score is not None,
        is_lower_better=task.lower_is_better,
        created_at=datetime.now().isoformat(),
        submission_path=str(path),
        error=error,
        public_score=parts[0],
        private_score=parts[1],
        split=parts[2],
        baseline_score=baseline,
    )


def part_scores(
    task: TaskSpec, submission: pd.DataFrame, answers: pd.DataFrame, full: float | None = None
) -> tuple[float, float, str]:
    """(public score, private score, split) of a submission already valid on all answers
    (``full``: its score there, reused when there is no split); raises
    :class:`InvalidSubmission` when a part cannot be scored."""
    parts = split_answers(task, answers)
    if full is not None and parts.split.startswith("full"):
        return full, full, parts.split
    scores = []
    for name, rows in (("public", parts.public), ("private", parts.private)):
        try:
            scores.append(score_frame(task, *part_frames(task, submission, answers, rows)))
        except Exception as exc:  # noqa: BLE001 - a grader error on a part means invalid
            raise InvalidSubmission(
                f"the {name} part cannot be scored ({type(exc).__name__})"
            ) from None
    return scores[0], scores[1], parts.split


def _score_file(task: TaskSpec, path: Path) -> tuple[float | None, tuple, bool, str]:
    exists = path.is_file() and path.suffix.lower() == ".csv"
    try:
        submission, answers = _read_pair(task, path)
        score = score_frame(task, submission, answers)
        return score, part_scores(task, submission, answers, score), exists, ""
    except InvalidSubmission as exc:
        return None, (None, None, ""), exists, str(exc)
    except FileNotFoundError as exc:
        return None, (None, None, ""), exists, str(exc)
    except Exception as exc:  # noqa: BLE001 - MLE-bench: any exception in a grader means invalid
        return None, (None, None, ""), exists, f"grader raised {type(exc).__name__}: {exc}"


def grade_submission(
    task: TaskSpec, submission_path: str | os.PathLike[str], baseline: bool = True
) -> GradeReport:
    """Grade one submission file; never raises for a bad submission. With ``baseline``, a
    valid report carries the sample submission's public score (cached per process)."""
    path = Path(submission_path)
    score, parts, exists, error = _score_file(task, path)
    base = None
    if baseline and score is not None:
        value = baseline_score(task)
        base = None if math.isnan(value) else value
    return _report(task, path, score, exists, error, parts, base)


_BASELINES: dict[tuple, float] = {}


def baseline_score(task: TaskSpec) -> float:
    """The public score of the task's sample submission (NaN when it has none or it is
    invalid); cached per process while the answers and the sample file are unchanged."""
    files = (task.answers_path, task.sample_submission_path)
    key = (
        task.id,
        str(task.task_dir),
        str(task.data_dir),
        task.grader,
        task.public_fraction,
        *(p.stat().st_mtime_ns if p.is_file() else 0 for p in files),
    )
    if key not in _BASELINES:
        score = math.nan
        if task.sample_submission_path.is_file():
            report = grade_submission(task, task.sample_submission_path, baseline=False)
            score = math.nan if report.public_score is None else float(report.public_score)
        if len(_BASELINES) > 256:
            _BASELINES.clear()
        _BASELINES[key] = score
    return _BASELINES[key]


def validate_submission(
    task: TaskSpec, submission_path: str | os.PathLike[str]
) -> tuple[bool, str]:
    """(valid, reason) like MLE-bench's in-container endpoint: never a score or an answer value.

    Reasons come from the graders' own checks (columns, row counts, id match, value ranges);
    an error raised inside a metric is reported by its type only, since its message could
    describe the answers.
    """
    path = Path(submission_path)
    try:
        submission, answers = _read_pair(task, path)
        score_frame(task, submission, answers)
        part_scores(task, submission, answers)
    except InvalidSubmission as exc:
        return False, str(exc)
    except FileNotFoundError:
        return False, f"task {task.id} is not prepared on the grading side"
    except Exception as exc:  # noqa: BLE001 - any scoring error means invalid, said
        return False, f"the submission could not be scored ({type(exc).__name__})"
    return True, "submission is valid"


def aggregate(reports: list[GradeReport]) -> dict[str, Any]:
    """MLE-bench's summary keys over a list of reports."""
    return {
        "total_runs": len(reports),
        "total_runs_with_submissions": sum(r.submission_exists for r in reports),
        "total_valid_submissions": sum(r.valid_submission for r in reports),
        "total_medals": sum(r.any_medal for r in reports),
        "total_gold_medals": sum(r.gold_medal for r in reports),
        "total_silver_medals": sum(r.silver_medal for r in reports),
        "total_bronze_medals": sum(r.bronze_medal for r in reports),
        "total_above_median": sum(r.above_median for r in reports),
        "competition_reports": [r.to_dict() for r in reports],
    }


def read_batch(path: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """(task id, submission path) pairs from a JSONL of ``{"competition_id"|"task_id",
    "submission_path"}`` records; relative paths resolve against the JSONL's folder."""
    base = Path(path).parent
    pairs = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            tid = rec.get("competition_id") or rec["task_id"]
            sub = Path(rec["submission_path"])
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
            raise ValueError(
                f"{path}:{n}: need competition_id (or task_id) and submission_path"
            ) from None
        pairs.append((str(tid), str(sub if sub.is_absolute() else base / sub)))
    return pairs
