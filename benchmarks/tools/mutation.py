"""Mutation testing of the modules that decide what is learned and what is safe.

Mutates one module at a time with cosmic-ray's operators (its session database holds the
mutants and their results), runs each mutant against the module's own test files only (a
mutant is killed when those tests fail or time out), and merges the outcome into
``benchmarks/results/mutation.json``::

    {"modules": {"<module path>": {"killed": n, "survived": n, "equivalent": n,
                                   "incompetent": n, "score": killed / (killed + survived)}},
     "survivors": [{"module", "line", "operator", "mutation"}, ...],
     "equivalent": [{"module", "line", "operator", "mutation", "reason"}, ...]}

A survivor listed in :data:`EQUIVALENT` (keyed by module, operator and the source line before
and after the mutation, so edits elsewhere keep the key; operator and line after ``"*"``: any
mutant of a line whose value cannot matter) is counted as ``equivalent`` with its reason: a
mutant no test can kill because the program means the same. ``incompetent``: the
mutant could not run (e.g. a mutation cosmic-ray cannot apply); it counts toward neither side.
A module not run keeps its earlier entry, or has none ("not run").

Speed (what made a full run feasible on a CPU machine): mutants equivalent by rule are recorded
without running; each mutant's tests run in a child forked from one process that imported
their third-party dependencies once (:class:`ForkRunner`: ~1 s a mutant instead of ~4-15 s for
a fresh interpreter, with the same outcomes), fastest tests first, ``pytest -x``. A session
made from another version of the module is replaced (:func:`session_is_current`).

Not part of CI (minutes to hours): ``python benchmarks/tools/mutation.py [MODULE ...]`` (module paths
as in :data:`MODULES`, default all) with cosmic-ray from the ``bench`` extra. It mutates the
module files in place while it runs and restores them; do not edit them meanwhile.
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

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "mutation.json"
PYTEST = f"{sys.executable} -m pytest -x -q -p no:cacheprovider -m 'not slow'"
"""Each mutant's test command (the fork runner passes the same arguments). Tests marked ``slow``
are left out: among the modules' tests only the real 2-rank gloo whitening (11 s, which every
surviving mutant of ``_advantages`` would pay), whose arithmetic the fake-group test checks."""

MODULES: dict[str, list[str]] = {
    # module path -> its own test files (what must kill its mutants)
    "packages/learner/src/mlerl/learner/_duration_weights.py": [
        "tests/learner/test_duration_weights.py"
    ],
    "packages/learner/src/mlerl/learner/_advantages.py": [
        "tests/learner/test_advantages.py",
        "tests/learner/test_whiten.py",
    ],
    "packages/learner/src/mlerl/learner/_losses.py": ["tests/learner/test_losses.py"],
    "packages/protocol/src/mlerl/protocol/_validate.py": ["tests/protocol/test_validate.py"],
    "packages/bench/src/mlerl/bench/_metrics.py": ["tests/bench/test_metrics.py"],
    "packages/sandbox/src/mlerl/sandbox/_bwrap.py": ["tests/sandbox/test_units.py"],
    "packages/learner/src/mlerl/learner/_checkpoint.py": [
        "tests/learner/test_checkpoint.py",
        "tests/learner/test_checkpoint_integrity.py",
    ],
    "packages/instrument/src/mlerl/instrument/_reward.py": [
        "tests/instrument/test_reward.py",
        "tests/instrument/test_normalised_reward.py",
    ],
}

_W = "packages/learner/src/mlerl/learner/_duration_weights.py"
_A = "packages/learner/src/mlerl/learner/_advantages.py"
_L = "packages/learner/src/mlerl/learner/_losses.py"
_ROWS = "rows = torch.nonzero(mask.sum(-1) > 0).squeeze(-1)"
_LAST = "last = (mask.float() * positions).argmax(-1)  # (B,) index of the last 1 in each row"
_POSITIONS = (
    "positions = torch.arange(1, mask.shape[-1] + 1, device=mask.device, dtype=torch.float32)"
)
_R = "packages/instrument/src/mlerl/instrument/_reward.py"
_M = "packages/bench/src/mlerl/bench/_metrics.py"
_QWK_FINITE = (
    "if numeric[0] and not (np.all(np.isfinite(a.astype(float))) and "
    "np.all(np.isfinite(b.astype(float)))):"
)
_OUTERMOST = 'if not any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots):'
_SIGMOID = "reward = 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))"
_SIGNED = (
    "signed = (-score if lower_is_better else score) if graded else 0.0  # type: ignore[operator]"
)
EQUIVALENT: dict[tuple[str, str, str, str], str] = {
    # (module, operator, line before, line after) -> why no test can tell them apart
    (
        "packages/learner/src/mlerl/learner/_duration_weights.py",
        "core/ReplaceComparisonOperator_Is_Eq",
        "if mode is DurationWeighting.none or d.numel() == 0:",
        "if mode == DurationWeighting.none or d.numel() == 0:",
    ): "an enum member compares equal only to itself: `is` and `==` agree",
    **{
        (
            _W,
            "core/ReplaceComparisonOperator_Is_Eq",
            f"if mode is DurationWeighting.{m}:",
            f"if mode == DurationWeighting.{m}:",
        ): "an enum member compares equal only to itself: `is` and `==` agree"
        for m in ("paper", "clipped", "log", "running")
    },
    (
        _W,
        "core/ReplaceComparisonOperator_Is_LtE",
        "if mode is DurationWeighting.running:",
        "if mode <= DurationWeighting.running:",
    ): "a str enum: only 'running' reaches this line (every other mode returned above)",
    (
        _W,
        "core/NumberReplacer",
        "if mode is DurationWeighting.none or d.numel() == 0:",
        "if mode is DurationWeighting.none or d.numel() == -1:",
    ): "an empty batch then gets an empty tensor all the same (its mean is nan, every branch "
    "divides an empty tensor)",
    (
        _W,
        "core/ReplaceComparisonOperator_Gt_NotEq",
        "slow_share = float(mass[slow].sum()) / total if total > 0 else 0.0",
        "slow_share = float(mass[slow].sum()) / total if total != 0 else 0.0",
    ): "total = sum w |A| with duration weights w >= 0: never negative",
    (
        _W,
        "core/ReplaceComparisonOperator_Eq_Lt",
        "if mode is DurationWeighting.none or d.numel() == 0:",
        "if mode is DurationWeighting.none or d.numel() < 0:",
    ): "an empty batch then gets an empty tensor all the same (its mean is nan, every branch "
    "divides an empty tensor)",
    (
        "packages/learner/src/mlerl/learner/_duration_weights.py",
        "core/ReplaceComparisonOperator_Is_LtE",
        "if mode is DurationWeighting.clipped:",
        "if mode <= DurationWeighting.clipped:",
    ): "a str enum: of the modes that reach this line (clipped, log, running) only 'clipped' "
    "sorts <= 'clipped'",
    (
        "packages/learner/src/mlerl/learner/_duration_weights.py",
        "core/ReplaceComparisonOperator_Eq_LtE",
        "if n == 0:",
        "if n <= 0:",
    ): "n is a numel(), never negative",
    (
        _W,
        "core/ReplaceComparisonOperator_Gt_NotEq",
        '"grad_mass_fast": (1.0 - slow_share) if total > 0 else 0.0,',
        '"grad_mass_fast": (1.0 - slow_share) if total != 0 else 0.0,',
    ): "total = sum w |A| with duration weights w >= 0: never negative",
    (
        _A,
        "core/ReplaceUnaryOperator_USub_UAdd",
        "rows = torch.nonzero(mask.sum(-1) > 0).squeeze(-1)",
        "rows = torch.nonzero(mask.sum(+1) > 0).squeeze(-1)",
    ): "mask is (B, T): dim +1 is dim -1",
    (
        _A,
        "core/ReplaceComparisonOperator_Lt_NotEq",
        "next_mask = mask[:, t + 1] if t + 1 < T else torch.zeros_like(last)",
        "next_mask = mask[:, t + 1] if t + 1 != T else torch.zeros_like(last)",
    ): "t runs over range(T): t + 1 is never above T, so != T is < T",
    (
        _A,
        "core/ReplaceUnaryOperator_USub_UAdd",
        "last = (mask.float() * positions).argmax(-1)  # (B,) index of the last 1 in each row",
        "last = (mask.float() * positions).argmax(+1)  # (B,) index of the last 1 in each row",
    ): "mask is (B, T): dim +1 is dim -1",
    (
        _A,
        "core/ReplaceUnaryOperator_USub_UAdd",
        "rows = torch.nonzero(mask.sum(-1) > 0).squeeze(-1)",
        "rows = torch.nonzero(mask.sum(-1) > 0).squeeze(+1)",
    ): "nonzero of a 1-D tensor is (k, 1): dim +1 is dim -1",
    (
        _A,
        "core/NumberReplacer",
        "rows = torch.nonzero(mask.sum(-1) > 0).squeeze(-1)",
        "rows = torch.nonzero(mask.sum(-1) > 0).squeeze(- 0)",
    ): "rows (k, 1) instead of (k,): indexing with (k, 1) index tensors reads and assigns the "
    "same elements",
    **{
        (
            _A,
            op,
            _ROWS,
            _ROWS.replace(".squeeze(-1)", after),
        ): "nonzero of a 1-D tensor is (k, 1): squeezing dim 1 is squeezing dim -1, and squeezing "
        "dim -2 leaves (k, 1) index tensors (or (1,)), which read and assign the same elements"
        for op, after in (
            ("core/ReplaceUnaryOperator_Delete_USub", ".squeeze(1)"),
            ("core/NumberReplacer", ".squeeze(- 2)"),
            ("core/ReplaceUnaryOperator_USub_Invert", ".squeeze(~1)"),
        )
    },
    (
        _A,
        "core/ReplaceComparisonOperator_Gt_NotEq",
        _ROWS,
        _ROWS.replace("> 0", "!= 0"),
    ): "a sum of a 0/1 mask is never negative",
    (
        _A,
        "core/ReplaceUnaryOperator_Delete_USub",
        _LAST,
        _LAST.replace("argmax(-1)", "argmax(1)"),
    ): "mask is (B, T): dim 1 is dim -1",
    **{
        (
            _A,
            op,
            _POSITIONS,
            _POSITIONS.replace("shape[-1]", after),
        ): "mask is (B, T): dim 1 is dim -1"
        for op, after in (
            ("core/ReplaceUnaryOperator_USub_UAdd", "shape[+1]"),
            ("core/ReplaceUnaryOperator_Delete_USub", "shape[1]"),
        )
    },
    (
        _A,
        "core/ReplaceComparisonOperator_Lt_NotEq",
        "next_value = values[:, t + 1].float() if t + 1 < T else torch.zeros_like(last)",
        "next_value = values[:, t + 1].float() if t + 1 != T else torch.zeros_like(last)",
    ): "t runs over range(T): t + 1 is never above T, so != T is < T",
    (
        _A,
        "core/NumberReplacer",
        "var = reduce((((a - mean) * m) ** 2).sum().reshape(1))[0] / n",
        "var = reduce((((a - mean) * m) ** 2).sum().reshape(1))[ -1] / n",
    ): "a one-element tensor: element -1 is element 0",
    (
        _A,
        "core/NumberReplacer",
        "std_floor: float = 0.0,",
        "std_floor: float = -1.0,",
    ): "a floor below 0 under a std (never negative) changes nothing, as 0 changes nothing",
    (
        _A,
        "core/ReplaceComparisonOperator_Is_LtE",
        "if estimator is AdvantageEstimator.gae:",
        "if estimator <= AdvantageEstimator.gae:",
    ): "a str enum: of 'gae', 'grpo', 'rloo' only 'gae' sorts <= 'gae'",
    (
        _A,
        "core/ReplaceComparisonOperator_Is_Eq",
        "if estimator is AdvantageEstimator.gae:",
        "if estimator == AdvantageEstimator.gae:",
    ): "the estimator is always the enum (LearnerConfig coerces strings): `is` and `==` agree",
    (
        _A,
        "core/ReplaceComparisonOperator_Is_Eq",
        "if estimator is AdvantageEstimator.rloo:",
        "if estimator == AdvantageEstimator.rloo:",
    ): "the estimator is always the enum (LearnerConfig coerces strings): `is` and `==` agree",
    (
        _A,
        "core/ReplaceComparisonOperator_Is_GtE",
        "if estimator is AdvantageEstimator.rloo:",
        "if estimator >= AdvantageEstimator.rloo:",
    ): "a str enum: of the estimators that reach this line (grpo, rloo; gae raised above) only "
    "'rloo' sorts >= 'rloo'",
    (
        _L,
        "core/ReplaceUnaryOperator_Delete_USub",
        "per_seq = (x * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)  # (B,)",
        "per_seq = (x * mask).sum(-1) / mask.sum(1).clamp(min=1.0)  # (B,)",
    ): "mask is (B, T): dim 1 is dim -1",
    (
        _L,
        "core/ReplaceUnaryOperator_USub_UAdd",
        "per_seq = (x * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)  # (B,)",
        "per_seq = (x * mask).sum(+1) / mask.sum(-1).clamp(min=1.0)  # (B,)",
    ): "x and mask are (B, T): dim +1 is dim -1",
    (
        _L,
        "core/ReplaceUnaryOperator_USub_UAdd",
        "per_seq = (x * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)  # (B,)",
        "per_seq = (x * mask).sum(-1) / mask.sum(+1).clamp(min=1.0)  # (B,)",
    ): "mask is (B, T): dim +1 is dim -1",
    **{
        (
            _L,
            op,
            "if estimator is not KLEstimator.k3:",
            f"if estimator {after} KLEstimator.k3:",
        ): "the estimator is always the enum (LearnerConfig coerces strings), whose one member is k3"
        for op, after in (
            ("core/ReplaceComparisonOperator_IsNot_Lt", "<"),
            ("core/ReplaceComparisonOperator_IsNot_NotEq", "!="),
        )
    },
    (
        _L,
        "core/ReplaceComparisonOperator_Lt_LtE",
        "pg_losses = torch.where(advantages < 0, torch.min(pg_losses, -advantages * dual_clip), pg_losses)",
        "pg_losses = torch.where(advantages <= 0, torch.min(pg_losses, -advantages * dual_clip), pg_losses)",
    ): "at A = 0 both branches are 0: pg = max(-0 r, -0 clip(r)) = 0 and min(0, -0 c) = 0",
    (
        _L,
        "core/ReplaceComparisonOperator_Is_GtE",
        "if agg is LossAgg.token_mean:",
        "if agg >= LossAgg.token_mean:",
    ): "a str enum: 'seq_mean' sorts before 'token_mean'",
    (
        _L,
        "core/ReplaceComparisonOperator_Is_Eq",
        "if agg is LossAgg.token_mean:",
        "if agg == LossAgg.token_mean:",
    ): "agg is always the enum (LearnerConfig coerces strings): `is` and `==` agree",
    **{
        (
            "packages/protocol/src/mlerl/protocol/_validate.py",
            "core/NumberReplacer",
            f'or _in_range("{k}", sample.{k}, 0.0, limits.max_duration_s){tail}',
            f'or _in_range("{k}", sample.{k}, -1.0, limits.max_duration_s){tail}',
        ): f"Sample.__post_init__ refuses a negative {k} (on construction and on decode), so "
        "check_sample never sees one: a lower bound of 0 or -1 accepts the same samples"
        for k, tail in (("duration_s", ""), ("generation_s", ")"))
    },
    (
        "packages/learner/src/mlerl/learner/_checkpoint.py",
        "core/ReplaceComparisonOperator_NotEq_Gt",
        "if is_distributed() and torch.distributed.get_rank() != 0:",
        "if is_distributed() and torch.distributed.get_rank() > 0:",
    ): "a rank is never negative: != 0 and > 0 agree",
    (
        "packages/learner/src/mlerl/learner/_checkpoint.py",
        "*",
        "while chunk := f.read(1 << 24):",
        "*",
    ): "the read size only sets how the file is fed to sha256: any positive size gives the same "
    "digest (a size of 0 or less reads nothing or everything, and 1 + 24, 1 * 24, 1 % 24, "
    "1 | 24, 1 ^ 24 are all positive)",
    (
        _R,
        "*",
        "top_failure = cfg.failure + cfg.per_marker * len(MARKERS)",
        "*",
    ): "read only by the normalized range, max(1 + bonus, top_failure), and RewardConfig keeps "
    "failure + per_marker * 7 below -1 (failure < -1, per_marker >= 0): whatever this line "
    "computes instead stays below 1, and the max is 1 + bonus",
    **{
        (
            _R,
            op,
            _SIGMOID,
            _SIGMOID.replace("if x >= 0", after),
        ): "both branches are the logistic function (equal up to rounding); the split only keeps "
        "exp() from overflowing, which it cannot for |x| <= 1"
        for op, after in (
            ("core/ReplaceComparisonOperator_GtE_Gt", "if x > 0"),
            ("core/NumberReplacer", "if x >= -1"),
            ("core/NumberReplacer", "if x >= 1"),
        )
    },
    **{
        (
            _R,
            "core/NumberReplacer",
            _SIGNED,
            _SIGNED.replace("else 0.0", after),
        ): "signed is read only when the run is graded"
        for after in ("else -1.0", "else 1.0")
    },
    **{
        (
            _R,
            "core/NumberReplacer",
            "sign = -1.0 if lower_is_better else 1.0",
            after,
        ): "p = sign (s - b) / (sign (B - b)): the sign's magnitude cancels, only its sign is tested"
        for after in (
            "sign = - 2.0 if lower_is_better else 1.0",
            "sign = -1.0 if lower_is_better else 2.0",
        )
    },
    **{
        (
            _R,
            "core/ReplaceComparisonOperator_Is_Eq",
            line,
            line.replace(" is ", " == ", 1),
        ): "coerced to the enum first (ExecStatus(status), RewardKind(kind) in __post_init__): "
        "`is` and `==` agree"
        for line in (
            "if status is ExecStatus.INFRA_ERROR:",
            "if valid and status is ExecStatus.OK and score is None:",
            "graded = status is ExecStatus.OK and valid and math.isfinite(score)  "
            "# type: ignore[arg-type]",
            'else "no_program" if status is ExecStatus.NOT_RUN',
            'else "invalid_submission" if status is ExecStatus.OK',
            "if cfg.kind is RewardKind.MLAGENT:",
            "if cfg.kind is RewardKind.NORMALIZED:",
            "if cfg.kind is RewardKind.PAPER:",
            "if self.kind is RewardKind.NORMALIZED:",
        )
    },
    (
        _R,
        "core/ReplaceComparisonOperator_Is_LtE",
        "if status is ExecStatus.INFRA_ERROR:",
        "if status <= ExecStatus.INFRA_ERROR:",
    ): "a str enum: no other ExecStatus value sorts <= 'infra_error'",
    (
        _R,
        "core/ReplaceComparisonOperator_Is_LtE",
        'else "no_program" if status is ExecStatus.NOT_RUN',
        'else "no_program" if status <= ExecStatus.NOT_RUN',
    ): "a str enum: of the statuses that reach this line (infra_error returned) only 'not_run' "
    "sorts <= 'not_run'",
    (
        _R,
        "core/ReplaceComparisonOperator_Is_LtE",
        'else "invalid_submission" if status is ExecStatus.OK',
        'else "invalid_submission" if status <= ExecStatus.OK',
    ): "a str enum: of the statuses that reach this line (not_run, infra_error handled above) "
    "only 'ok' sorts <= 'ok' ('oom' and 'output_limit' sort after it)",
    (
        _R,
        "core/ReplaceComparisonOperator_Is_LtE",
        "if cfg.kind is RewardKind.MLAGENT:",
        "if cfg.kind <= RewardKind.MLAGENT:",
    ): "a str enum: 'normalized' and 'paper' sort after 'mlagent'",
    (
        _R,
        "core/ReplaceComparisonOperator_Is_LtE",
        "if cfg.kind is RewardKind.NORMALIZED:",
        "if cfg.kind <= RewardKind.NORMALIZED:",
    ): "in compute_reward only 'normalized' and 'paper' reach these lines (mlagent returned), "
    "and 'paper' sorts after 'normalized' (reward_range's line of the same text is killed: "
    "mlagent's range)",
    (
        _R,
        "core/ReplaceComparisonOperator_Eq_Is",
        'base = cfg.mlagent_invalid if case == "invalid_submission" else cfg.mlagent_error',
        'base = cfg.mlagent_invalid if case is "invalid_submission" else cfg.mlagent_error',
    ): "case is one of compute_reward's string constants, identifier-like and so interned: "
    "`is` and `==` agree",
    **{
        (
            "packages/sandbox/src/mlerl/sandbox/_bwrap.py",
            op,
            _OUTERMOST,
            _OUTERMOST.replace("path == r", f"path {after} r"),
        ): "_outermost walks sorted(set(paths)): every root r kept so far sorts strictly before "
        "path, so path == r (and path < r, path <= r, path is r) is always False"
        for op, after in (
            ("core/ReplaceComparisonOperator_Eq_Is", "is"),
            ("core/ReplaceComparisonOperator_Eq_Lt", "<"),
            ("core/ReplaceComparisonOperator_Eq_LtE", "<="),
        )
    },
    (
        _M,
        "core/NumberReplacer",
        "if np.all(t == t[0]) or np.all(p == p[0]):  # as scipy: exactly constant input -> NaN",
        "if np.all(t == t[ -1]) or np.all(p == p[0]):  # as scipy: exactly constant input -> NaN",
    ): "every value equals the first iff every value equals the last",
    (
        _M,
        "core/ReplaceComparisonOperator_Eq_LtE",
        'if kind == "binary":',
        'if kind <= "binary":',
    ): "kind is 'binary' or 'multiclass' here (others raised above), and 'multiclass' sorts "
    "after 'binary'",
    (
        _M,
        "core/ReplaceAndWithOr",
        "if not (np.all(np.isfinite(t)) and np.all(np.isfinite(p))):",
        "if not (np.all(np.isfinite(t)) or np.all(np.isfinite(p))):",
    ): "with one input non-finite the arithmetic below gives NaN too (its mean is NaN or "
    "inf - inf, so every deviation and the clipped ratio are NaN)",
    (
        _M,
        "core/ReplaceComparisonOperator_Eq_GtE",
        "if y.dtype == object and not isinstance(y[0], str):",
        "if y.dtype >= object and not isinstance(y[0], str):",
    ): "numpy orders dtypes by safe casting: object casts safely to no other dtype, so only "
    "object itself is >= object",
    (
        _M,
        "core/NumberReplacer",
        "if np.all(t == t[0]) or np.all(p == p[0]):  # as scipy: exactly constant input -> NaN",
        "if np.all(t == t[0]) or np.all(p == p[ -1]):  # as scipy: exactly constant input -> NaN",
    ): "every value equals the first iff every value equals the last",
    (
        _M,
        "core/ReplaceComparisonOperator_Eq_LtE",
        "if t.ndim != 2 or t.shape != p.shape or t.shape[0] == 0:",
        "if t.ndim != 2 or t.shape != p.shape or t.shape[0] <= 0:",
    ): "a shape is never negative",
    (
        _M,
        "core/ReplaceComparisonOperator_Eq_GtE",
        "return float((ranks[t == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))",
        "return float((ranks[t >= 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))",
    ): "t holds only 0 and 1 here (checked above)",
    (
        _M,
        "core/NumberReplacer",
        "if denom == 0.0:",
        "if denom == -1.0:",
    ): "when denom is 0 the ratio below is 0 / 0 = NaN as well (denom is never negative)",
    **{
        (
            _W,
            "core/ReplaceComparisonOperator_Eq_LtE",
            before,
            before.replace("== 0", "<= 0"),
        ): "numel() is never negative"
        for before in (
            "if durations.numel() == 0:",
            "if mode is DurationWeighting.none or d.numel() == 0:",
        )
    },
    **{
        (
            _W,
            "core/NumberReplacer",
            before,
            before.replace("floor: float = 0.0", "floor: float = -1.0"),
        ): "dt is never negative (Sample refuses a negative duration_s or generation_s, and dt_s is "
        "their sum), and the learner passes its configured floor (>= 0) to both functions: a "
        "default floor of -1 raises no dt, as a floor of 0 raises none"
        for before in (
            "floor: float = 0.0,",
            "previous: float | None, durations: Tensor, decay: float, floor: float = 0.0",
            "def slot_durations(durations: Tensor, floor: float = 0.0) -> Tensor:",
        )
    },
    (
        _W,
        "core/ReplaceComparisonOperator_LtE_Eq",
        "if mean <= 0.0:",
        "if mean == 0.0:",
    ): "dt >= 0 (durations and the floor are never negative): its mean is never below 0",
    (
        _W,
        "core/ReplaceComparisonOperator_Is_LtE",
        "if mode is DurationWeighting.log:",
        "if mode <= DurationWeighting.log:",
    ): "a str enum: of the modes that reach this line (log, running) only 'log' sorts <= 'log'",
    (
        _W,
        "core/ReplaceComparisonOperator_Is_GtE",
        "if mode is DurationWeighting.running:",
        "if mode >= DurationWeighting.running:",
    ): "a str enum: only 'running' reaches this line (every other mode returned above)",
    (
        "packages/protocol/src/mlerl/protocol/_validate.py",
        "core/ReplaceComparisonOperator_Lt_NotEq",
        "if sample.top_p < 1.0 or sample.top_k > 0:  # truncated sampling: behaviour log-probs",
        "if sample.top_p != 1.0 or sample.top_k > 0:  # truncated sampling: behaviour log-probs",
    ): "top_p is in (0, 1] here (the line above refuses NaN and the rest): < 1 and != 1 agree",
    (
        _R,
        "core/ReplaceComparisonOperator_NotEq_IsNot",
        'if case != "graded":',
        'if case is not "graded":',
    ): "case is one of compute_reward's string constants, identifier-like and so interned: "
    "`is not` and `!=` agree",
    (
        _R,
        "core/ReplaceComparisonOperator_Is_GtE",
        "if cfg.kind is RewardKind.PAPER:",
        "if cfg.kind >= RewardKind.PAPER:",
    ): "a str enum: of the kinds that reach this line (paper, mlagent; normalized returned) "
    "only 'paper' sorts >= 'paper'",
    (
        _A,
        "core/ReplaceUnaryOperator_Delete_USub",
        _ROWS,
        _ROWS.replace("sum(-1)", "sum(1)"),
    ): "mask is (B, T): dim 1 is dim -1",
    (
        _L,
        "core/ReplaceUnaryOperator_Delete_USub",
        "per_seq = (x * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)  # (B,)",
        "per_seq = (x * mask).sum(1) / mask.sum(-1).clamp(min=1.0)  # (B,)",
    ): "x and mask are (B, T): dim 1 is dim -1",
    (
        _M,
        "core/NumberReplacer",
        "if np.all(t == t[0]) or np.all(p == p[0]):  # as scipy: exactly constant input -> NaN",
        "if np.all(t == t[0]) or np.all(p == p[ 1]):  # as scipy: exactly constant input -> NaN",
    ): "every value equals the first iff every value equals the second (two values at least)",
    (
        "packages/protocol/src/mlerl/protocol/_validate.py",
        "core/NumberReplacer",
        '"duration_s", sample.duration_s, 0.0, limits.max_duration_s',
        '"duration_s", sample.duration_s, -1.0, limits.max_duration_s',
    ): "a Sample with duration_s < 0 cannot exist: Sample (and decode) refuse it first",
    # _metrics, the complete run (docs/experiments/test-quality.md)
    (
        _M,
        "core/ReplaceComparisonOperator_NotEq_Gt",
        "first = np.r_[True, xs[1:] != xs[:-1]]  # True where a new run of equal values starts",
        "first = np.r_[True, xs[1:] > xs[:-1]]  # True where a new run of equal values starts",
    ): "xs is x sorted ascending, and finite (the one caller, roc_auc, refuses NaN and "
    "infinity first): a value that differs from the one before it is greater",
    **{
        (
            _M,
            op,
            "if not np.all((t == 0) | (t == 1)):",
            f"if not np.all((t == 0) {after} (t == 1)):",
        ): "t == 0 and t == 1 are boolean arrays never both true: their sum (numpy's + of booleans "
        "is or) and their xor are their or"
        for op, after in (
            ("core/ReplaceBinaryOperator_BitOr_Add", "+"),
            ("core/ReplaceBinaryOperator_BitOr_BitXor", "^"),
        )
    },
    **{
        (
            _M,
            "core/ReplaceComparisonOperator_Eq_LtE",
            "if n_pos == 0 or n_neg == 0:",
            after,
        ): "n_pos counts the ones and n_neg the rest: neither is ever negative"
        for after in ("if n_pos <= 0 or n_neg == 0:", "if n_pos == 0 or n_neg <= 0:")
    },
    (
        _M,
        "core/ReplaceBinaryOperator_Div_FloorDiv",
        "return float((ranks[t == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))",
        "return float((ranks[t == 1].sum() - n_pos * (n_pos + 1) // 2) / (n_pos * n_neg))",
    ): "n_pos (n_pos + 1) is even: / 2 and // 2 give the same number",
    **{
        (
            _M,
            "core/ReplaceComparisonOperator_Eq_LtE",
            before,
            before.replace("== 0:", "<= 0:"),
        ): "a length is never negative"
        for before in (
            "if len(y) == 0:",
            "if len(t) != len(p) or len(t) == 0:",
            "if len(a) != len(b) or len(a) == 0:",
            "if len(preds) != len(answers) or len(preds) == 0:",
        )
    },
    (
        _M,
        "core/ReplaceComparisonOperator_Eq_GtE",
        'if kinds == {"binary", "multiclass"}:',
        'if kinds >= {"binary", "multiclass"}:',
    ): "kinds is the set of the two inputs' label types (one or two of them): it holds both "
    "'binary' and 'multiclass' only when it is exactly those two",
    (
        _M,
        "core/ReplaceComparisonOperator_Gt_NotEq",
        "if len(kinds) > 1:",
        "if len(kinds) != 1:",
    ): "kinds is the set of the two inputs' label types: never empty",
    (
        _M,
        "core/ReplaceComparisonOperator_Eq_Is",
        'if kind == "binary":',
        'if kind is "binary":',
    ): "kind is one of label_type's string constants (or the literal 'multiclass'), "
    "identifier-like and so interned: `is` and `==` agree",
    (
        _M,
        "core/ReplaceComparisonOperator_Eq_LtE",
        "numeric = [np.issubdtype(x.dtype, np.number) or x.dtype == bool for x in (a, b)]",
        "numeric = [np.issubdtype(x.dtype, np.number) or x.dtype <= bool for x in (a, b)]",
    ): "numpy orders dtypes by safe casting: only bool casts safely to bool, so <= bool is "
    "== bool (checked for every kind of dtype)",
    (
        _M,
        "core/ReplaceComparisonOperator_NotEq_IsNot",
        "if numeric[0] != numeric[1]:",
        "if numeric[0] is not numeric[1]:",
    ): "numeric holds Python bools (what issubdtype and dtype == return), singletons: "
    "`is not` and `!=` agree",
    **{
        (
            _M,
            "core/NumberReplacer",
            _QWK_FINITE,
            _QWK_FINITE.replace("numeric[0]", after, 1),
        ): "the line above refuses numeric[0] != numeric[1]: here both are the same"
        for after in ("numeric[ -1]", "numeric[ 1]")
    },
    (
        _M,
        "core/NumberReplacer",
        "if np.all(t == t[0]) or np.all(p == p[0]):  # as scipy: exactly constant input -> NaN",
        "if np.all(t == t[ 1]) or np.all(p == p[0]):  # as scipy: exactly constant input -> NaN",
    ): "every value equals the first iff every value equals the second (two values at least)",
    (
        _M,
        "core/ReplaceComparisonOperator_Eq_LtE",
        "if denom == 0.0:",
        "if denom <= 0.0:",
    ): "denom is a square root: never negative",
    (
        _M,
        "core/ReplaceTrueWithFalse",
        "return float(np.mean([word_jaccard(p, a) for p, a in zip(preds, answers, strict=True)]))",
        "return float(np.mean([word_jaccard(p, a) for p, a in zip(preds, answers, strict=False)]))",
    ): "the lengths are checked equal just above: zip stops at the same place either way",
}

SESSIONS = ROOT / "benchmarks" / "results" / "mutation_sessions"
"""cosmic-ray's session databases (not checked in): a run interrupted by ``--budget-s`` resumes."""


