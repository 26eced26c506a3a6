"""mlerl.learner: the PPO learner with duration-aware policy gradients (FSDP2 on CPU or GPU).

- the process: ``run`` (what ``python -m mlerl.learner`` runs), ``build_learner`` and
  ``train_step`` (one update + publish + checkpoint, for embedding elsewhere), ``FATAL_FILE``
  (where a rank records why a restart cannot help; read by ``mlerl train``);
- state: ``LearnerConfig`` (every knob; enum fields take their string values),
  ``Learner`` (one PPO update per call), ``ExperienceBuffer`` (the journaled, timestamped
  buffer), ``publish_weights`` (the policy as a ``mlerl.protocol.WeightUpdate``);
- pure math: ``ppo_policy_loss``, ``value_loss``, ``gae``, ``group_advantages``,
  ``duration_weights`` (with its ``DurationWeighting`` modes);
- token batches: ``collate`` (samples -> padded tensors) and ``token_logprobs``.

Checkpoints, the journal reader, the other config enums and loss helpers are private (tests
import them from their modules). See docs/learner.md.
"""

from mlerl.learner._advantages import gae, group_advantages
from mlerl.learner._batch import collate, token_logprobs
from mlerl.learner._buffer import ExperienceBuffer
from mlerl.learner._config import DurationWeighting, LearnerConfig
from mlerl.learner._faults import FATAL_FILE
from mlerl.learner._learner import Learner
from mlerl.learner._losses import ppo_policy_loss, value_loss
from mlerl.learner._publish import publish_weights
from mlerl.learner._run import build_learner, run, train_step
from mlerl.learner._weights import duration_weights

__version__ = "0.1.0"

__all__ = [
    "run",
    "FATAL_FILE",
    "build_learner",
    "train_step",
    "LearnerConfig",
    "Learner",
    "ExperienceBuffer",
    "publish_weights",
    "ppo_policy_loss",
    "value_loss",
    "gae",
    "group_advantages",
    "duration_weights",
    "DurationWeighting",
    "collate",
    "token_logprobs",
]
