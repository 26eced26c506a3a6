"""The sampling distribution both local engines use, as one pure tensor function.

Log-prob semantics (the same for ``HFEngine`` and ``VLLMEngine``, which runs vLLM with
``logprobs_mode="processed_logprobs"``): the log-prob of a sampled token is taken under the
distribution it was actually drawn from, i.e. ``log_softmax(process(logits))`` where ``process``
divides by the temperature and then masks everything outside top-k and the top-p nucleus to
``-inf``. With the paper's settings (``top_k=-1, top_p=1``) this is ``log_softmax(logits / T)``,
so the learner must score responses with ``logits / T`` for its PPO ratio to start at 1.
Temperature 0 means greedy decoding; its log-probs are those of the raw logits (``T = 1``).
"""

from __future__ import annotations

import torch


def process_logits(
    logits: torch.Tensor, temperature: float, top_k: int, top_p: float
) -> torch.Tensor:
    """Temperature, then top-k, then top-p (nucleus) masking. logits: (B, V) -> (B, V)."""
    out = logits.float()
    if temperature > 0:
        out = out / temperature
    vocab = out.shape[-1]
    if 0 < top_k < vocab:
        kth = torch.topk(out, top_k, dim=-1).values[..., -1:]  # (B, 1)
        out = out.masked_fill(out < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(out, dim=-1, descending=True)
        probs = sorted_logits.softmax(dim=-1)
        # Keep a token if the mass strictly before it is < top_p (the top token always stays).
        before = probs.cumsum(dim=-1) - probs
        drop_sorted = before >= top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        out = out.masked_fill(drop, float("-inf"))
    return out


def sample_rows(
    processed: torch.Tensor, greedy: bool, generators: list[torch.Generator]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw one token per row; return (tokens (B,), their log-probs (B,)).

    Each row has its own generator, so a row's draw does not depend on its batch neighbours.
    """
    logp = torch.log_softmax(processed, dim=-1)  # (B, V)
    if greedy:
        tokens = processed.argmax(dim=-1)
    else:
        probs = logp.exp()
        tokens = torch.stack(
            [torch.multinomial(probs[i], 1, generator=g)[0] for i, g in enumerate(generators)]
        )
    return tokens, logp.gather(-1, tokens[:, None])[:, 0]
