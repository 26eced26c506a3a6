"""Samples -> padded tensors, and per-token log-probs of a causal LM.

Layout: each row is ``prompt_ids + response_ids``, right-padded to the longest row: input_ids
and attention_mask are (B, L). Per-token quantities live on the L - 1 "next-token" positions:
position t holds log p(token_{t+1} | tokens_{<=t}); ``mask`` (B, L - 1) is 1 where token_{t+1}
is a response token. The behaviour log-probs of each sample are placed on those positions, so
every per-token tensor shares one coordinate system.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import torch

from mlerl.learner._losses import entropy_from_logits
from mlerl.protocol import Sample

CausalLM = Any
"""A Hugging Face causal LM (a ``transformers.PreTrainedModel``). Typed Any: torch types every
attribute of a module as ``Tensor | Module``, and the code reads the model's own (``config``,
``base_model_prefix``, ``get_output_embeddings``, ``save_pretrained``)."""

Tensor = torch.Tensor


@dataclass
class TokenBatch:
    input_ids: Tensor  # (B, L)
    attention_mask: Tensor  # (B, L)
    mask: Tensor  # (B, L-1) response-token mask
    behaviour_logprobs: Tensor  # (B, L-1), 0 off the mask
    temperature: Tensor | None = None  # (B,) each sample's sampling temperature; None: 1

    def rows(self, idx: Tensor | list[int]) -> TokenBatch:
        """The given rows, trimmed to their longest sequence."""
        am = self.attention_mask[idx]
        length = int(am.sum(-1).max()) if am.numel() else 1
        return TokenBatch(
            input_ids=self.input_ids[idx][:, :length],
            attention_mask=am[:, :length],
            mask=self.mask[idx][:, : length - 1],
            behaviour_logprobs=self.behaviour_logprobs[idx][:, : length - 1],
            temperature=self.temperature[idx] if self.temperature is not None else None,
        )


def collate(
    samples: list[Sample], pad_id: int = 0, device: str | torch.device = "cpu"
) -> TokenBatch:
    """Pad samples into a :class:`TokenBatch`. Samples need at least one response token."""
    for s in samples:
        if not s.response_ids or not s.prompt_ids:
            raise ValueError(
                f"sample {s.sample_id}: needs non-empty prompt_ids and response_ids to be trained "
                "on"
            )
    L = max(len(s.prompt_ids) + len(s.response_ids) for s in samples)
    B = len(samples)
    input_ids = torch.full((B, L), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((B, L), dtype=torch.long)
    mask = torch.zeros((B, L - 1), dtype=torch.float32)
    behaviour = torch.zeros((B, L - 1), dtype=torch.float32)
    for i, s in enumerate(samples):
        p, r = len(s.prompt_ids), len(s.response_ids)
        input_ids[i, : p + r] = torch.tensor(
            list(s.prompt_ids) + list(s.response_ids), dtype=torch.long
        )
        attention_mask[i, : p + r] = 1
        # response token j sits at input position p + j, predicted at position p + j - 1
        mask[i, p - 1 : p - 1 + r] = 1.0
        behaviour[i, p - 1 : p - 1 + r] = torch.tensor(s.behaviour_logprobs, dtype=torch.float32)
    to = lambda t: t.to(device)  # noqa: E731 - a one-line local helper reads best as a lambda
    temperature = torch.tensor([s.temperature for s in samples], dtype=torch.float32)
    return TokenBatch(to(input_ids), to(attention_mask), to(mask), to(behaviour), to(temperature))


VARLEN_ATTENTION = "mlerl_sdpa_varlen"
"""An attention implementation that is PyTorch SDPA, except that when the forward call carries
``cu_seq_lens_q`` (packed sequences) it runs causal SDPA on each sequence's slice separately:
variable-length attention without padding, for CPU and any GPU without flash-attention. The
argument names are flash-attention's, so a model on ``flash_attention_2`` packs the same way."""
PACKING_ATTENTION = frozenset({VARLEN_ATTENTION, "flash_attention_2", "flash_attention_3"})
HEAD_CHUNK_ELEMENTS = 1 << 23
"""Logits computed at once by the fused head: 8 Mi floats (32 MiB), e.g. 1024 tokens x 8192
vocab."""


