"""One PPO update on a list of Samples: ``Learner.update(batch) -> metrics``.

Reads top to bottom: per-sample scalars (rewards, durations -> duration weights, group
advantages) are computed on the whole batch on every rank; each rank then takes its share of
samples (``rank::world``), computes old/reference log-probs and values without grad, the
advantages, and runs ``ppo_epochs`` x ``minibatches`` optimizer steps, accumulating gradients
over micro-batches.

Guarantees:

- Micro-batching and data parallelism do not change the gradient: every micro-batch loss is
  normalised by the whole minibatch's token (or sequence) count across ranks and multiplied by
  the world size, which FSDP's gradient averaging divides out again. With ``minibatches == 1``
  an N-rank update equals the single-process update up to float rounding.
- INFRA_ERROR samples are removed before anything else and counted (``infra_error_excluded``).
- Minibatch shuffling is seeded by (seed, version, epoch, rank), so an update is a pure function
  of the learner's state and the batch: a resumed run makes the same next update.
- ``version`` is the number of updates applied (the policy version that actors tag samples with).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from mlerl.learner._advantages import (
    gae,
    gains_over_parents,
    group_advantages,
    terminal_rewards,
    whiten,
)
from mlerl.learner._batch import (
    CausalLM,
    TokenBatch,
    collate,
    token_logprobs,
    token_values,
    use_varlen_attention,
)
from mlerl.learner._config import (
    AdvantageEstimator,
    ImproveBaseline,
    ImproveGroup,
    LearnerConfig,
    LossAgg,
    RatioBase,
    Strata,
)
from mlerl.learner._diagnostics import gather_rows, per_sample_stats, split_metrics
from mlerl.learner._duration_weights import duration_weights, update_running_mean, weight_stats
from mlerl.learner._losses import aggregate, kl_penalty, ppo_policy_loss, value_loss
from mlerl.learner._models import (
    enable_checkpointing,
    is_distributed,
    make_critic,
    make_reference,
    shard,
)
from mlerl.protocol import ExecStatus, PromptKind, Sample

Tensor = torch.Tensor


@dataclass
class _Prepared:
    """This rank's share of the batch with everything computed before the first step."""

    tokens: TokenBatch
    old_logprobs: Tensor  # (b, L-1) the ratio's denominator
    is_weights: Tensor | None  # (b, L-1) truncated pi_prox / mu (proximal only)
    ref_logprobs: Tensor | None  # (b, L-1)
    old_values: Tensor | None  # (b, L-1)
    advantages: Tensor  # (b, L-1)
    returns: Tensor | None  # (b, L-1)
    weights: Tensor  # (b,) duration weights


def _cut(t: Tensor, *, micro: Tensor, width: int) -> Tensor:
    """The rows ``micro`` of a (B, T) tensor, cut to the micro-batch's ``width`` tokens."""
    return t[micro][:, :width]


def _all_reduce_sum(x: Tensor) -> Tensor:
    if is_distributed():
        torch.distributed.all_reduce(x, op=torch.distributed.ReduceOp.SUM)
    return x