def _annotation_spans(line: str) -> list[tuple[int, int]]:
    """Column spans of the annotations on ``line`` when it is a whole ``def ...:`` header or an
    annotated assignment (``name: X = ...``); else none."""
    import ast

    text, indent = line.strip(), len(line) - len(line.lstrip())
    try:
        tree = ast.parse(text + ("\n    pass" if text.endswith(":") else ""))
    except SyntaxError:
        return []
    nodes = []
    for node in tree.body[:1]:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            nodes += [
                arg.annotation
                for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
                if arg is not None
            ]
            nodes.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            nodes.append(node.annotation)
    return [(indent + n.col_offset, indent + n.end_col_offset) for n in nodes if n is not None]


def rule_equivalent(before: str, after: str) -> str | None:
    """Mutants equivalent by construction, whatever the line: an operator swapped inside an
    annotation (every module here has ``from __future__ import annotations``, so annotations
    are never evaluated): inside ``X | None`` anywhere, or at any place that is an annotation
    of a one-line ``def`` header or an annotated assignment."""
    reason = "operator inside a postponed annotation (never evaluated)"
    start = before.find("| None")
    while start >= 0:
        for op in ("%", "//", "/", "*", "+", "-", "**", "<<", ">>", "&", "^", "@"):
            if before[:start] + op + before[start + 1 :] == after:
                return reason
        start = before.find("| None", start + 1)
    first = next((i for i, (a, b) in enumerate(zip(before, after)) if a != b), None)
    if (
        first is not None
        and before[first] == "|"
        and any(lo <= first < hi for lo, hi in _annotation_spans(before))
    ):
        return reason
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
            before = (
                before or text[1:].strip() and text[1:]
            )  # (a removed decorator: blank lines first)
        elif text.startswith("+") and not text.startswith("+++"):
            after = after or text[1:].strip() and text[1:]
        elif text.startswith(" ") and not before:
            line += 1
    return line, before, after


