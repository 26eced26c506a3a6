"""mlerl.learner: the PPO learner with duration-aware policy gradients (FSDP2 on CPU or GPU).

- the process: ``run`` (what ``python -m mlerl.learner`` runs), ``build_learner``,
  ``train_step`` (one update + publish) and ``checkpoint_step`` (its checkpoint, once the
  update's metrics are written), for embedding elsewhere; ``FATAL_FILE``
  (where a rank records why a restart cannot help; read by ``mlerl train``);
- state: ``LearnerConfig`` (every knob; enum fields take their string values),
  ``Learner`` (one PPO update per call), ``ExperienceBuffer`` (the journaled, timestamped
  buffer), ``publish_weights`` (the policy as a ``mlerl.protocol.WeightUpdate``);
- pure math: ``ppo_policy_loss``, ``value_loss``, ``entropy_from_logits``, ``gae`` (with
  ``terminal_rewards``, its per-token rewards), ``group_advantages``, ``duration_weights`` (with
  its ``DurationWeighting`` modes, the running mean it reads, ``update_running_mean``, and its
  diagnostics, ``weight_stats``);
- the decision probe: ``probe_decisions`` (shares of each settings decision among sampled
  answers, what ``learner.probe_samples`` logs) and ``answer_decisions`` (the decision keys
  of one answer);
- token batches: ``collate`` (samples -> padded tensors) and ``token_logprobs``;
- reading a run: ``read_journal`` (the samples the learner stored, in order), ``read_best`` (the
  run's best solution per task, ``RUN_DIR/best/<task>/``); gathering the
  policy: ``full_state_dict`` (what ``publish_weights`` sends, from any rank layout).

Checkpoints, the other config enums and loss helpers are private (tests import them from their
modules). See docs/learner.md.
"""

from mlerl.learner._advantages import gae, group_advantages, terminal_rewards
from mlerl.learner._batch import collate, token_logprobs
from mlerl.learner._best import read_best
from mlerl.learner._buffer import ExperienceBuffer, read_journal
from mlerl.learner._config import DurationWeighting, LearnerConfig
from mlerl.learner._duration_weights import duration_weights, update_running_mean, weight_stats
from mlerl.learner._faults import FATAL_FILE
from mlerl.learner._learner import Learner
from mlerl.learner._losses import entropy_from_logits, ppo_policy_loss, value_loss
from mlerl.learner._probe import answer_decisions, probe_decisions
from mlerl.learner._process import build_learner, checkpoint_step, run, train_step
from mlerl.learner._publish import full_state_dict, publish_weights

__version__ = "0.1.0"

__all__ = [
    "run",
    "FATAL_FILE",
    "build_learner",
    "train_step",
    "checkpoint_step",
    "LearnerConfig",
    "Learner",
    "ExperienceBuffer",
    "publish_weights",
    "full_state_dict",
    "read_journal",
    "read_best",
    "probe_decisions",
    "answer_decisions",
    "ppo_policy_loss",
    "value_loss",
    "entropy_from_logits",
    "gae",
    "terminal_rewards",
    "group_advantages",
    "duration_weights",
    "DurationWeighting",
    "update_running_mean",
    "weight_stats",
    "collate",
    "token_logprobs",
]
