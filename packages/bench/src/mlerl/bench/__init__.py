"""mlerl.bench: MLE-bench-compatible tasks, graders, offline stand-in tasks and comparisons.

Graders reproduce MLE-bench's semantics (any exception = invalid, scores rounded to 5 places,
NaN valid, Kaggle medal rules) and read/write MLE-bench's on-disk layout and report keys.

- tasks: ``Registry`` (built-in and ``--tasks-dir`` tasks), ``TaskSpec``, ``TaskError``,
  ``prepare`` (build a task's data in MLE-bench's layout), ``default_data_dir``;
- grading: ``grade_submission``, ``validate_submission``, ``grade_in_subprocess`` and the warm
  ``GraderPool`` (separate processes), ``GRADERS`` (the grader names a task.yaml may use);
- public and private leaderboards: ``split_answers`` (each report holds ``public_score`` and
  ``private_score``), ``reference_scores`` (the normalised reward's baseline and best value);
- comparisons: ``compare_runs`` (tables and plots), ``mean_se``, ``rank_score``;
- the public part's noise: ``public_noise``, ``reference_noise`` (a paired bootstrap of the
  public rows), with ``load_public``, ``load_answers``, ``score_frame`` and ``part_scores``
  to grade a submission frame on any rows.

The command is ``mlerl-bench``; see docs/bench.md.
"""

from mlerl.bench._compare import compare_runs, mean_se
from mlerl.bench._grade import (
    grade_submission,
    load_answers,
    part_scores,
    score_frame,
    validate_submission,
)
from mlerl.bench._grader_pool import GraderPool
from mlerl.bench._graders import GRADERS
from mlerl.bench._medals import rank_score
from mlerl.bench._noise import public_noise, reference_noise
from mlerl.bench._prepare import prepare
from mlerl.bench._reference import load_public
from mlerl.bench._split import reference_scores, split_answers
from mlerl.bench._subprocess import grade_in_subprocess
from mlerl.bench._task import Registry, TaskError, TaskSpec, default_data_dir

__version__ = "0.1.0"

__all__ = [
    "Registry",
    "TaskSpec",
    "TaskError",
    "prepare",
    "default_data_dir",
    "grade_submission",
    "validate_submission",
    "grade_in_subprocess",
    "GraderPool",
    "GRADERS",
    "split_answers",
    "reference_scores",
    "compare_runs",
    "mean_se",
    "rank_score",
    "load_answers",
    "load_public",
    "part_scores",
    "score_frame",
    "public_noise",
    "reference_noise",
]