def summarize(
    module: str, records: Iterable[dict[str, Any]], equivalent: dict[tuple[str, str, str, str], str]
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
        entry = {
            "module": module,
            "line": line,
            "operator": operator,
            "mutation": f"{before.strip()}  ->  {after.strip()}",
        }
        reason = (
            equivalent.get(mutation_key(module, operator, before, after))
            or equivalent.get(mutation_key(module, "*", before, "*"))
            or rule_equivalent(before, after)
        )
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


def merge(
    results: dict[str, Any],
    module: str,
    counts: dict[str, Any],
    survivors: list[dict[str, Any]],
    equivalents: list[dict[str, Any]],
) -> dict[str, Any]:
    """``results`` with ``module``'s entry and lists replaced by this run's."""
    out = {
        "modules": dict(results.get("modules", {})),
        "survivors": [s for s in results.get("survivors", []) if s["module"] != module],
        "equivalent": [e for e in results.get("equivalent", []) if e["module"] != module],
    }
    out["modules"][module] = counts
    out["survivors"] += survivors
    out["equivalent"] += equivalents
    return out


def forget_survivors(session: Path) -> int:
    """Mark the session's surviving mutants as not run (to test them again after new tests)."""
    with sqlite3.connect(session) as db:
        return db.execute("DELETE FROM work_results WHERE test_outcome = 'SURVIVED'").rowcount


_PROBE = r"""
import json, sys
import pytest
out, args = sys.argv[1], json.loads(sys.argv[2])
class Probe:
    durations = {}
    def pytest_runtest_logreport(self, report):
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration
code = pytest.main(args, plugins=[Probe()])
modules = [[n, getattr(m, "__file__", None)] for n, m in list(sys.modules.items())]
with open(out, "w") as f:
    json.dump({"code": int(code), "durations": Probe.durations, "modules": modules}, f)
"""


def is_project_module(name: str, file: str | None) -> bool:
    """A module a mutant may change, directly or through what it imports: this repository's
    packages and tests (re-imported by every mutant's run), as opposed to third-party ones."""
    if name.split(".")[0] in {"mlerl", "tests", "conftest", "__main__", "__mp_main__"}:
        return True
    if not file:
        return False
    file = os.path.realpath(file)
    return file.startswith(str(ROOT) + os.sep) and not file.startswith(
        os.path.realpath(sys.prefix) + os.sep
    )


class _Order:
    """pytest plugin: run the fastest tests first (by the baseline's durations), so that a
    mutant is usually killed before the slow tests run (``-x`` stops at the first failure)."""

    def __init__(self, durations: dict[str, float]) -> None:
        self.durations = durations

    def pytest_collection_modifyitems(self, items: list[Any]) -> None:
        items.sort(key=lambda item: self.durations.get(item.nodeid, 0.0))


class SubprocessRunner:
    """Each mutant's tests in a fresh interpreter (what ``cosmic-ray exec`` does): every run
    imports torch, pytest and the project again (~5-15 s a mutant here)."""

    def __init__(self, module: str, tests: list[str], timeout_s: float) -> None:
        self.command, self.timeout_s = PYTEST + " " + " ".join(tests), timeout_s

    def run(self) -> tuple[str, str]:
        from cosmic_ray.testing import run_tests

        outcome, output = run_tests(self.command, self.timeout_s)
        return outcome.value, output


class ForkRunner:
    """Each mutant's tests in a child forked from one process that imported, once, every
    third-party module the tests import (torch, transformers, numpy, pytest and its plugins):
    the child drops this repository's modules (:func:`is_project_module`), so the tests import
    the mutated module and everything that uses it from disk, then runs ``pytest -x`` with the
    fastest tests first. The same outcome as :class:`SubprocessRunner` (checked on the
    ``_validate`` session: docs/testing.md), without the imports. Threads are set to one
    (``OMP_NUM_THREADS``), the machine being shared."""

    def __init__(self, module: str, tests: list[str], timeout_s: float) -> None:
        import importlib
        import tempfile

        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, "1")
        self.module, self.timeout_s = ROOT / module, timeout_s
        self.args = [
            "-x",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "not slow",
            "-W",
            "ignore::pytest.PytestAssertRewriteWarning",
            *tests,
        ]
        self.log = SESSIONS / f"{Path(module).stem}.out"
        with tempfile.TemporaryDirectory() as tmp:
            # The unmutated run, in a fresh interpreter that writes the bytecode of what it
            # imports (mutants' runs then compile only the mutated module)
            probe = Path(tmp) / "probe.json"
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            subprocess.run(
                [sys.executable, "-c", _PROBE, str(probe), json.dumps(self.args)],
                cwd=ROOT,
                check=False,
                stdout=subprocess.DEVNULL,
                env=env,
            )
            found = json.loads(probe.read_text())
        # no bytecode of a mutant is ever written (the module's own is removed before each
        # run): a mutant written in the same second as the last, with the same size, would
        # otherwise run as the last one's bytecode
        os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
        sys.dont_write_bytecode = True
        self.forget_bytecode()
        if found["code"] != 0:
            raise SystemExit(f"{module}: its tests fail without a mutant ({' '.join(tests)})")
        self.durations = found["durations"]
        for name, file in found["modules"]:
            if not is_project_module(name, file):
                try:
                    importlib.import_module(name)
                except BaseException:  # noqa: BLE001 - a module that only imports in context
                    pass
        for name in [
            n for n, m in sys.modules.items() if is_project_module(n, getattr(m, "__file__", None))
        ]:
            del sys.modules[name]  # (imported by a third-party module's import above)

    def forget_bytecode(self) -> None:
        for stale in self.module.parent.glob(f"__pycache__/{self.module.stem}.*.pyc"):
            stale.unlink(missing_ok=True)

    def run(self) -> tuple[str, str]:
        import importlib
        import time
        import traceback

        self.forget_bytecode()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            code = 3
            try:
                os.setsid()
                fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                for name in [
                    n
                    for n, m in sys.modules.items()
                    if is_project_module(n, getattr(m, "__file__", None))
                ]:
                    del sys.modules[name]
                importlib.invalidate_caches()
                import pytest

                code = int(pytest.main(list(self.args), plugins=[_Order(self.durations)]))
            except BaseException:  # noqa: BLE001
                traceback.print_exc()
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        deadline = time.monotonic() + self.timeout_s
        status = None
        while status is None:
            done, wait_status = os.waitpid(pid, os.WNOHANG)
            if done:
                status = wait_status
            elif time.monotonic() > deadline:
                break
            else:
                time.sleep(0.005)
        try:
            os.killpg(pid, signal.SIGKILL)  # the run's leftovers (or the run, at its timeout)
        except ProcessLookupError:
            pass
        if status is None:
            os.waitpid(pid, 0)
            return "killed", "timeout"
        output = self.log.read_text(errors="replace")[-4000:]
        return ("survived" if os.waitstatus_to_exitcode(status) == 0 else "killed"), output


