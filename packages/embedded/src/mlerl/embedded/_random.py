"""Real-size models without downloads: Qwen2.5 architectures initialised at random.

Throughput does not depend on trained weights: a model of the published architecture and size,
initialised at random from its config, runs the same kernels, memory and communication as the
released checkpoint. ``build_random_model(arch, out_dir)`` writes an ordinary Hugging Face model
directory (``config.json``, safetensors, a tokenizer with a ChatML template, a generation
config, ``random_model.json``) that the learner, ``HFEngine`` and vLLM load like any other.

Architectures (``ARCHITECTURES``), from the published ``config.json`` of
Qwen/Qwen2.5-0.5B(-Instruct)
and Qwen/Qwen2.5-3B(-Instruct):

==============  =======  ==========  ======  =====  ========  ======  ====  ======
arch            hidden   MLP width   layers  heads  KV heads  vocab   tied  params
==============  =======  ==========  ======  =====  ========  ======  ====  ======
qwen2.5-0.5b    896      4864        24      14     2         151936  yes   494,032,768
qwen2.5-3b      2048     11008       36      16     2         151936  yes   3,085,938,688
tiny            128      256         2       2      1         4096    yes   ~0.9 M
==============  =======  ==========  ======  =====  ========  ======  ====  ======

Both real sizes: head_dim 64 (0.5B) and 128 (3B), rope_theta 1e6, rms_norm_eps 1e-6, SiLU, biases
on q/k/v only,
max_position_embeddings 32768, no sliding window. ``tiny`` is the same family scaled down (GQA,
head_dim 64 as vLLM's CPU attention needs, tied embeddings, a padded tokenizer) so CI runs the
same code in seconds.

Guarantees:

- The tokenizer is a byte-level BPE trained offline on standard-library source (as in
  :mod:`mlerl.embedded._tokenizer`) whose vocabulary is padded with unreachable placeholder
  entries (``<|unused_N|>``) up to the model's ``vocab_size``: ``len(tokenizer) == vocab_size``,
  so every id a random model samples decodes.
- Initialisation is seeded (``seed``) and done in ``dtype`` (bfloat16 by default: the 3B model
  needs ~6 GiB of RAM, not 12); the saved weights are in that dtype.
- Builds are written under a temporary name and renamed; a directory whose
  ``random_model.json`` names the same architecture, seed, dtype and format version is reused.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

RANDOM_MANIFEST = "random_model.json"
_FORMAT = 1  # bump when the tokenizer or the saved files change

_QWEN25_COMMON = dict(
    vocab_size=151936,
    max_position_embeddings=32768,
    rope_theta=1_000_000.0,
    rms_norm_eps=1e-6,
    hidden_act="silu",
    tie_word_embeddings=True,
    use_sliding_window=False,
    attention_dropout=0.0,
    initializer_range=0.02,
)

ARCHITECTURES: dict[str, dict] = {
    "qwen2.5-0.5b": dict(
        _QWEN25_COMMON,
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        max_window_layers=24,
    ),
    "qwen2.5-3b": dict(
        _QWEN25_COMMON,
        hidden_size=2048,
        intermediate_size=11008,
        num_hidden_layers=36,
        num_attention_heads=16,
        num_key_value_heads=2,
        max_window_layers=36,
    ),
    "tiny": dict(
        _QWEN25_COMMON,
        vocab_size=4096,
        max_position_embeddings=4096,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_window_layers=2,
    ),
}
"""Qwen2Config keyword arguments per architecture name (see the module docstring's table)."""


def padded_tokenizer(vocab_size: int, bpe_size: int = 8192):  # -> PreTrainedTokenizerFast
    """A ChatML byte-level BPE (``min(bpe_size, vocab_size // 2)`` entries, trained on stdlib
    source) whose vocabulary is padded with ``<|unused_N|>`` entries to exactly ``vocab_size``.

    The placeholders are plain vocabulary entries that no merge produces: encoding never emits
    them, decoding turns each into its own text."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    from mlerl.embedded._tokenizer import EOS, IM_END, IM_START, stdlib_texts, train_tokenizer

    trained = train_tokenizer(stdlib_texts(), min(bpe_size, vocab_size // 2))
    raw = json.loads(trained.backend_tokenizer.to_str())
    vocab = raw["model"]["vocab"]
    filler = vocab_size - len(trained)
    if filler < 0:
        raise ValueError(
            f"vocab_size {vocab_size} is smaller than the trained tokenizer ({len(trained)})"
        )
    for i in range(filler):
        vocab[f"<|unused_{i}|>"] = len(vocab)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(raw)),
        eos_token=IM_END,
        pad_token=EOS,
        bos_token=None,
        additional_special_tokens=[IM_START],
    )
    tok.chat_template = trained.chat_template
    assert len(tok) == vocab_size, (len(tok), vocab_size)
    return tok


def architecture_config(arch: str, tokenizer=None):  # -> Qwen2Config
    """The Qwen2Config of ``arch``; special-token ids from ``tokenizer`` when given."""
    from transformers import Qwen2Config

    if arch not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {arch!r}; known: {', '.join(ARCHITECTURES)}")
    ids = {}
    if tokenizer is not None:
        ids = dict(
            bos_token_id=None,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
    return Qwen2Config(**ARCHITECTURES[arch], **ids)


def build_random_model(
    arch: str, out_dir: str | Path, *, seed: int = 0, dtype: str = "bfloat16", log=print
) -> Path:
    """Write (or reuse) the random ``arch`` model directory ``out_dir``; return it."""
    import torch
    from transformers import GenerationConfig, Qwen2ForCausalLM

    if arch not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {arch!r}; known: {', '.join(ARCHITECTURES)}")
    out = Path(out_dir).expanduser().resolve()
    wanted = {"arch": arch, "seed": seed, "dtype": dtype, "format": _FORMAT}
    try:
        found = json.loads((out / RANDOM_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        found = None
    if found is not None and {k: found.get(k) for k in wanted} == wanted:
        log(f"random model: reusing {out}")
        return out
    t0 = time.monotonic()
    tok = padded_tokenizer(ARCHITECTURES[arch]["vocab_size"])
    config = architecture_config(arch, tok)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM._from_config(config, dtype=getattr(torch, dtype))
    model.generation_config = GenerationConfig(
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id
    )
    params = model.num_parameters()
    log(
        f"random model: {arch}, {params / 1e6:.1f} M parameters in {dtype}, "
        f"initialised in {time.monotonic() - t0:.1f} s; saving to {out}"
    )
    manifest = {
        **wanted,
        "params": params,
        "build_seconds": round(time.monotonic() - t0, 2),
        "created_at": time.time(),
    }
    from mlerl.embedded._model import save_model_dir

    save_model_dir(out, model, tok, RANDOM_MANIFEST, manifest)
    log(f"random model: {out} written in {time.monotonic() - t0:.1f} s")
    return out