def _varlen_sdpa(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    cu = kwargs.pop("cu_seq_lens_q", None)
    for name in ("cu_seq_lens_k", "max_length_q", "max_length_k"):
        kwargs.pop(name, None)
    if cu is None:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    if query.shape[0] != 1 or attention_mask is not None:
        raise ValueError("packed attention: expects one packed row and no attention mask")
    bounds = cu.tolist()
    outs = [
        sdpa_attention_forward(
            module,
            query[:, :, a:b],
            key[:, :, a:b],
            value[:, :, a:b],
            None,
            dropout=dropout,
            scaling=scaling,
            is_causal=True,
            **kwargs,
        )[0]
        for a, b in itertools.pairwise(bounds)
    ]
    return torch.cat(outs, dim=1), None  # (1, N, heads, head_dim), like sdpa_attention_forward


def use_varlen_attention(model: CausalLM) -> bool:
    """Switch an HF model on SDPA to :data:`VARLEN_ATTENTION` (identical when nothing is packed).

    Returns whether the model can now take packed rows (flash-attention models already can)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    config = getattr(model, "config", None)
    impl = getattr(config, "_attn_implementation", None)
    if impl == "sdpa" and hasattr(model, "set_attn_implementation"):
        AttentionInterface.register(VARLEN_ATTENTION, _varlen_sdpa)
        ALL_MASK_ATTENTION_FUNCTIONS.register(VARLEN_ATTENTION, sdpa_mask)
        model.set_attn_implementation(VARLEN_ATTENTION)
        impl = getattr(model.config, "_attn_implementation", None)
    return impl in PACKING_ATTENTION


@dataclass
class Packed:
    """The rows of a :class:`TokenBatch` laid end to end in one row, padding removed."""

    input_ids: Tensor  # (1, N)
    position_ids: Tensor  # (1, N): restart at 0 for every sequence
    cu_seqlens: Tensor  # (n + 1,) int32 sequence boundaries
    max_len: int
    src: Tensor  # (T,) packed positions that predict a response token
    targets: Tensor  # (T,) the token each predicts
    rows: Tensor  # (T,) where each result goes in the (B, L-1) grid
    cols: Tensor  # (T,)


def pack(batch: TokenBatch) -> Packed:
    lengths = batch.attention_mask.sum(-1)  # (B,) rows are right-padded
    keep = batch.attention_mask.bool()
    device = batch.input_ids.device
    cu = torch.zeros(len(lengths) + 1, dtype=torch.int32, device=device)
    cu[1:] = lengths.cumsum(0)
    starts = cu[:-1].long()
    pos = torch.arange(batch.input_ids.shape[1], device=device).expand_as(batch.input_ids)
    rows, cols = batch.mask.nonzero(as_tuple=True)
    return Packed(
        input_ids=batch.input_ids[keep][None],
        position_ids=pos[keep][None],
        cu_seqlens=cu,
        max_len=int(lengths.max()),
        src=starts[rows] + cols,
        targets=batch.input_ids[rows, cols + 1],
        rows=rows,
        cols=cols,
    )


def _packed_inputs(pk: Packed) -> dict[str, Any]:
    """The keyword arguments of a model (or backbone) forward over one packed row: no padding
    mask, the sequence boundaries for varlen attention (policy and critic share them)."""
    return dict(
        input_ids=pk.input_ids,
        position_ids=pk.position_ids,
        use_cache=False,
        attention_mask={"full_attention": None, "sliding_attention": None},
        cu_seq_lens_q=pk.cu_seqlens,
        cu_seq_lens_k=pk.cu_seqlens,
        max_length_q=pk.max_len,
        max_length_k=pk.max_len,
    )


class _HeadLogprobs(torch.autograd.Function):
    """log p(target) and entropy of softmax((h W^T + b) / T), a chunk of tokens at a time.

    Neither the logits nor the softmax of all tokens exist at once: forward keeps per token only
    the log-sum-exp and the entropy, and backward recomputes each chunk's logits to form
    d/dz = g_lp (onehot - p) - g_H p (log p + H)."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, temperature, chunk, with_entropy):
        dev = hidden.device.type
        cdt = torch.get_autocast_dtype(dev) if torch.is_autocast_enabled(dev) else weight.dtype
        n = hidden.shape[0]
        lp = torch.empty(n, dtype=torch.float32, device=hidden.device)
        lse = torch.empty_like(lp)
        ent = torch.empty_like(lp) if with_entropy else None
        with torch.autocast(dev, enabled=False):
            w, b = weight.to(cdt), None if bias is None else bias.to(cdt)
            for a in range(0, n, chunk):
                z = _logits(hidden[a : a + chunk].to(cdt), w, b, temperature)
                lse[a : a + chunk] = torch.logsumexp(z, -1)
                lp[a : a + chunk] = (
                    z.gather(-1, targets[a : a + chunk, None]).squeeze(-1) - lse[a : a + chunk]
                )
                if ent is not None:  # H = -sum_j p_j log p_j, in place on the chunk's logits
                    logp = z.sub_(lse[a : a + chunk, None])
                    ent[a : a + chunk] = -torch.linalg.vecdot(logp.exp(), logp)
        ctx.save_for_backward(hidden, weight, bias, targets, lse, ent)
        ctx.cdt, ctx.temperature, ctx.chunk = cdt, temperature, chunk
        return (lp, ent) if with_entropy else (lp, lp.new_zeros(0))

    @staticmethod
    def backward(ctx, g_lp, g_ent):
        hidden, weight, bias, targets, lse, ent = ctx.saved_tensors
        cdt, temperature, chunk = ctx.cdt, ctx.temperature, ctx.chunk
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        grad_h = torch.empty_like(hidden) if need_h else None
        grad_w = (
            torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if need_w else None
        )
        grad_b = (
            torch.zeros(bias.shape, dtype=torch.float32, device=bias.device) if need_b else None
        )
        with torch.autocast(hidden.device.type, enabled=False):
            w, b = weight.to(cdt), None if bias is None else bias.to(cdt)
            # d/dz of (g_lp log p_y + g_H H) = g_lp (onehot_y - p) - g_H p (log p + H)
            # = p * (c - g_H log p) + g_lp onehot_y,  c = -g_lp - g_H H; all over T (z = logits /
            # T)
            g_lp = g_lp / temperature
            g_h = (
                g_ent / temperature
                if ent is not None and g_ent is not None and g_ent.numel()
                else None
            )
            for a in range(0, hidden.shape[0], chunk):
                h = hidden[a : a + chunk].to(cdt)
                logp = _logits(h, w, b, temperature).sub_(lse[a : a + chunk, None])  # in place
                p = logp.exp()
                if g_h is not None:
                    assert ent is not None  # saved whenever entropy was computed
                    c = -g_lp[a : a + chunk] - g_h[a : a + chunk] * ent[a : a + chunk]
                    gz = logp.mul_(-g_h[a : a + chunk, None]).add_(c[:, None]).mul_(p)
                else:
                    gz = p.mul_(-g_lp[a : a + chunk, None])
                gz.scatter_add_(-1, targets[a : a + chunk, None], g_lp[a : a + chunk, None])
                gz = gz.to(cdt)
                if grad_h is not None:
                    grad_h[a : a + chunk] = (gz @ w).to(hidden.dtype)
                if grad_w is not None:
                    grad_w += (gz.t() @ h).float()
                if grad_b is not None:
                    grad_b += gz.sum(0).float()
        grad_w = grad_w.to(weight.dtype) if grad_w is not None else None
        grad_b = grad_b.to(bias.dtype) if grad_b is not None else None
        return grad_h, grad_w, grad_b, None, None, None, None


def _logits(h: Tensor, w: Tensor, b: Tensor | None, temperature: float) -> Tensor:
    z = torch.nn.functional.linear(
        h, w, b
    ).float()  # a fresh tensor (fp32 already: no copy, still fresh)
    return z.div_(temperature) if temperature != 1.0 else z


def head_logprobs(
    hidden: Tensor,
    head: torch.nn.Linear,
    targets: Tensor,
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
    chunk: int | None = None,
) -> tuple[Tensor, Tensor | None]:
    """(T, hidden) states -> log p(targets) (T,) and entropy (T,) or None, fp32, never holding
    more than ``chunk`` tokens' logits (default: :data:`HEAD_CHUNK_ELEMENTS` floats)."""
    chunk = chunk or max(1, HEAD_CHUNK_ELEMENTS // head.weight.shape[0])
    lp, ent = _HeadLogprobs.apply(
        hidden, head.weight, head.bias, targets, float(temperature), chunk, with_entropy
    )
    return lp, (ent if with_entropy else None)


def token_logprobs(
    model: CausalLM,
    batch: TokenBatch,
    with_entropy: bool = False,
    temperature: float | None = None,
    *,
    chunk: int | None = None,
    packed: Packed | None = None,
) -> tuple[Tensor, Tensor | None]:
    """log p(token_{t+1} | prefix) on the response positions of ``batch``, (B, L-1) fp32 with 0
    elsewhere; entropy too if asked.

    The logits are divided by each sample's sampling temperature first (``batch.temperature``,
    from the samples; ``temperature`` overrides it for every row): the actors' engines report
    behaviour log-probs of the distribution they sampled from (logits / T), so the learner must
    score the same distribution for the PPO ratio to start at exactly 1. Rows sampled at
    different temperatures are scored in one pass per temperature.

    Work done: when the model's attention takes packed rows (:func:`use_varlen_attention`), the
    rows are laid end to end in one row with restarting position ids and per-sequence causal
    attention, so no padding is computed; otherwise the padded batch is run. Either way the
    decoder's hidden states are taken only at positions that predict a response token and the
    LM head, log-softmax and entropy run on those alone, in chunks (:func:`head_logprobs`), so
    the (tokens x vocab) logits are never materialised. Under torch.distributed (FSDP wraps the
    root module) the root forward is kept and returns the response positions' logits only."""
    if temperature is None:
        temps = batch.temperature
        if temps is None or bool((temps == temps[0]).all()):
            temperature = float(temps[0]) if temps is not None and temps.numel() else 1.0
        else:
            return _by_temperature(model, batch, with_entropy, chunk)
    pk = packed if packed is not None else pack(batch)
    grid = torch.zeros(batch.mask.shape, dtype=torch.float32, device=batch.mask.device)
    can_pack = (
        getattr(getattr(model, "config", None), "_attn_implementation", None) in PACKING_ATTENTION
    )
    if can_pack:
        inputs = _packed_inputs(pk)
        flat = pk.src
    else:
        inputs = dict(
            input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False
        )
        flat = pk.rows * batch.input_ids.shape[1] + pk.cols
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    if (
        distributed
        or not hasattr(model, "get_output_embeddings")
        or model.get_output_embeddings() is None
    ):
        if can_pack:  # one row: the head runs on the response-predicting positions only
            logits = model(**inputs, logits_to_keep=flat).logits.float()[0]  # (T, V)
        else:
            # a tensor logits_to_keep picks the same positions in every row: keep all, then select
            logits = model(**inputs).logits.float()
            logits = logits.reshape(-1, logits.shape[-1])[flat]
        if temperature != 1.0:
            logits = logits / temperature
        lse = torch.logsumexp(logits, dim=-1)
        lp = logits.gather(-1, pk.targets[:, None]).squeeze(-1) - lse
        ent = entropy_from_logits(logits) if with_entropy else None
    else:
        base = getattr(model, model.base_model_prefix)
        hidden = base(**inputs).last_hidden_state
        hidden = hidden.reshape(-1, hidden.shape[-1])[flat]
        lp, ent = head_logprobs(
            hidden,
            model.get_output_embeddings(),
            pk.targets,
            temperature=temperature,
            with_entropy=with_entropy,
            chunk=chunk,
        )
    logprobs = grid.index_put((pk.rows, pk.cols), lp)
    entropy = grid.index_put((pk.rows, pk.cols), ent) if ent is not None else None
    return logprobs, entropy


def token_values(
    critic: torch.nn.Module, batch: TokenBatch, *, packed: Packed | None = None
) -> Tensor:
    """V(prefix) on the response positions of ``batch`` (B, L-1) fp32, 0 elsewhere, from a
    ``ValueModel`` (decoder + ``v_head``). Packed like :func:`token_logprobs` when the decoder's
    attention takes packed rows and no process group wraps the module; otherwise the padded
    forward of the whole module, masked."""
    backbone, head = getattr(critic, "backbone", None), getattr(critic, "v_head", None)
    impl = getattr(getattr(backbone, "config", None), "_attn_implementation", None)
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    if backbone is None or head is None or impl not in PACKING_ATTENTION or distributed:
        return critic(batch.input_ids, batch.attention_mask)[:, :-1] * batch.mask
    pk = packed if packed is not None else pack(batch)
    hidden = backbone(**_packed_inputs(pk)).last_hidden_state[0, pk.src]
    values = head(hidden.to(head.weight.dtype)).squeeze(-1).float()
    grid = torch.zeros(batch.mask.shape, dtype=torch.float32, device=batch.mask.device)
    return grid.index_put((pk.rows, pk.cols), values)


def _by_temperature(
    model: CausalLM, batch: TokenBatch, with_entropy: bool, chunk: int | None
) -> tuple[Tensor, Tensor | None]:
    """:func:`token_logprobs` of a batch mixing temperatures: one pass per temperature."""
    assert batch.temperature is not None
    logprobs = torch.zeros(batch.mask.shape, dtype=torch.float32, device=batch.mask.device)
    entropy = torch.zeros_like(logprobs) if with_entropy else None
    for t in torch.unique(batch.temperature).tolist():
        idx = torch.nonzero(batch.temperature == t).flatten()
        sub = batch.rows(idx)
        lp, ent = token_logprobs(model, sub, with_entropy, float(t), chunk=chunk)
        width = sub.mask.shape[1]
        logprobs = logprobs.index_put(
            (idx[:, None], torch.arange(width, device=idx.device)[None, :]), lp
        )
        if entropy is not None and ent is not None:
            entropy = entropy.index_put(
                (idx[:, None], torch.arange(width, device=idx.device)[None, :]), ent
            )
    return logprobs, entropy