RUNNERS = {"fork": ForkRunner, "subprocess": SubprocessRunner}


def execute(
    module: str,
    tests: list[str],
    session: Path,
    timeout_s: float,
    budget_s: float | None,
    runner: str = "fork",
) -> None:
    """Test the session's pending mutants of ``module`` (in place on disk, restored after each),
    for at most ``budget_s``. Mutants equivalent by rule (:func:`rule_equivalent`) are recorded
    without running their tests."""
    import time

    from cosmic_ray.mutating import _make_diff, mutate_code
    from cosmic_ray.plugins import get_operator
    from cosmic_ray.util import read_python_source
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkResult

    path = ROOT / module
    if subprocess.run(["git", "diff", "--quiet", "--", module], cwd=ROOT).returncode != 0:
        raise SystemExit(f"{module} differs from git: restore it (git checkout) before a run")
    original, source = path.read_bytes(), read_python_source(path)
    start = time.monotonic()
    with use_db(str(session), WorkDB.Mode.open) as db:
        work: list[tuple[str, str, str]] = []
        skipped = 0
        for item in sorted(db.pending_work_items, key=lambda item: item.job_id):
            mutation = item.mutations[0]
            operator = get_operator(mutation.operator_name)(**(mutation.operator_args or {}))
            mutated = mutate_code(source, operator, mutation.occurrence)
            if mutated is None:
                db.set_result(
                    item.job_id, WorkResult(worker_outcome="no-test", test_outcome="incompetent")
                )
                continue
            diff = "\n".join(_make_diff(source, mutated, mutation.module_path))
            _, before, after = parse_diff(diff)
            if rule_equivalent(before, after):
                skipped += 1
                db.set_result(
                    item.job_id,
                    WorkResult(
                        worker_outcome="skipped",
                        test_outcome="survived",
                        diff=diff,
                        output="not run: equivalent by rule",
                    ),
                )
            else:
                work.append((item.job_id, mutated, diff))
        print(
            f"{module}: {len(work)} mutants to run, {skipped} equivalent by rule not run",
            flush=True,
        )
        if not work:
            return
        tester = RUNNERS[runner](module, tests, timeout_s)
        outcome, output = tester.run()
        if outcome != "survived":
            raise SystemExit(f"{module}: its tests fail without a mutant ({runner}):\n{output}")
        done = 0
        try:
            for job_id, mutated, diff in work:
                if budget_s is not None and time.monotonic() - start > budget_s:
                    break
                path.write_text(mutated, encoding="utf-8")
                try:
                    outcome, output = tester.run()
                finally:
                    path.write_bytes(original)
                db.set_result(
                    job_id,
                    WorkResult(
                        worker_outcome="normal", test_outcome=outcome, output=output, diff=diff
                    ),
                )
                done += 1
                if done % 20 == 0:
                    print(f"  {done}/{len(work)} in {time.monotonic() - start:.0f} s", flush=True)
        finally:
            path.write_bytes(original)
        print(
            f"{module}: ran {done} of {len(work)} in {time.monotonic() - start:.0f} s "
            f"({(time.monotonic() - start) / max(done, 1):.2f} s a mutant, {runner})",
            flush=True,
        )


