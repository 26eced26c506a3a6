"""mlerl.bench: MLE-bench-compatible tasks, graders, offline stand-in tasks and comparisons.

Graders reproduce MLE-bench's semantics (any exception = invalid, scores rounded to 5 places,
NaN valid, Kaggle medal rules) and read/write MLE-bench's on-disk layout and report keys.
"""

from mlerl.bench._compare import compare_runs, mean_se
from mlerl.bench._grade import (
    REPORT_KEYS,
    GradeReport,
    aggregate,
    grade_submission,
    read_batch,
    validate_submission,
)
from mlerl.bench._graders import GRADERS, InvalidSubmission
from mlerl.bench._medals import medal_positions, rank_score, thresholds_from_leaderboard, thresholds_from_scores
from mlerl.bench._prepare import prepare
from mlerl.bench._subprocess import GraderPool, grade_in_subprocess
from mlerl.bench._task import Registry, TaskError, TaskSpec, Thresholds, default_data_dir

__version__ = "0.1.0"

__all__ = [
    "GRADERS",
    "REPORT_KEYS",
    "GradeReport",
    "GraderPool",
    "InvalidSubmission",
    "Registry",
    "TaskError",
    "TaskSpec",
    "Thresholds",
    "aggregate",
    "compare_runs",
    "default_data_dir",
    "grade_in_subprocess",
    "grade_submission",
    "mean_se",
    "medal_positions",
    "prepare",
    "rank_score",
    "read_batch",
    "thresholds_from_leaderboard",
    "thresholds_from_scores",
    "validate_submission",
]
