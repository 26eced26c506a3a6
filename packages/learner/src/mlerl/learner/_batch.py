"""Samples -> padded tensors, and per-token log-probs of a causal LM.

Layout: each row is ``prompt_ids + response_ids``, right-padded to the longest row: input_ids
and attention_mask are (B, L). Per-token quantities live on the L - 1 "next-token" positions:
position t holds log p(token_{t+1} | tokens_{<=t}); ``mask`` (B, L - 1) is 1 where token_{t+1}
is a response token. The behaviour log-probs of each sample are placed on those positions, so
every per-token tensor shares one coordinate system.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mlerl.protocol import Sample

from mlerl.learner._losses import entropy_from_logits

Tensor = torch.Tensor


@dataclass
class TokenBatch:
    input_ids: Tensor  # (B, L)
    attention_mask: Tensor  # (B, L)
    mask: Tensor  # (B, L-1) response-token mask
    behaviour_logprobs: Tensor  # (B, L-1), 0 off the mask

    def rows(self, idx: Tensor | list[int]) -> TokenBatch:
        """The given rows, trimmed to their longest sequence."""
        am = self.attention_mask[idx]
        length = int(am.sum(-1).max()) if am.numel() else 1
        return TokenBatch(
            input_ids=self.input_ids[idx][:, :length],
            attention_mask=am[:, :length],
            mask=self.mask[idx][:, : length - 1],
            behaviour_logprobs=self.behaviour_logprobs[idx][:, : length - 1],
        )


def collate(samples: list[Sample], pad_id: int = 0, device: str | torch.device = "cpu") -> TokenBatch:
    """Pad samples into a :class:`TokenBatch`. Samples need at least one response token."""
    for s in samples:
        if not s.response_ids or not s.prompt_ids:
            raise ValueError(f"sample {s.sample_id}: needs non-empty prompt_ids and response_ids to be trained on")
    L = max(len(s.prompt_ids) + len(s.response_ids) for s in samples)
    B = len(samples)
    input_ids = torch.full((B, L), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((B, L), dtype=torch.long)
    mask = torch.zeros((B, L - 1), dtype=torch.float32)
    behaviour = torch.zeros((B, L - 1), dtype=torch.float32)
    for i, s in enumerate(samples):
        p, r = len(s.prompt_ids), len(s.response_ids)
        input_ids[i, : p + r] = torch.tensor(list(s.prompt_ids) + list(s.response_ids), dtype=torch.long)
        attention_mask[i, : p + r] = 1
        # response token j sits at input position p + j, predicted at position p + j - 1
        mask[i, p - 1 : p - 1 + r] = 1.0
        behaviour[i, p - 1 : p - 1 + r] = torch.tensor(s.behaviour_logprobs, dtype=torch.float32)
    to = lambda t: t.to(device)  # noqa: E731
    return TokenBatch(to(input_ids), to(attention_mask), to(mask), to(behaviour))


def token_logprobs(
    model: torch.nn.Module, batch: TokenBatch, with_entropy: bool = False, temperature: float = 1.0
) -> tuple[Tensor, Tensor | None]:
    """log p(token_{t+1} | prefix) at every position, (B, L-1) fp32; entropy too if asked.

    ``temperature`` divides the logits first: the actors' engines report behaviour log-probs
    of the distribution they sampled from (logits / T), so the learner must score the same
    distribution for the PPO ratio to start at exactly 1.

    The LM head runs only from the first position any row's ``mask`` selects (``logits_to_keep``):
    positions before it, prompt tokens of every row, are returned as 0 and never used by the
    masked losses. With the vocabulary head a large share of a small model's compute, this
    skips most of the work on long prompts."""
    length = batch.input_ids.shape[1]
    active = batch.mask.any(dim=0).nonzero()
    first = int(active[0]) if len(active) else length - 1  # first predicting position used
    out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False,
                logits_to_keep=length - first)
    logits = out.logits[:, :-1].float()  # (B, L-1-first, V): positions first .. L-2
    if temperature != 1.0:
        logits = logits / temperature
    targets = batch.input_ids[:, first + 1 :]
    # gather - logsumexp avoids a second (B, L, V) tensor next to the logits
    kept = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    logprobs = torch.nn.functional.pad(kept, (first, 0))  # (B, L-1)
    entropy = None
    if with_entropy:
        entropy = torch.nn.functional.pad(entropy_from_logits(logits), (first, 0))
    return logprobs, entropy
