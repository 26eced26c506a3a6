"""Byte-level BPE tokenizer for the embedded policy, trained offline in well under a second.

Guarantees:
- Deterministic: the same texts and vocabulary size give the same vocabulary (the BPE trainer
  is deterministic; the Python source used besides the corpus is a fixed, sorted selection of
  this interpreter's standard-library modules).
- Byte-level: every string round-trips exactly through encode/decode (no unknown tokens).
- ChatML: `<|im_start|>`, `<|im_end|>` and `<|endoftext|>` are single special tokens and the
  returned tokenizer carries a chat template, so `apply_chat_template` formats prompts the same
  way for SFT and for RL sampling.
- Phrase tokens (optional): frequent whole lines and sentences of the corpus are added as
  single (non-special) tokens. A Qwen2 model directory always loads Qwen2's tokenizer class,
  whose pre-tokenizer splits text into words, so BPE merges alone cannot cross a space; added
  tokens are matched before pre-tokenization and survive the reload (and vLLM's loader). A
  program then costs ~110 tokens instead of ~440, which is what lets a 5 M-parameter model
  learn to write runnable programs in a few CPU minutes. Text outside the phrases still
  tokenizes through the byte-level BPE, so every string still round-trips.
"""

from __future__ import annotations

import re
import sysconfig
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
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
    "argparse.py",
    "csv.py",
    "dataclasses.py",
    "functools.py",
    "heapq.py",
    "json/encoder.py",
    "random.py",
    "statistics.py",
    "string.py",
    "textwrap.py",
    "pathlib.py",
    "fractions.py",
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


_SENTENCE_END = re.compile(r"(?<=[.!?]) (?=[A-Z`])")


_NAME_LITERAL = re.compile(r"""(['"])[A-Za-z_][\w*]*\1""")


def _pieces(text: str) -> list[str]:
    """Candidate phrases of `text`: each line with its newline; prose lines (not indented,
    containing a sentence end) are cut into sentences, each keeping its trailing space; and
    each quoted name in a line (``'percent_atom_al'``, ``'a*b'``, ``"lightgbm"``), so that a
    column or family name is one token the model cannot misspell half-way (measured: a
    settings line composed from BPE pieces named columns that do not exist,
    ``'lattice_vector_in'``)."""
    out: list[str] = []
    for line in text.splitlines(keepends=True):
        if not line.startswith((" ", "\t")) and _SENTENCE_END.search(line):
            parts = _SENTENCE_END.split(line)
            out += [p + " " for p in parts[:-1]] + [parts[-1]]
        else:
            out.append(line)
        out += [m.group(0) for m in _NAME_LITERAL.finditer(line)]
    return out


def phrase_tokens(
    frequent: Iterable[str], once: Iterable[str] = (), limit: int = 4096, min_chars: int = 6
) -> list[str]:
    """The phrases to add as single tokens, most frequent first, at most `limit`.

    A piece of the `frequent` texts (answers) qualifies when it occurs in at least two of them;
    a piece of the `once` texts (prompts, which repeat verbatim during RL) qualifies on one
    occurrence. Pieces shorter than `min_chars` (stripped) are left to the BPE."""
    counts: Counter[str] = Counter()
    for text in frequent:
        counts.update(set(_pieces(text)))
    for text in once:
        counts.update(dict.fromkeys(set(_pieces(text)), 2))
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [p for p, n in ranked if n >= 2 and len(p.strip()) >= min_chars][:limit]


def train_tokenizer(
    texts: Iterable[str], vocab_size: int = 8192, phrases: Iterable[str] = ()
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on `texts` and wrap it with ChatML special tokens and template;
    `phrases` (see `phrase_tokens`) become single tokens on top of the BPE vocabulary."""
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
    tok.add_tokens([AddedToken(p, normalized=False, special=False) for p in phrases])
    return tok