class Learner:
    """Policy (+ frozen reference, + critic) and their optimizers; ``update`` does one PPO
    update."""

    def __init__(
        self,
        config: LearnerConfig,
        policy: CausalLM,
        *,
        seed: int = 0,
        pad_token_id: int = 0,
        device: str = "cpu",
    ) -> None:
        self.config = config
        self.seed = seed
        """Seeds minibatch shuffling (together with the version, epoch and rank)."""
        self.device = torch.device(device)
        self.pad_token_id = pad_token_id
        self.rank, self.world = (
            (torch.distributed.get_rank(), torch.distributed.get_world_size())
            if is_distributed()
            else (0, 1)
        )
        if self.world > 1 and not config.fsdp:
            raise ValueError("fsdp: must be true when running with more than one process")
        use_varlen_attention(
            policy
        )  # packed micro-batches: no padding computed (reference and critic copy it)
        self.ref = make_reference(policy) if config.kl_coef > 0 else None
        # grpo / rloo take their baseline from the group: a critic would be built, trained and
        # never read
        self.critic = (
            make_critic(config, policy) if config.advantage is AdvantageEstimator.gae else None
        )
        policy.train()
        if config.gradient_checkpointing:
            enable_checkpointing(policy)
            if self.critic is not None:
                enable_checkpointing(self.critic)
        self.policy = shard(policy.to(self.device), config.bf16)
        self.ref = shard(self.ref.to(self.device), config.bf16) if self.ref is not None else None
        self.critic = (
            shard(self.critic.to(self.device), config.bf16) if self.critic is not None else None
        )

        def adamw(params: Any, lr: float) -> torch.optim.AdamW:
            return torch.optim.AdamW(params, lr=lr, weight_decay=config.weight_decay)

        self.policy_opt = adamw(self.policy.parameters(), config.lr)
        self.critic_opt = (
            adamw(self.critic.parameters(), config.critic_lr) if self.critic is not None else None
        )
        self.version = 0
        self.running_dt: float | None = None
        self.tokenizer: Any = None
        """The policy's tokenizer when the decision probe needs one (``build_learner`` sets it)."""
        use_autocast = config.bf16 and not is_distributed()
        self._autocast = (
            (lambda: torch.autocast(self.device.type, dtype=torch.bfloat16))
            if use_autocast
            else nullcontext
        )

    # ------------------------------------------------------------------ update
    def update(self, samples: list[Sample], replay: Sequence[Sample] = ()) -> dict[str, float]:
        """One update on ``samples`` plus ``replay`` (self-imitation, ``mlerl.learner._replay``:
        earlier samples trained on again, whose old log-probs are the policy's own now)."""
        cfg, t0 = self.config, time.time()
        fresh = [s for s in samples if s.exec_status is not ExecStatus.INFRA_ERROR]
        kept, nf = fresh + list(replay), len(fresh)
        n = len(kept)
        if n == 0 or n % (cfg.minibatches * self.world) != 0:
            raise ValueError(
                f"update: {n} trainable samples do not split into "
                f"{cfg.minibatches} minibatches x {self.world} ranks"
            )
        rewards = torch.tensor([s.reward for s in kept], dtype=torch.float32)
        durations = torch.tensor(
            [s.dt_s for s in kept], dtype=torch.float32
        )  # generation + execution
        weights = duration_weights(
            durations,
            cfg.duration_weighting,
            floor=cfg.duration_floor_s,
            clip=cfg.duration_clip,
            running_mean=self.running_dt,
        )
        self.running_dt = update_running_mean(
            self.running_dt, durations[:nf], cfg.duration_ema, cfg.duration_floor_s
        )
        seq_adv = None
        if cfg.advantage is not AdvantageEstimator.gae:
            groups = [advantage_group(s, cfg.improve_group) for s in kept]
            seq_adv = group_advantages(
                gains_over_parents(rewards, [s.parent_reward for s in kept])
                if cfg.improve_baseline is ImproveBaseline.parent
                else rewards,
                groups,
                cfg.advantage,
                std_normalise=cfg.grpo_std,
                std_floor=cfg.grpo_std_floor,
                kl_budget=cfg.entropic_kl,
                strata=(
                    [s.valid_submission for s in kept]
                    if cfg.advantage_strata is Strata.validity
                    else None
                ),
            )
        local = list(range(self.rank, n, self.world))
        prep = self._prepare(
            [kept[i] for i in local],
            rewards[local],
            weights[local],
            None if seq_adv is None else seq_adv[local],
            replayed=torch.tensor([i >= nf for i in local], dtype=torch.bool),
            any_replayed=n > nf,
        )

        sums: dict[str, float] = {}
        for epoch in range(cfg.ppo_epochs):
            g = torch.Generator().manual_seed(
                self.seed * 1_000_003 + self.version * 1_009 + epoch * 101 + self.rank
            )
            for rows in torch.randperm(len(local), generator=g).chunk(cfg.minibatches):
                for k, v in self._step(prep, rows, n // cfg.minibatches).items():
                    sums[k] = sums.get(k, 0.0) + v
        steps = cfg.ppo_epochs * cfg.minibatches
        metrics = {k: v / steps for k, v in sums.items()}
        self.version += 1
        adv = seq_adv if seq_adv is not None else rewards - rewards.mean()
        metrics.update(self._batch_metrics(fresh, weights[:nf], adv[:nf], durations[:nf]))
        if replay:
            metrics.update(
                {
                    "replay/samples": float(n - nf),
                    "replay/reward_mean": float(rewards[nf:].mean()),
                    "replay/advantage_mean": float(adv[nf:].mean()),
                }
            )
        metrics.update(
            {
                "batch/infra_error_excluded": float(len(samples) - nf),
                "version": float(self.version),
                "time/update_s": time.time() - t0,
            }
        )
        metrics.update(self._split_metrics([kept[i] for i in local], prep, nf=nf, local=local))
        return metrics

    def _split_metrics(
        self, samples: list[Sample], prep: _Prepared, *, nf: int, local: list[int]
    ) -> dict[str, float]:
        """Diagnostics by prompt kind and task (``mlerl.learner._diagnostics``), over the whole
        batch (replays left out: they are not the policy's samples): every rank's rows are
        gathered, so each rank logs the same global values."""
        tb = prep.tokens
        stats = per_sample_stats(
            tb.mask,
            tb.behaviour_logprobs,
            prep.advantages,
            prep.weights,
            seq_mean=self.config.loss_agg is LossAgg.seq_mean,
            ref_logprobs=prep.ref_logprobs,
            values=prep.old_values,
            returns=prep.returns,
        )
        rows = [
            {
                "kind": s.prompt_kind.value,
                "task": s.task_id,
                "valid": s.valid_submission,
                "reward": s.reward,
                "score": s.score,
                "private_score": s.private_score,
                "status": s.exec_status.value,
                "exec_s": s.duration_s,
                **{k: v[i] for k, v in stats.items()},
            }
            for i, s in enumerate(samples)
            if local[i] < nf
        ]
        return split_metrics(gather_rows(rows))

    @torch.no_grad()
    def _per_token(self, fn, tokens: TokenBatch) -> Tensor:
        """Run ``fn(sub_batch) -> (b, l-1)`` over micro-batches into a (B, L-1) tensor."""
        out = torch.zeros(tokens.mask.shape, dtype=torch.float32, device=self.device)
        for rows in torch.arange(tokens.mask.shape[0]).split(self.config.micro_batch_size):
            sub = tokens.rows(rows)
            with self._autocast():
                out[rows, : sub.mask.shape[1]] = fn(sub).float() * sub.mask
        return out

    def _prepare(
        self,
        samples: list[Sample],
        rewards: Tensor,
        weights: Tensor,
        seq_adv: Tensor | None,
        *,
        replayed: Tensor,
        any_replayed: bool,
    ) -> _Prepared:
        """``replayed`` (b,): rows with no behaviour log-probs of their own (replays); their
        ratio is taken against the policy's log-probs now, with no importance weight.
        ``any_replayed``: whether any rank's rows hold one (the same on every rank)."""
        cfg = self.config
        tb = collate(samples, self.pad_token_id, self.device)
        mask = tb.mask
        is_weights = None
        replayed = replayed.to(self.device)
        if cfg.ratio_base is RatioBase.proximal or any_replayed:
            # every rank runs these forwards (FSDP), whether or not its rows hold a replay
            own = self._per_token(lambda b: token_logprobs(self.policy, b)[0], tb)
        if cfg.ratio_base is RatioBase.proximal:
            old = own
            is_weights = torch.exp(old - tb.behaviour_logprobs).clamp(max=cfg.is_cap) * mask
            is_weights = torch.where(replayed[:, None], mask, is_weights)
        else:
            old = tb.behaviour_logprobs
            if any_replayed:
                old = torch.where(replayed[:, None], own, old)
        ref = (
            self._per_token(lambda b: token_logprobs(self.ref, b)[0], tb)
            if self.ref is not None
            else None
        )
        values = (
            self._per_token(lambda b: token_values(self.critic, b), tb)
            if self.critic is not None
            else None
        )
        if seq_adv is None:
            assert values is not None  # GAE is the estimator that has a critic
            advantages, returns = gae(
                terminal_rewards(rewards, mask), values, mask, cfg.gamma, cfg.lam
            )
        else:
            advantages, returns = seq_adv.float()[:, None].to(self.device) * mask, None
        if cfg.normalize_advantages:
            advantages = whiten(
                advantages, mask, all_reduce=_all_reduce_sum
            )  # over every rank's tokens
        return _Prepared(
            tb, old, is_weights, ref, values, advantages, returns, weights.to(self.device)
        )

    def _step(self, prep: _Prepared, rows: Tensor, mb_size: int) -> dict[str, float]:
        """One optimizer step on the minibatch ``rows`` (this rank's share), micro-batched."""
        cfg = self.config
        local_tokens = float(prep.tokens.mask[rows].sum())
        if cfg.loss_agg is LossAgg.token_mean:
            # on the learner's device: NCCL reduces CUDA tensors only
            norm = float(
                _all_reduce_sum(
                    torch.tensor([local_tokens], dtype=torch.float64, device=self.device)
                )[0]
            )
        else:
            norm = float(mb_size)
        out: dict[str, float] = {}
        for micro in rows.split(cfg.micro_batch_size):
            sub = prep.tokens.rows(micro)
            cut = functools.partial(_cut, micro=micro, width=sub.mask.shape[1])
            share = float(sub.mask.sum()) / max(local_tokens, 1.0)
            for k, v in self._micro(prep, micro, sub, cut, norm).items():
                out[k] = out.get(k, 0.0) + (v if k.startswith("loss/") else v * share)
        out["grad_norm/policy"] = self._clip_and_step(self.policy, self.policy_opt)
        if self.critic is not None and self.critic_opt is not None:
            out["grad_norm/critic"] = self._clip_and_step(self.critic, self.critic_opt)
        return out

    def _micro(
        self,
        prep: _Prepared,
        micro: Tensor,
        sub: TokenBatch,
        cut: Callable[[Tensor], Tensor],
        norm: float,
    ) -> dict[str, float]:
        cfg, scale = self.config, float(self.world)  # FSDP averages grads over ranks; undo it
        with self._autocast():
            logprobs, entropy = token_logprobs(self.policy, sub, with_entropy=cfg.entropy_coef > 0)
        is_w = cut(prep.is_weights) if prep.is_weights is not None else None
        pg_loss, m = ppo_policy_loss(
            logprobs,
            cut(prep.old_logprobs),
            cut(prep.advantages),
            sub.mask,
            prep.weights[micro],
            clip_ratio=cfg.clip_ratio,
            dual_clip=cfg.dual_clip,
            is_weights=is_w,
            agg=cfg.loss_agg,
            norm=norm,
        )
        loss = pg_loss
        m = {f"policy/{k}": v for k, v in m.items()}
        m["loss/policy"] = float(pg_loss.detach())
        if entropy is not None:
            ent = aggregate(entropy, sub.mask, cfg.loss_agg, norm)
            loss = loss - cfg.entropy_coef * ent
            m["loss/entropy"] = float(ent.detach())
        if prep.ref_logprobs is not None:
            kl = aggregate(
                kl_penalty(logprobs, cut(prep.ref_logprobs), cfg.kl_estimator),
                sub.mask,
                cfg.loss_agg,
                norm,
            )
            loss = loss + cfg.kl_coef * kl
            m["loss/kl"] = float(kl.detach())
        (loss * scale).backward()
        if self.critic is not None:
            with self._autocast():
                values = token_values(self.critic, sub)
            assert prep.old_values is not None and prep.returns is not None  # set with a critic
            vf_loss, vm = value_loss(
                values,
                cut(prep.old_values),
                cut(prep.returns),
                sub.mask,
                clip=cfg.value_clip,
                agg=cfg.loss_agg,
                norm=norm,
            )
            (vf_loss * cfg.value_coef * scale).backward()
            m.update({f"value/{k}": v for k, v in vm.items()})
            m["loss/value"] = float(vf_loss.detach())
        return m

    def _clip_and_step(self, model: torch.nn.Module, opt: torch.optim.Optimizer) -> float:
        max_norm = self.config.grad_clip if self.config.grad_clip > 0 else float("inf")
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        norm = norm.full_tensor() if hasattr(norm, "full_tensor") else norm
        opt.step()
        opt.zero_grad(set_to_none=True)
        return float(norm)

    def _batch_metrics(
        self, kept: list[Sample], weights: Tensor, adv: Tensor, durations: Tensor
    ) -> dict[str, float]:
        now = time.time()
        lag = torch.tensor([self.version - 1 - s.policy_version for s in kept], dtype=torch.float32)
        age = torch.tensor([now - s.t_sampled for s in kept], dtype=torch.float32)
        out = {f"weights/{k}": v for k, v in weight_stats(weights, durations, adv).items()}
        out.update(
            {
                "staleness/versions_mean": float(lag.mean()),
                "staleness/versions_max": float(lag.max()),
                "staleness/age_s_mean": float(age.mean()),
                "staleness/age_s_max": float(age.max()),
                "batch/duration_mean": float(durations.mean()),
                "batch/duration_max": float(durations.max()),
                "batch/reward_mean": float(torch.tensor([s.reward for s in kept]).mean()),
                "batch/valid_frac": sum(s.valid_submission for s in kept) / len(kept),
                "batch/size": float(len(kept)),
            }
        )
        scores = [s.score for s in kept if s.score is not None]
        if scores:
            out["batch/score_max"], out["batch/score_min"] = max(scores), min(scores)
        return out


def advantage_group(sample: Sample, improve_group: ImproveGroup) -> tuple[object, ...]:
    """The group a sample's baseline is taken over: its task and prompt tokens, or, for an
    IMPROVE sample with ``improve_group=task``, its task's IMPROVE samples."""
    if improve_group is ImproveGroup.task and sample.prompt_kind is PromptKind.IMPROVE:
        return (sample.task_id, PromptKind.IMPROVE.value)
    return (sample.task_id, tuple(sample.prompt_ids))
