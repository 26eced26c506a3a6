"""Bootstrap the embedded policy: BPE tokenizer + tiny Qwen2 + SFT on the generated corpus.

`build_policy(cache_dir, config)` returns a Hugging Face model directory (weights, tokenizer
with chat template, generation config, `manifest.json`). It is cached under
`cache_dir/<key>`, where the key hashes the corpus and every config field; a directory whose
manifest carries the same key is reused as is. Directories are written to a temporary name and
renamed, so a crash never leaves a half-written cache entry that looks complete.
Before building, a cache miss looks in `reference` (by default the builds shipped with this
package, `REFERENCE`): a `<key>/` directory there whose manifest has the same key and all
`sft_steps` is copied into the cache instead, so every machine starts from the same weights.
SFT is a plain AdamW loop: loss on the assistant tokens only, examples of similar length
batched together, stopped at `sft_steps` or `sft_seconds`, whichever comes first; the model
is therefore deterministic given the seed only when the step bound is reached first.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mlerl.embedded._config import MANIFEST, BootstrapConfig, read_manifest
from mlerl.embedded._corpus import (
    Example,
    corpus_hash,
    corpus_stats,
    generate_corpus,
    with_real_outputs,
)
from mlerl.embedded._evaluate import observe_programs, terminal_outputs
from mlerl.embedded._revisions import measure_revisions
from mlerl.embedded._tasks import task_views
from mlerl.embedded._tokenizer import IM_END, phrase_tokens, stdlib_texts, train_tokenizer


def encode_example(tok, ex: Example) -> tuple[list[int], list[int]]:
    """(input_ids, labels): the chat-formatted prompt masked with -100, then answer + <|im_end|>."""
    prompt = tok.apply_chat_template(ex.chat(), add_generation_prompt=True, tokenize=False)
    prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    answer_ids = tok(ex.answer, add_special_tokens=False)["input_ids"] + [
        tok.convert_tokens_to_ids(IM_END)
    ]
    return prompt_ids + answer_ids, [-100] * len(prompt_ids) + answer_ids


def _batches(encoded: list[tuple[list[int], list[int]]], batch_tokens: int, rng: random.Random):
    """Length-sorted batches of at most `batch_tokens` padded tokens, in shuffled order."""
    order = sorted(range(len(encoded)), key=lambda i: (len(encoded[i][0]), rng.random()))
    batches, cur, longest = [], list[Any](), 0
    for i in order:
        n = len(encoded[i][0])
        if cur and max(longest, n) * (len(cur) + 1) > batch_tokens:
            batches.append(cur)
            cur, longest = [], 0
        cur.append(i)
        longest = max(longest, n)
    if cur:
        batches.append(cur)
    rng.shuffle(batches)
    return batches


def _collate(torch, encoded, idx: list[int], pad_id: int):
    width = max(len(encoded[i][0]) for i in idx)
    ids = torch.full((len(idx), width), pad_id, dtype=torch.long)  # (B, T)
    labels = torch.full((len(idx), width), -100, dtype=torch.long)
    mask = torch.zeros((len(idx), width), dtype=torch.long)
    for row, i in enumerate(idx):
        x, y = encoded[i]
        ids[row, : len(x)] = torch.tensor(x)
        labels[row, : len(y)] = torch.tensor(y)
        mask[row, : len(x)] = 1
    return ids, labels, mask


def new_model(tok, cfg: BootstrapConfig):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(cfg.seed)
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=cfg.hidden_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        intermediate_size=cfg.intermediate_size,
        max_position_embeddings=max(4096, cfg.max_len),
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    return Qwen2ForCausalLM(config)


def answer_loss(torch, model, ids, labels, mask):
    """Mean next-token cross-entropy over answer tokens only.

    The LM head runs only where a label exists: prompts are ~60% of the tokens, and the
    8k-vocabulary head is about a third of this model's compute per token.
    """
    hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state  # (B, T, H)
    target = labels[:, 1:]  # (B, T-1): position t predicts token t+1
    keep = target != -100
    logits = model.lm_head(hidden[:, :-1][keep])  # (N, V)
    return torch.nn.functional.cross_entropy(logits.float(), target[keep])


def sft(model, tok, examples: list[Example], cfg: BootstrapConfig, log=None) -> dict:
    """Train in place; returns the training record (steps, seconds, loss curve, throughput)."""
    import torch

    encoded = [encode_example(tok, ex) for ex in examples]
    kept = [e for e in encoded if len(e[0]) <= cfg.max_len]
    rng = random.Random(cfg.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.1)
    model.train()
    start, step, tokens, curve = time.monotonic(), 0, 0, []
    while step < cfg.sft_steps and time.monotonic() - start < cfg.sft_seconds and kept:
        for idx in _batches(kept, cfg.batch_tokens, rng):
            progress = max(
                step / max(1, cfg.sft_steps),
                (time.monotonic() - start) / max(1e-9, cfg.sft_seconds),
            )
            if progress >= 1.0:
                break
            warm = min(1.0, (step + 1) / max(1, cfg.warmup_steps))
            for group in opt.param_groups:
                group["lr"] = cfg.lr * warm * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))
            ids, labels, mask = _collate(torch, kept, idx, tok.pad_token_id)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.bf16):
                loss = answer_loss(torch, model, ids, labels, mask)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            tokens += int(mask.sum())
            curve.append([step, round(time.monotonic() - start, 2), round(loss.item(), 4)])
            if log is not None and step % 10 == 0:
                log(f"sft step {step}: loss {curve[-1][2]} ({curve[-1][1]} s)")
    seconds = time.monotonic() - start
    model.eval()
    return {
        "steps": step,
        "seconds": round(seconds, 2),
        "loss_curve": curve,
        "examples_kept": len(kept),
        "examples_dropped": len(encoded) - len(kept),
        "tokens_trained": tokens,
        "steps_per_s": round(step / max(seconds, 1e-9), 4),
        "tokens_per_s": round(tokens / max(seconds, 1e-9), 1),
        "mean_len": round(sum(len(e[0]) for e in kept) / max(1, len(kept)), 1),
    }


def corpus_for(cfg: BootstrapConfig, data_dir: Path) -> list[Example]:
    """The corpus with simulated improve outputs (pure and fast: it keys the cache)."""
    views = task_views(data_dir, list(cfg.task_ids) or None)
    return generate_corpus(
        views,
        cfg.seed,
        cfg.drafts_per_task,
        cfg.improves_per_task,
        cfg.instruments_per_task,
        cfg.mistake_rate,
        cfg.prompts,
        cfg.styles,
        cfg.fix_share,
        cfg.shape,
        cfg.revisions_per_task,
        cfg.revision_hindsight,
    )


def _as_loaded(tok, model_config):
    """The tokenizer exactly as engines will load it from the saved model directory.

    `AutoTokenizer` picks the tokenizer class from the directory's `config.json` (a `qwen2`
    model gets Qwen2's tokenizer class and its pre-tokenizer), so a freshly trained
    `PreTrainedTokenizerFast` does not tokenize like the saved one (measured: 1,742 vs 1,616
    tokens for one example). SFT must use the reloaded tokenizer, or the policy is trained on
    token sequences it never sees once an engine loads it."""
    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory(prefix="mlerl-tok-") as tmp:
        tok.save_pretrained(tmp)
        model_config.save_pretrained(tmp)
        return AutoTokenizer.from_pretrained(tmp)


def _publish(out: Path, write) -> None:
    """``write(tmp)`` fills a temporary sibling of ``out``, which is then renamed into place (a
    reader never sees half a directory; an existing one is replaced)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        write(tmp)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def save_model_dir(
    out: Path, model: Any, tok: Any, manifest_name: str, manifest: dict[str, Any]
) -> None:
    """``model`` and ``tok`` as a Hugging Face directory at ``out``, with ``manifest`` as JSON
    under ``manifest_name``, published atomically (`_publish`)."""

    def write(tmp: Path) -> None:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (tmp / manifest_name).write_text(json.dumps(manifest, indent=1), encoding="utf-8")

    _publish(out, write)


