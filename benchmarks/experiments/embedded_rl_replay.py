"""Replay a run's real samples through the learner under several loss settings (docs/experiments/first-rl.md).

``python benchmarks/experiments/embedded_rl_replay.py RUN_DIR [--updates 10] [--out benchmarks/results]
[--variant NAME:key=value,key=value ...]``

A controlled, generation-free ablation of *what one configuration does to the policy* on the
same data. The samples of ``RUN_DIR/buffer/journal.bin`` (programs the embedded policy wrote
during a real `mlerl train`, executed and graded) are split by index: even -> training pool,
odd -> held-out probe set. For each variant, starting from the run's initial policy, the
learner makes ``--updates`` updates on the same sequence of batches (``learner.batch_size``
samples each, in journal order), each batch's behaviour log-probs recomputed under the current
policy first (so every update starts on-policy: ratio 1, as in a synchronous run). Then on the
held-out probe set, against the initial policy:

- ``dlogp_valid`` / ``dlogp_failed``: change of the mean per-token log-prob of responses that
  produced a valid submission / did not (RL should raise the first and lower the second);
- ``dlogp_valid_minus_failed``: their difference (the separation RL is meant to create);
- ``dentropy``: change of the mean per-token entropy of the policy on the probe responses;
- per update (mean over updates): ``pg_share_failed``, ``adv_std``, the policy grad norm.

Variants default to the embedded preset as run (``base``) and one change at a time.
Writes ``embedded_rl_replay.json``.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common
from _common import RESULTS, command_line, git_commit, machine_info  # noqa: E402

DEFAULT_VARIANTS = {
    "base": {},
    "whiten": {"normalize_advantages": True},
    "seq_mean": {"loss_agg": "seq_mean"},
    "whiten+seq_mean": {"normalize_advantages": True, "loss_agg": "seq_mean"},
}


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    """``name:key=value,key=value`` -> (name, overrides); values parsed as JSON when they can be."""
    name, _, rest = text.partition(":")
    out: dict[str, Any] = {}
    for part in filter(None, rest.split(",")):
        k, _, v = part.partition("=")
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return name, out


def split_samples(samples: list[Any]) -> tuple[list[Any], list[Any]]:
    """Even journal positions train, odd ones probe."""
    return samples[0::2], samples[1::2]


def probe_deltas(
    before: dict[str, list[float]], after: dict[str, list[float]], valid: list[bool]
) -> dict[str, float | None]:
    """Per-sample mean log-prob / entropy before and after -> the reported differences."""

    def mean_diff(key: str, pick: bool | None) -> float | None:
        idx = [i for i, v in enumerate(valid) if pick is None or v == pick]
        if not idx:
            return None
        return sum(after[key][i] - before[key][i] for i in idx) / len(idx)

    dv, df = mean_diff("logp", True), mean_diff("logp", False)
    return {
        "dlogp_valid": dv,
        "dlogp_failed": df,
        "dlogp_valid_minus_failed": None if dv is None or df is None else dv - df,
        "dentropy": mean_diff("entropy", None),
    }


def _probe(model: Any, samples: list[Any], temperature: float) -> dict[str, list[float]]:
    import torch

    from mlerl.learner import collate, token_logprobs

    logp_out, ent_out = [], []
    with torch.no_grad():
        for i in range(0, len(samples), 8):
            tb = collate(samples[i : i + 8])
            logp, ent = token_logprobs(model, tb, with_entropy=True, temperature=temperature)
            m = tb.mask.float()
            n = m.sum(-1).clamp(min=1)
            logp_out += ((logp * m).sum(-1) / n).tolist()
            ent_out += ((ent * m).sum(-1) / n).tolist()
    return {"logp": logp_out, "entropy": ent_out}


def _on_policy(model: Any, samples: list[Any], temperature: float) -> list[Any]:
    import msgspec
    import torch

    from mlerl.learner import collate, token_logprobs

    with torch.no_grad():
        logp, _ = token_logprobs(model, collate(samples), temperature=temperature)
    out = []
    for i, s in enumerate(samples):
        p, r = len(s.prompt_ids), len(s.response_ids)
        out.append(
            msgspec.structs.replace(s, behaviour_logprobs=logp[i, p - 1 : p - 1 + r].tolist())
        )
    return out


def run_variant(
    model0: Any,
    cfg0: Any,
    overrides: dict[str, Any],
    train: list[Any],
    probe: list[Any],
    updates: int,
    before: dict[str, list[float]],
    temperature: float | None = None,
) -> dict[str, Any]:
    import dataclasses

    from mlerl.learner import Learner

    cfg = dataclasses.replace(cfg0, **overrides)
    learner = Learner(cfg, copy.deepcopy(model0))
    b, per_update = cfg.batch_size, []
    for u in range(updates):
        batch = train[(u * b) % len(train) :][:b]
        if len(batch) < b:
            break
        m = learner.update(_on_policy(learner.policy, batch, temperature))
        per_update.append(
            {
                k: m.get(k)
                for k in (
                    "split/all/pg_share_failed",
                    "split/all/adv_std",
                    "grad_norm/policy",
                    "split/all/valid_frac",
                )
            }
        )
    learner.policy.eval()
    after = _probe(learner.policy, probe, temperature)
    mean = lambda k: (
        sum(x[k] for x in per_update if x[k] is not None)
        / max(1, sum(x[k] is not None for x in per_update))
    )  # noqa: E731
    return {
        "overrides": overrides,
        "updates": len(per_update),
        **probe_deltas(before, after, [s.valid_submission for s in probe]),
        "pg_share_failed": mean("split/all/pg_share_failed"),
        "adv_std": mean("split/all/adv_std"),
        "grad_norm": mean("grad_norm/policy"),
    }


def load_replay(run_dir: Path, threads: int):
    """What a replay of ``run_dir`` starts from: its learner config, its journal's samples (the
    infrastructure failures left out) and its initial policy (float32), torch on ``threads``
    threads and seeded 0."""
    import torch
    from transformers import AutoModelForCausalLM

    from mlerl.learner import LearnerConfig, read_journal
    from mlerl.protocol import ExecStatus, load_run, load_section

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    cfg0 = load_section(LearnerConfig, str(run_dir / "config.yaml"), "learner")
    samples = [
        s
        for s in read_journal(run_dir / "buffer" / "journal.bin")[0]
        if s.exec_status is not ExecStatus.INFRA_ERROR
    ]
    path = load_run(run_dir / "config.yaml").model.path
    return cfg0, samples, AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("--updates", type=int, default=10)
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--variant", action="append", default=[])
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)

    cfg0, samples, model0 = load_replay(args.run_dir, args.threads)
    train, probe = split_samples(samples)
    model0.eval()
    temperature = getattr(cfg0, "temperature", None)  # None: each sample's own sampling temperature
    before = _probe(model0, probe, temperature)
    variants = dict(parse_variant(v) for v in args.variant) if args.variant else DEFAULT_VARIANTS
    results = {}
    for name, overrides in variants.items():
        results[name] = run_variant(
            model0, cfg0, overrides, train, probe, args.updates, before, temperature
        )
        print(name, json.dumps(results[name]), flush=True)
    out = {
        "command": command_line(),
        "commit": git_commit(),
        "machine": machine_info(),
        "run_dir": str(args.run_dir),
        "samples": len(samples),
        "train": len(train),
        "probe": len(probe),
        "probe_valid": sum(s.valid_submission for s in probe),
        "variants": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "embedded_rl_replay.json").write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