def source_hash(module: str) -> str:
    import hashlib

    return hashlib.sha256((ROOT / module).read_bytes()).hexdigest()


def _mutants(session: Path) -> set[tuple[Any, ...]]:
    with sqlite3.connect(session) as db:
        return set(
            db.execute(
                "SELECT operator_name, occurrence, start_pos_row, start_pos_col, "
                "end_pos_row, end_pos_col FROM mutation_specs"
            )
        )


def session_is_current(module: str, session: Path, config: Path) -> bool:
    """Whether ``session``'s mutants are those of ``module`` as it is now: by the source's hash
    recorded at init, or (a session from before the hash was kept) by the same mutants at the
    same places as a fresh init's."""
    recorded = session.with_suffix(".sha256")
    if recorded.exists():
        return recorded.read_text().strip() == source_hash(module)
    import tempfile

    cr = str(Path(sys.executable).with_name("cosmic-ray"))
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "fresh.sqlite"
        subprocess.run([cr, "init", str(config), str(fresh)], cwd=ROOT, check=True)
        same = _mutants(fresh) == _mutants(session)
    if same:
        recorded.write_text(source_hash(module))
    return same


def run_module(
    module: str,
    tests: list[str],
    timeout_s: float,
    budget_s: float | None,
    retest_survivors: bool = False,
    run: bool = True,
    runner: str = "fork",
) -> list[dict[str, Any]]:
    """Run (or resume) the mutants of ``module`` against its tests for at most ``budget_s``
    (cosmic-ray's session: its mutants, results and ``dump``; :func:`execute` runs them);
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
        '[cosmic-ray.distributor]\nname = "local"\n'
    )
    cr = [str(Path(sys.executable).with_name("cosmic-ray"))]
    if session.exists() and not session_is_current(module, session, config):
        if not run:
            raise SystemExit(
                f"{module}: its session was made from another version of it; run it again"
            )
        stale = session.with_suffix(".stale.sqlite")
        session.replace(stale)
        print(f"{module} changed since its session was made: a new one ({stale.name} kept)")
    if not session.exists():
        subprocess.run([*cr, "init", str(config), str(session)], cwd=ROOT, check=True)
        session.with_suffix(".sha256").write_text(source_hash(module))
    elif retest_survivors:
        print(module, "survivors to test again:", forget_survivors(session), flush=True)
    if run:
        execute(module, tests, session, timeout_s, budget_s, runner)
    dump = subprocess.run(
        [*cr, "dump", str(session)], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    records = []
    for line in dump.splitlines():
        work_item, result = json.loads(line)
        records.append({"work_item": work_item, "result": result})
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("modules", nargs="*", default=list(MODULES))
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per mutant")
    parser.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="stop each module after this long (resume later)",
    )
    parser.add_argument(
        "--no-run",
        action="store_true",
        help="only summarise the stored sessions again (after editing EQUIVALENT)",
    )
    parser.add_argument(
        "--retest-survivors",
        action="store_true",
        help="test a resumed session's survivors again (after adding tests)",
    )
    parser.add_argument(
        "--runner",
        choices=sorted(RUNNERS),
        default="fork",
        help="fork: children of one process that imported the test's "
        "dependencies once (default); subprocess: a fresh interpreter "
        "per mutant, as cosmic-ray exec",
    )
    args = parser.parse_args()
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    for module in args.modules:
        if args.no_run and not (SESSIONS / f"{Path(module).stem}.sqlite").exists():
            continue  # not run: no entry
        records = run_module(
            module,
            MODULES[module],
            args.timeout,
            args.budget_s,
            args.retest_survivors,
            run=not args.no_run,
            runner=args.runner,
        )
        counts, survivors, equivalents = summarize(module, records, EQUIVALENT)
        results = merge(results, module, counts, survivors, equivalents)
        RESULTS.write_text(json.dumps(results, indent=1) + "\n")
        print(module, counts, flush=True)


if __name__ == "__main__":
    main()