REFERENCE = Path(__file__).parent / "reference"
"""The reference builds shipped with the package, one ``<key>/`` model directory each: the
default run's policy, so a fresh clone skips the build and every user starts from the same
weights (docs/embedded.md "The reference build")."""


def _complete(manifest: dict | None, key: str, steps: int) -> bool:
    """Whether a manifest is a finished build of ``key`` (all ``steps`` of SFT ran)."""
    return manifest is not None and manifest.get("key") == key and manifest.get("steps", 0) >= steps


def build_policy(
    cache_dir: str | Path,
    config: BootstrapConfig | None = None,
    *,
    data_dir: str | Path | None = None,
    log=print,
    reference: str | Path | None = REFERENCE,
) -> Path:
    """The bootstrapped policy's model directory, built (or reused) under `cache_dir`: a
    cache hit, else the build of the same key in `reference` copied into the cache (None: never),
    else built here."""
    cfg = config or BootstrapConfig()
    cache = Path(cache_dir).expanduser()
    data = Path(data_dir).expanduser() if data_dir else cache / "tasks"
    t0 = time.monotonic()
    examples = corpus_for(cfg, data)
    chash = corpus_hash(examples)
    key = cfg.key(chash)
    out = cache / key
    manifest = read_manifest(out)
    if _complete(manifest, key, cfg.sft_steps):
        log(f"embedded policy: cache hit {out}")
        return out
    shipped = Path(reference).expanduser() / key if reference is not None else None
    if shipped is not None and _complete(read_manifest(shipped), key, cfg.sft_steps):
        _publish(out, lambda tmp: shutil.copytree(shipped, tmp, dirs_exist_ok=True))
        log(f"embedded policy: the reference build {key}, copied to {out}")
        return out
    if manifest is not None and manifest.get("key") == key:
        log(
            f"embedded policy: {out} was stopped by sft_seconds after {manifest.get('steps')} of "
            f"{cfg.sft_steps} steps; rebuilding"
        )
    # Phrase tokens come from the corpus as generated: a prompt's lines qualify because prompts
    # repeat verbatim during RL, which a program's terminal output does not.
    prompts = sorted({c for ex in examples for _, c in ex.messages})
    phrases = phrase_tokens([ex.answer for ex in examples], prompts, limit=cfg.phrase_tokens)
    if cfg.real_outputs:
        t_run = time.monotonic()
        examples = with_real_outputs(
            examples, task_views(data, list(cfg.task_ids) or None), terminal_outputs, cfg.prompts
        )
        log(
            f"embedded policy: ran the {sum(e.kind == 'improve' for e in examples)} improve "
            "parents "
            f"for their terminal output in {time.monotonic() - t_run:.0f} s"
        )
        prompts = sorted({c for ex in examples for _, c in ex.messages})
    stats: dict[str, Any] = {}
    if any(ex.measure for ex in examples):
        t_run = time.monotonic()
        views = task_views(data, list(cfg.task_ids) or None)
        examples, stats = measure_revisions(examples, views, observe_programs, cfg.prompts)
        log(
            f"embedded policy: ran revision parents and children in "
            f"{time.monotonic() - t_run:.0f} s: {stats}"
        )
        prompts = sorted({c for ex in examples for _, c in ex.messages})
    answers = [ex.answer for ex in examples]
    tok = train_tokenizer(answers + prompts + stdlib_texts(), cfg.vocab_size, phrases)
    model = new_model(tok, cfg)
    tok = _as_loaded(tok, model.config)
    log(
        f"embedded policy: {len(examples)} examples, {model.num_parameters() / 1e6:.2f} M params, "
        f"training up to {cfg.sft_steps} steps / {cfg.sft_seconds:.0f} s"
    )
    import torch

    threads = torch.get_num_threads()
    if cfg.torch_threads:
        torch.set_num_threads(cfg.torch_threads)
    try:
        revisions = [ex for ex in examples if ex.effect is not None]
        record = sft(model, tok, examples + revisions * (cfg.revision_repeats - 1), cfg, log)
    finally:
        torch.set_num_threads(threads)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    manifest = {
        "key": key,
        "corpus_hash": chash,
        "config": asdict(cfg),
        "corpus": corpus_stats(examples),
        "revisions": stats,
        "params": model.num_parameters(),
        "build_seconds": round(time.monotonic() - t0, 2),
        "created_at": time.time(),
        **record,
    }
    save_model_dir(out, model, tok, MANIFEST, manifest)
    if record["steps"] < cfg.sft_steps:
        log(
            f"embedded policy: WARNING: sft_seconds={cfg.sft_seconds:.0f} stopped SFT after "
            f"{record['steps']} of "
            f"{cfg.sft_steps} steps (a loaded machine?); this under-trained policy is used now but "
            "not "
            f"reused: raise model.bootstrap.sft_seconds"
        )
    log(
        f"embedded policy: {record['steps']} steps in {record['seconds']} s "
        f"({record['steps_per_s']} steps/s), final loss "
        f"{record['loss_curve'][-1][2] if record['loss_curve'] else None}"
    )
    return out
