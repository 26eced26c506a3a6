"""`BootstrapConfig`: every knob of the embedded policy's offline bootstrap."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mlerl.actors import PromptConfig
from mlerl.protocol import check

BOOTSTRAP_VERSION = 10
"""Part of the cache key: bump it when the corpus generator or the training code changes."""


@dataclass
class BootstrapConfig:
    """Tokenizer, model shape, corpus and SFT budget of the embedded policy."""

    seed: int = 0
    """Seeds the corpus, the model initialisation and the batch order."""
    prompts: PromptConfig = field(default_factory=PromptConfig)
    """Prompt sizes of the C.1/C.2 examples; `mlerl train` copies `actors.prompts` here so SFT
    and RL see identical prompts."""
    task_ids: list[str] = field(default_factory=list)
    """Tasks the corpus covers; empty = every `-tiny` stand-in of `mlerl.bench`."""
    shape: str = "settings"
    """Program shape of the corpus: ``settings`` (the default: a block of settings at the top, one
    decision per line, a fixed import block and body that prints a hold-out score per target;
    thousands of independently composed drafts, the task's best known combination held out;
    `_settings`) or ``legacy`` (the generator before the settings-block corpus;
    `+experiment=legacy_bootstrap` restores that bootstrap whole). Tasks without a settings
    shape (image, span) keep the legacy programs."""
    drafts_per_task: int = 3000
    """C.1 draft examples per task (legacy shape: `mistake_rate` of them carry one bug; the
    legacy bootstrap used 32, which 400 SFT steps repeat ~265 times: the policy memorised)."""
    improves_per_task: int = 12
    """C.2 improve examples per task of the legacy shape (`fix_share` fix a bug; the others
    switch to a stronger model, or with the ``edit`` improve format make one change;
    `+experiment=edit_revisions` uses 48: an edit answer is ~20 tokens, so they cost little
    SFT)."""
    revisions_per_task: int = 64
    """Settings shape: revisions drawn per task (two per parent draft, one decision changed
    each), every parent and child run in the sandbox before SFT (the default task's 96
    programs: 129-142 s on 2 cores) and kept when both ran, their submissions differ and both
    printed a hold-out score; each kept one is labelled with its measured effect
    (`_revisions`)."""
    revision_hindsight: bool = False
    """Settings shape: also write each drawn revision reversed (its child revised back into its
    parent; no extra runs: the same two programs) and keep, per pair, the direction that
    measured a help, so SFT sees one revision per kept pair and every one that changed the
    hold-out score helps. False (the default): revisions that hurt are kept as drawn."""
    revision_repeats: int = 8
    """Times SFT sees each kept revision per pass over the drafts: 64 revisions beside 3,000
    drafts would be 2 % of the examples for the half of RL's prompts that are improve prompts."""
    fix_share: float = 0.5
    """Share of the improve examples that revise a buggy program (the actors revise only
    programs that ran unless `actors.improvement.include_failures`)."""
    real_outputs: bool = False
    """Run each improve example's parent in the sandbox, the way the actors run programs, and
    show its real terminal output in the prompt (markers with values, the program's prints,
    warnings) instead of the simulated marker lines. Off by default: it did not make improve
    answers valid on new parents (0/16 at 160 and 400 steps, and with 48 improve examples per
    task) and it made scratch answers worse (12/16 and 4/16 valid against 14/16 without it;
    docs/experiments/bootstrap-corpus.md). The cache key covers it."""
    instruments_per_task: int = 12
    """C.3 instrumentation examples per task."""
    mistake_rate: float = 0.2
    """Fraction of draft programs with one realistic bug."""
    styles: bool = False
    """Vary the coding style (names, paths, constants, CSV writing) across programs; False
    writes all in one style, so a small model's SFT budget goes to the choices that change the
    score and the run time (model family, hyperparameters, features, validation, budget)."""
    vocab_size: int = 4096
    """Byte-level BPE vocabulary size (phrase tokens come on top)."""
    phrase_tokens: int = 4096
    """At most this many frequent corpus lines / sentences become single tokens on top of the
    BPE vocabulary (0: none); see `mlerl.embedded._tokenizer`."""
    hidden_size: int = 256
    """Qwen2 hidden size (256 with the defaults below: 4.3 M parameters)."""
    num_layers: int = 4
    """Qwen2 decoder layers."""
    num_heads: int = 4
    """Attention heads."""
    num_kv_heads: int = 2
    """Key/value heads (grouped-query attention)."""
    intermediate_size: int = 768
    """MLP width."""
    max_len: int = 2048
    """Longest training sequence in tokens; longer examples are dropped (and counted)."""
    sft_steps: int = 400
    """Upper bound on optimizer steps. 400, not 160: on wine (16 scratch answers at T = 0.9,
    `benchmarks/experiments/embedded_improve.py`) 160 steps gave 7/16 valid programs and a final
    training loss that depends on the seed (0.06 at seed 0, 0.27 at seed 1); 400 steps gave 14/16
    and 16/16 (seeds 0 and 1; loss over the last 10 steps 0.032 and 0.033). About 6 min on 2 idle
    cores (docs/experiments/bootstrap-corpus.md)."""
    sft_seconds: float = 1800.0
    """Wall-clock guard on SFT; the learning-rate schedule follows max(step, time) progress. A
    build it stops before ``sft_steps`` is used by that run but never reused from the cache
    (measured under load 4-9 on 2 cores: 99 of 160 steps in 900 s, loss 0.62 instead of ~0.09,
    and a policy that wrote 0 valid programs in 8 updates). Not part of the cache key."""
    batch_tokens: int = 4096
    """Padded tokens per batch (examples of similar length are batched together)."""
    lr: float = 3e-3
    """Peak AdamW learning rate (a from-scratch tiny model takes a large one)."""
    warmup_steps: int = 10
    """Linear warm-up steps before the cosine decay."""
    torch_threads: int = 0
    """CPU threads for SFT (``torch.set_num_threads``, restored afterwards); 0: torch's default."""
    bf16: bool = False
    """bfloat16 autocast for the forward pass. Faster only on CPUs with native bf16 (AVX512-BF16,
    AMX); on AVX2-only CPUs it is emulated and measured 7x slower than fp32."""

    def __post_init__(self) -> None:
        check(self.shape in ("settings", "legacy"), "shape", "must be 'settings' or 'legacy'")
        check(0.0 <= self.mistake_rate <= 1.0, "mistake_rate", "must be in [0, 1]")
        check(0.0 <= self.fix_share <= 1.0, "fix_share", "must be in [0, 1]")
        check(
            min(
                self.drafts_per_task,
                self.improves_per_task,
                self.instruments_per_task,
                self.revisions_per_task,
            )
            >= 0,
            "drafts_per_task",
            "example counts must be >= 0",
        )
        check(self.vocab_size >= 512, "vocab_size", "must be >= 512")
        check(self.phrase_tokens >= 0, "phrase_tokens", "must be >= 0")
        check(
            self.hidden_size > 0 and self.hidden_size % self.num_heads == 0,
            "hidden_size",
            "must be a positive multiple of num_heads",
        )
        check(self.num_heads % self.num_kv_heads == 0, "num_kv_heads", "must divide num_heads")
        check(self.num_layers > 0 and self.intermediate_size > 0, "num_layers", "must be > 0")
        check(self.max_len >= 64, "max_len", "must be >= 64")
        check(self.sft_steps >= 0 and self.sft_seconds >= 0, "sft_steps", "budgets must be >= 0")
        check(self.batch_tokens >= self.max_len, "batch_tokens", "must be >= max_len")
        check(self.lr > 0, "lr", "must be > 0")
        check(self.revision_repeats >= 1, "revision_repeats", "must be >= 1")
        check(self.torch_threads >= 0, "torch_threads", "must be >= 0 (0: torch's default)")

    def key(self, corpus_hash: str) -> str:
        """Cache key: the corpus and every setting (16 hex characters) but ``sft_seconds``, a
        guard: only a build that ran all ``sft_steps`` is reused (``build_policy``), and such a
        build does not depend on the guard when the guard never bound the schedule."""
        fields = asdict(self)
        fields.pop("sft_seconds")
        if not fields["revision_hindsight"]:  # came after policies were cached: keep their keys
            fields.pop("revision_hindsight")
        blob = json.dumps(
            {"corpus": corpus_hash, "version": BOOTSTRAP_VERSION, **fields}, sort_keys=True
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


MANIFEST = "manifest.json"
"""The file in a policy directory that records how it was built (key, config, steps, losses)."""


def read_manifest(model_dir: str | Path) -> dict | None:
    """A policy directory's manifest, or None where it has none (or an unreadable one)."""
    try:
        return json.loads((Path(model_dir) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
