"""LearnerConfig: every knob of the learner, with the paper's defaults (appendix B.1).

Defaults follow Table 3 of the paper (PPO + GAE critic, gamma = lambda = 1, clip 0.2, entropy
0.001, KL 0.001, value clip 0.5, grad clip 1.0, lr 1e-5, batch 128, bf16, gradient
checkpointing) with one deliberate exception, ``ppo_epochs``: Table 3 lists
``actor_ppo_epochs 100`` next to ``total_epochs 100`` and a mini-batch equal to the batch; 100
optimizer steps on one batch of 128 would leave the PPO trust region after a few steps, so we
read it as a copy of ``total_epochs`` and default to 1 (verl's default). Every range is checked in
``__post_init__`` with :func:`mlerl.protocol.check`; a bad value raises ``ConfigError`` naming
the field.

What the learner shares with the actors (model path, seed, addresses) lives in the run config's
shared sections (``model``, top-level ``seed``, ``transport``); ``python -m mlerl.learner``
reads them there and passes them to :func:`mlerl.learner.run`.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from mlerl.protocol import ConfigError, check


class AdvantageEstimator(str, enum.Enum):
    gae = "gae"
    """GAE with a critic (the paper). With gamma = lambda = 1 and a terminal reward, A_t = R -
    V_t."""
    grpo = "grpo"
    """Group baseline: (R - mean of the prompt's group) / (std + eps) if ``grpo_std`` else R -
    mean."""
    rloo = "rloo"
    """Leave-one-out baseline: R_i - mean of the other samples of the group."""
    entropic = "entropic"
    """Max-seeking group advantage: n q_i - 1 with q = softmax(beta R) over the group, beta per
    group the largest within ``entropic_kl`` nats of uniform (TTT-Discover's objective,
    log E[exp(beta R)]; docs/learner.md)."""


class LossAgg(str, enum.Enum):
    token_mean = "token_mean"
    """Sum of per-token losses / number of response tokens in the (mini)batch (long answers weigh
    more)."""
    seq_mean = "seq_mean"
    """Per-sample token mean, then mean over samples (each sample weighs the same)."""


class DurationWeighting(str, enum.Enum):
    none = "none"
    """All weights 1 (standard PPO)."""
    paper = "paper"
    """Equation 3 rescaled: w_i = dt_i / mean(dt) over the batch."""
    clipped = "clipped"
    """Paper weights clipped to [0, ``duration_clip``] and renormalised to mean 1."""
    log = "log"
    """w_i = log1p(dt_i / mean dt), renormalised to mean 1 (sub-linear, lower variance, biased)."""
    running = "running"
    """w_i = dt_i / running mean of dt over past batches (a scale that does not jump per batch)."""


class RatioBase(str, enum.Enum):
    behaviour = "behaviour"
    """PPO ratio pi_theta / mu against the behaviour log-probs that came with each sample."""
    proximal = "proximal"
    """Decoupled PPO: ratio against the learner's own log-probs at the start of the update
    (the proximal policy), times a truncated importance weight min(pi_prox / mu, ``is_cap``)."""


class KLEstimator(str, enum.Enum):
    k3 = "k3"
    """r - 1 - log r with r = pi_ref / pi: its value is an unbiased, non-negative estimate of
    KL(pi || pi_ref); as a loss term its expected gradient is that of KL(pi_ref || pi) (see
    docs/learner.md). ``k1`` (log pi - log pi_ref) was removed: as a loss term its expected
    gradient is exactly 0 (E_pi[grad log pi] = 0), so it only added noise."""


class CriticKind(str, enum.Enum):
    copy = "copy"
    """A separate critic: a copy of the policy's decoder with a scalar value head (the paper)."""
    none = "none"
    """No critic (only valid with a group baseline estimator)."""


class ImproveGroup(str, enum.Enum):
    task = "task"
    """All IMPROVE samples of a task in the batch form one group: revisions compete with each
    other across parents. Scratch samples keep their prompt groups. The default: no prompt kind
    then has an advantage that is zero by construction."""
    prompt = "prompt"
    """An IMPROVE sample's group is its prompt, like any sample's: a parent improved once forms a
    group of one (advantage 0 by construction); revisions of one parent
    (``actors.improvement.revisions``) share it."""


class Strata(str, enum.Enum):
    none = "none"
    """A group's samples are compared with each other whatever they are."""
    validity = "validity"
    """Samples with and without a valid submission form two strata of each group: the strata are
    ranked against each other, and the samples of each stratum among themselves at that
    stratum's own scale (``group_advantages``), so one failure in a group does not mute the
    differences between its working programs."""


class ImproveBaseline(str, enum.Enum):
    group = "group"
    """An IMPROVE sample's reward enters its group baseline as it is: revisions of good parents
    look good whatever they changed."""
    parent = "parent"
    """An IMPROVE sample's reward minus its parent's (``Sample.parent_reward``) enters the group
    baseline: what the revision gained. The parent's reward is in the prompt's state, not the
    action, so subtracting it leaves the gradient's expectation unchanged; a sample without
    the field keeps its reward."""


class BatchPolicy(str, enum.Enum):
    first_completed = "first_completed"
    """The paper's Algorithm 1: the B samples that completed first; later ones wait."""
    oldest_first = "oldest_first"
    """The B samples sampled earliest (smallest t_sampled): slow samples are not passed over."""


@dataclass
class LearnerConfig:
    batch_size: int = 128
    """B: samples per update (train_batch_size)."""
    batch_policy: BatchPolicy = BatchPolicy.first_completed
    """Which B samples of the buffer form the next batch."""
    max_pending_samples: int = 0
    """Backpressure: at most this many samples received and not yet consumed by an update; at
    the bound the learner stops acking new samples and tells the actors (heartbeat ``full``),
    which stop starting work until it has room (docs/protocol.md "Backpressure"). 0: 4 * B.
    Must be >= B."""
    max_pending_bytes: int = 1 << 30
    """Backpressure in bytes (encoded samples): the same as ``max_pending_samples``, counted in
    bytes; never applied below B pending samples, so an update can always be formed."""
    ppo_epochs: int = 1
    """Passes over each batch (see the module docstring for why not 100)."""
    minibatches: int = 1
    """Optimizer steps per epoch; the batch is split into this many minibatches (128/128 = 1)."""
    micro_batch_size: int = 8
    """Samples per forward/backward; gradients accumulate to the minibatch's exact gradient."""
    lr: float = 1e-5
    """Policy AdamW learning rate."""
    critic_lr: float = 1e-5
    """Critic AdamW learning rate."""
    weight_decay: float = 0.0
    """AdamW weight decay (policy and critic)."""
    grad_clip: float = 1.0
    """Max global gradient norm (policy and critic separately); 0 disables."""
    clip_ratio: float = 0.2
    """PPO epsilon: the ratio is clipped to [1 - eps, 1 + eps]."""
    dual_clip: float | None = None
    """If set (> 1), bounds the loss of negative-advantage tokens at dual_clip * |A| (dual-clip
    PPO)."""
    ratio_base: RatioBase = RatioBase.behaviour
    """What the PPO ratio is taken against."""
    is_cap: float = 2.0
    """Truncation of the behaviour importance weight in ``proximal`` mode."""
    entropy_coef: float = 0.001
    """Entropy bonus coefficient (subtracted from the loss)."""
    kl_coef: float = 0.001
    """KL to the frozen initial policy; 0 disables the reference model."""
    kl_estimator: KLEstimator = KLEstimator.k3
    """Per-token KL estimator used in the loss."""
    advantage: AdvantageEstimator = AdvantageEstimator.gae
    """Advantage estimator."""
    gamma: float = 1.0
    """GAE discount over response tokens."""
    lam: float = 1.0
    """GAE lambda."""
    grpo_std: bool = False
    """Divide GRPO advantages by the group's std (Dr. GRPO argues against it; off by default)."""
    grpo_std_floor: float = 0.0
    """With ``grpo_std``: divide by max(group std, this) instead, in reward units. Without it a
    group of near-identical programs (RMSLE 0.04002 vs 0.04013) gets advantages of +-1 from
    noise; with a floor of 0.01 those become +-0.005 while real differences keep their size.
    Task-dependent (the reward is the task's metric); batch whitening (``normalize_advantages``)
    rescales the batch afterwards and undoes it, so use it without whitening."""
    improve_group: ImproveGroup = ImproveGroup.task
    """With a group baseline (``grpo``/``rloo``): the group of an IMPROVE sample.
    ``task`` by default, so a revision used once is not a group of one with advantage 0; over
    held-out seeds 3-5 it scored the same as ``prompt`` (docs/experiments/improve-group.md)."""
    advantage_strata: Strata = Strata.none
    """With a group baseline (``grpo``/``rloo``): split each group into strata (``validity``: a
    valid submission or not) and add a within-stratum advantage to the strata's ranking
    (docs/experiments/advantage-strata.md; off by default)."""
    improve_baseline: ImproveBaseline = ImproveBaseline.group
    """With a group baseline (``grpo``/``rloo``): what an IMPROVE sample is compared on
    (``parent``: its gain over the solution it revised; docs/learner.md, Advantages)."""
    entropic_kl: float = math.log(2)
    """With ``advantage: entropic``: the KL budget (nats) of each group's tilted weights from
    uniform; larger puts more of the weight on the group's best sample (ln n: all of it)."""
    replay_best: int = 0
    """Self-imitation: each update also trains on the run's ``replay_best`` best distinct
    solutions per task so far (valid, ranked on the public score, from earlier batches), each
    as an answer to the task's scratch prompt and a member of its scratch group, so the group
    baseline gives it its advantage. Its old log-probs are the policy's own at the start of the
    update. Only answers that hold their whole program are kept (not ``edit``-format
    revisions). 0: off (docs/learner.md, Self-imitation)."""
    normalize_advantages: bool = False
    """Whiten advantages over the batch (masked), as some PPO variants do."""
    critic: CriticKind = CriticKind.copy
    """Critic architecture, used only by ``advantage: gae``. With ``grpo`` / ``rloo`` the baseline
    comes from the group, so no critic is built whatever this says (``copy`` and ``none`` behave
    the same): a critic nobody reads would only cost memory and a value loss."""
    value_clip: float = 0.5
    """Value-loss clipping range around the old values (critic_cliprange_value)."""
    value_coef: float = 1.0
    """Scale of the critic loss (the critic has its own optimizer, so this only rescales its lr)."""
    loss_agg: LossAgg = LossAgg.token_mean
    """How per-token losses are reduced."""
    duration_weighting: DurationWeighting = DurationWeighting.paper
    """Per-sample weight on the policy-gradient term (the paper's contribution)."""
    duration_floor_s: float = 0.0
    """dt (``Sample.dt_s``: measured generation + execution seconds) is raised to at least this
    before weighting; 0: as measured."""
    duration_clip: float = 5.0
    """Upper bound of ``clipped`` weights (in units of the batch mean)."""
    duration_ema: float = 0.9
    """Decay of the ``running`` mean of dt."""
    bf16: bool = True
    """bf16 mixed precision (FSDP2 MixedPrecisionPolicy / autocast), fp32 master weights."""
    gradient_checkpointing: bool = True
    """Recompute activations in backward."""
    torch_threads: int = 0
    """CPU threads per learner process (``torch.set_num_threads``); 0 keeps torch's default.
    Set 1 on a small CPU host shared with actors and sandboxed programs: measured on 2 cores
    under load, a tiny-model update took 2.46 s with 2 threads and 0.036 s with 1
    (`benchmarks/throughput/learner_vs_trl.py --threads N`)."""
    fsdp: bool = True
    """Shard with FSDP2 (fully_shard per decoder layer) when torch.distributed is initialised."""
    collective_timeout_s: float = 600.0
    """With several ranks: a collective that waits longer raises (a hung peer becomes an error
    and the group is restarted). Rank 0 sends the others a keep-alive every quarter of it while
    it waits for samples, so a slow actor never trips it; it must cover the slowest single
    collective (a checkpoint's or publish's gather)."""
    publish_inline_max_bytes: int = 64 * 1024 * 1024
    """Weights up to this size travel inline in the WeightUpdate; larger go to a file."""
    probe_samples: int = 0
    """The decision probe (``mlerl.learner._probe``): answers sampled per task on the scratch
    prompt after every ``probe_every`` updates (and before the first), their decisions' shares
    logged to the ``probe`` metrics stream; 0: off. One process only (a sharded policy is not
    probed)."""
    probe_every: int = 1
    """Updates between probes."""
    probe_max_new_tokens: int = 320
    """Token cap of each probe answer (the actors' ``max_new_tokens`` is the natural value)."""
    checkpoint_every: int = 10
    """Updates between checkpoints (0: never)."""
    keep_checkpoints: int = 2
    """Complete checkpoints kept on disk (older ones are deleted after a new one commits)."""
    max_updates: int = 0
    """Stop after this many updates (0: run until stopped)."""
    max_duration_s: float = 86400.0
    """Samples whose execution ``duration_s`` exceeds this are refused (it sets Δt weights)."""

    @property
    def pending_bound(self) -> int:
        """``max_pending_samples``, with 0 resolved to 4 * B."""
        return self.max_pending_samples or 4 * self.batch_size

    def __post_init__(self) -> None:
        kl_estimator = getattr(self.kl_estimator, "value", self.kl_estimator)
        check(
            kl_estimator != "k1",
            "kl_estimator",
            "'k1' was removed: as a loss term its expected gradient is 0; use 'k3' "
            "(docs/learner.md)",
        )
        for name, enum_type in _ENUM_FIELDS.items():
            value = getattr(self, name)
            try:
                setattr(self, name, enum_type(value))
            except ValueError:
                choices = ", ".join(e.value for e in enum_type)
                raise ConfigError(
                    name, f"unknown value {value!r}; choose one of {choices}"
                ) from None
        check(self.batch_size >= 1, "batch_size", "must be >= 1")
        check(self.torch_threads >= 0, "torch_threads", "must be >= 0 (0: torch's default)")
        check(
            math.isfinite(self.collective_timeout_s) and self.collective_timeout_s >= 4,
            "collective_timeout_s",
            "must be finite and >= 4",
        )
        check(
            self.max_pending_samples == 0 or self.max_pending_samples >= self.batch_size,
            "max_pending_samples",
            "must be 0 (4 * B) or >= batch_size",
        )
        check(self.max_pending_bytes > 0, "max_pending_bytes", "must be > 0")
        check(self.ppo_epochs >= 1, "ppo_epochs", "must be >= 1")
        check(self.minibatches >= 1, "minibatches", "must be >= 1")
        check(self.batch_size % self.minibatches == 0, "minibatches", "must divide batch_size")
        check(self.micro_batch_size >= 1, "micro_batch_size", "must be >= 1")
        check(self.lr > 0 and self.critic_lr > 0, "lr", "learning rates must be > 0")
        check(self.weight_decay >= 0, "weight_decay", "must be >= 0")
        check(self.grad_clip >= 0, "grad_clip", "must be >= 0 (0 disables)")
        check(0 < self.clip_ratio < 1, "clip_ratio", "must be in (0, 1)")
        check(self.dual_clip is None or self.dual_clip > 1, "dual_clip", "must be > 1 or None")
        check(self.is_cap >= 1, "is_cap", "must be >= 1")
        check(self.entropy_coef >= 0, "entropy_coef", "must be >= 0")
        check(self.kl_coef >= 0, "kl_coef", "must be >= 0")
        check(0 <= self.gamma <= 1, "gamma", "must be in [0, 1]")
        check(0 <= self.lam <= 1, "lam", "must be in [0, 1]")
        check(self.grpo_std_floor >= 0, "grpo_std_floor", "must be >= 0")
        check(
            math.isfinite(self.entropic_kl) and self.entropic_kl > 0,
            "entropic_kl",
            "must be finite and > 0",
        )
        check(self.value_clip > 0, "value_clip", "must be > 0")
        check(self.value_coef > 0, "value_coef", "must be > 0")
        check(
            not (self.advantage is AdvantageEstimator.gae and self.critic is CriticKind.none),
            "critic",
            "advantage 'gae' needs a critic; use 'grpo' or 'rloo' without one",
        )
        check(
            self.advantage is not AdvantageEstimator.gae or self.advantage_strata is Strata.none,
            "advantage_strata",
            "needs a group baseline (advantage 'grpo' or 'rloo'); GAE has no groups to split",
        )
        check(
            self.advantage is not AdvantageEstimator.gae
            or self.improve_baseline is ImproveBaseline.group,
            "improve_baseline",
            "needs a group baseline (advantage 'grpo' or 'rloo'); GAE's critic is the baseline",
        )
        check(self.replay_best >= 0, "replay_best", "must be >= 0 (0: off)")
        check(
            self.advantage is not AdvantageEstimator.gae or self.replay_best == 0,
            "replay_best",
            "needs a group baseline (advantage 'grpo', 'rloo' or 'entropic')",
        )
        check(self.duration_floor_s >= 0, "duration_floor_s", "must be >= 0")
        check(self.duration_clip >= 1, "duration_clip", "must be >= 1")
        check(0 <= self.duration_ema < 1, "duration_ema", "must be in [0, 1)")
        check(self.publish_inline_max_bytes >= 0, "publish_inline_max_bytes", "must be >= 0")
        check(self.probe_samples >= 0, "probe_samples", "must be >= 0 (0: off)")
        check(self.probe_every >= 1, "probe_every", "must be >= 1")
        check(self.probe_max_new_tokens >= 1, "probe_max_new_tokens", "must be >= 1")
        check(self.checkpoint_every >= 0, "checkpoint_every", "must be >= 0")
        check(self.keep_checkpoints >= 1, "keep_checkpoints", "must be >= 1")
        check(self.max_updates >= 0, "max_updates", "must be >= 0")
        check(
            math.isfinite(self.max_duration_s) and self.max_duration_s > 0,
            "max_duration_s",
            "must be finite and > 0",
        )


_ENUM_FIELDS: dict[str, type[enum.Enum]] = {
    "batch_policy": BatchPolicy,
    "ratio_base": RatioBase,
    "kl_estimator": KLEstimator,
    "advantage": AdvantageEstimator,
    "critic": CriticKind,
    "loss_agg": LossAgg,
    "duration_weighting": DurationWeighting,
    "improve_group": ImproveGroup,
    "advantage_strata": Strata,
    "improve_baseline": ImproveBaseline,
}
