"""Offline test fixtures: a tiny byte-level BPE tokenizer and a random tiny Qwen2 model.

No weights or tokenizers can be downloaded on the project's machines, so tests and benchmarks
build their own: a BPE trained in well under a second on Python standard-library source, wrapped
as ``PreTrainedTokenizerFast`` with a ChatML chat template (``<|im_start|>``/``<|im_end|>``), and
a randomly initialised ``Qwen2ForCausalLM`` saved next to it. The model is random, so its text is
noise; it exercises shapes, log-probs, batching and weight updates, not quality. The real
bootstrap tokenizer/model (trained) lives in ``mlerl.learner``; this module does not depend on it.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _corpus(max_chars: int) -> list[str]:
    """Python source from the standard library, a deterministic list of files."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts: list[str] = []
    total = 0
    for path in sorted(stdlib.glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        texts.append(text)
        total += len(text)
        if total >= max_chars:
            break
    return texts


def build_tokenizer(
    vocab_size: int = 2048, corpus_chars: int = 300_000
):  # -> PreTrainedTokenizerFast
    """Train a byte-level BPE on stdlib source; ChatML special tokens; deterministic."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(corpus_chars), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    fast.chat_template = CHATML_TEMPLATE
    return fast


def build_tiny_model_dir(
    out_dir: str | Path,
    *,
    hidden_size: int = 128,
    num_layers: int = 2,
    seed: int = 0,
    vocab_size: int = 2048,
) -> Path:
    """Save a random tiny Qwen2 (tied embeddings) plus tokenizer to ``out_dir``; return it."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(vocab_size=vocab_size)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=hidden_size // 64,  # head_dim 64: vLLM's CPU attention needs it
        num_key_value_heads=1,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.convert_tokens_to_ids("<|im_start|>"),
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
