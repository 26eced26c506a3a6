"""Byte-level BPE tokenizer for the embedded policy, trained offline in well under a second.

Guarantees:
- Deterministic: the same texts and vocabulary size give the same vocabulary (the BPE trainer
  is deterministic; the Python source used besides the corpus is a fixed, sorted selection of
  this interpreter's standard-library modules).
- Byte-level: every string round-trips exactly through encode/decode (no unknown tokens).
- ChatML: `<|im_start|>`, `<|im_end|>` and `<|endoftext|>` are single special tokens and the
  returned tokenizer carries a chat template, so `apply_chat_template` formats prompts the same
  way for SFT and for RL sampling.
"""

from __future__ import annotations

import sysconfig
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
EOS = "<|endoftext|>"
SPECIAL_TOKENS = (EOS, IM_START, IM_END)

# ChatML, as Qwen2 uses it; the generation prompt opens the assistant turn.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Stdlib modules whose source broadens the Python vocabulary beyond the corpus templates.
_STDLIB_MODULES = (
    "argparse.py", "csv.py", "dataclasses.py", "functools.py", "heapq.py", "json/encoder.py",
    "random.py", "statistics.py", "string.py", "textwrap.py", "pathlib.py", "fractions.py",
)


def stdlib_texts(max_chars: int = 400_000) -> list[str]:
    """A fixed selection of this interpreter's stdlib sources, at most `max_chars` in all."""
    root = Path(sysconfig.get_paths()["stdlib"])
    texts: list[str] = []
    used = 0
    for name in _STDLIB_MODULES:
        path = root / name
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")[: max_chars - used]
        texts.append(text)
        used += len(text)
        if used >= max_chars:
            break
    return texts


def train_tokenizer(texts: Iterable[str], vocab_size: int = 8192) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on `texts` and wrap it with ChatML special tokens and template."""
    if vocab_size < 512:
        raise ValueError(f"vocab_size must be >= 512 (256 bytes + merges), got {vocab_size}")
    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    raw.train_from_iterator(list(texts), trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        eos_token=IM_END,
        pad_token=EOS,
        bos_token=None,
        additional_special_tokens=[IM_START],
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok
