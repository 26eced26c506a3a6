"""mlerl.learner: the PPO learner with duration-aware policy gradients (FSDP2 on CPU or GPU).

Pure math: :func:`ppo_policy_loss`, :func:`value_loss`, :func:`kl_penalty`, :func:`gae`,
:func:`group_advantages`, :func:`duration_weights`. State: :class:`ExperienceBuffer` (the
journaled, timestamped buffer), :class:`Learner` (one PPO update per call), checkpoints and
weight publication. The process entry point is ``python -m mlerl.learner``.
"""

from mlerl.learner._advantages import gae, group_advantages, terminal_rewards, whiten
from mlerl.learner._batch import TokenBatch, collate, token_logprobs
from mlerl.learner._buffer import ExperienceBuffer, JournalError, completion_time, read_journal
from mlerl.learner._checkpoint import (
    CheckpointError,
    complete_checkpoints,
    latest_checkpoint,
    load_checkpoint,
    restore_checkpoint,
    save_checkpoint,
)
from mlerl.learner._config import (
    AdvantageEstimator,
    BatchPolicy,
    CriticKind,
    DurationWeighting,
    KLEstimator,
    LearnerConfig,
    LossAgg,
    RatioBase,
)
from mlerl.learner._learner import Learner
from mlerl.learner._losses import aggregate, entropy_from_logits, kl_penalty, ppo_policy_loss, value_loss
from mlerl.learner._models import ValueModel, make_critic, make_reference, shard
from mlerl.learner._run import build_learner, run, train_step
from mlerl.learner._publish import full_state_dict, load_weight_update, publish_weights
from mlerl.learner._weights import duration_weights, slot_durations, update_running_mean, weight_stats

__version__ = "0.1.0"

__all__ = [
    "AdvantageEstimator",
    "BatchPolicy",
    "CriticKind",
    "DurationWeighting",
    "ExperienceBuffer",
    "JournalError",
    "KLEstimator",
    "Learner",
    "LearnerConfig",
    "LossAgg",
    "RatioBase",
    "TokenBatch",
    "ValueModel",
    "aggregate",
    "build_learner",
    "run",
    "train_step",
    "collate",
    "CheckpointError",
    "complete_checkpoints",
    "completion_time",
    "duration_weights",
    "entropy_from_logits",
    "full_state_dict",
    "gae",
    "group_advantages",
    "kl_penalty",
    "latest_checkpoint",
    "load_checkpoint",
    "load_weight_update",
    "make_critic",
    "make_reference",
    "ppo_policy_loss",
    "publish_weights",
    "read_journal",
    "restore_checkpoint",
    "save_checkpoint",
    "shard",
    "slot_durations",
    "terminal_rewards",
    "token_logprobs",
    "update_running_mean",
    "value_loss",
    "weight_stats",
    "whiten",
]
