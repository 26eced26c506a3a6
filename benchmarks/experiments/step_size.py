"""How far one update moves the policy: a run's real batches replayed under several step sizes.

``python benchmarks/experiments/step_size.py RUN_DIR [--updates 10] [--probe 32] [--variant NAME:key=value,key=value ...] [--name step_size] [--out DIR]``

A generation-free measure of the step per update. The learner makes ``--updates`` updates on
the first batches of ``RUN_DIR``'s journal, in order (each batch's behaviour log-probs recomputed
under the current policy first, so every update starts on-policy, as in
``embedded_rl_replay.py``), from the run's initial policy, once per variant (one learner
setting changed: PPO epochs over each batch, up to the paper's Table 3 ``actor_ppo_epochs
100``; minibatches; the learning rate). After each update, with the decision probe
(``mlerl.learner.probe_decisions``, ``--probe`` sampled scratch answers on the task's prompt):

- ``parsed``: the share of answers whose program parses (where a larger step breaks the
  programs, this falls);
- the share of each of the best known configuration's decisions (``discovery.BEST_DECISIONS``)
  and of the decision most answers make for each setting (``MODEL``, ``LOG_TARGET``);
- ``logp_gain``: the mean per-token log-probability of held-out responses of the run (odd
  journal indices) under the updated policy minus under the initial one: how far the policy
  moved toward what the run sampled (the responses are the run's, not the variant's, so it is
  not a KL);
- the update's own diagnostics: clip fraction, KL to the reference, gradient norm.

It measures the step, not the result: replayed batches were drawn by the run's policy, not by
the variant's, so what a variant would have found is for ``discovery.py`` to measure.
Writes ``NAME.json`` and ``NAME.png`` (each measure per update, one line per variant).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common
from _common import RESULTS, command_line, git_commit, machine_info  # noqa: E402
from _discovery_figures import probe_keys  # noqa: E402
from embedded_rl_replay import (  # noqa: E402
    _on_policy,
    _probe,
    load_replay,
    parse_variant,
    split_samples,
)

DEFAULT_VARIANTS = {
    "epochs1": {},
    "epochs4": {"ppo_epochs": 4},
    "epochs16": {"ppo_epochs": 16},
    "epochs100": {"ppo_epochs": 100},
    "epochs100_mb8": {"ppo_epochs": 100, "minibatches": 8},
    "lr4x": {"lr": 1e-3},
}
"""One change at a time from the run's learner settings (the embedded preset: 1 epoch, one
minibatch, lr 2.5e-4). ``epochs100_mb8``: the paper's 100 passes with a step per sample."""


def logp_gain(before: list[float], after: list[float]) -> float:
    """Mean over responses of (mean per-token log pi) - (mean per-token log pi_0)."""
    return sum(a - b for b, a in zip(before, after, strict=True)) / max(len(before), 1)


def run_variant(
    model0: Any,
    tok: Any,
    cfg0: Any,
    overrides: dict[str, Any],
    train: list[Any],
    held_out: list[Any],
    args: Any,
    prompt: tuple[str, list[int], float],
) -> list[dict[str, Any]]:
    import copy
    import dataclasses

    from mlerl.learner import Learner
    from mlerl.learner import probe_decisions

    task, ids, temperature = prompt
    keys = (*probe_keys(task), "LOG_TARGET=False")
    cfg = dataclasses.replace(cfg0, **overrides)
    learner = Learner(cfg, copy.deepcopy(model0))
    before = _probe(model0, held_out, None)["logp"]
    rows = []
    for u in range(args.updates + 1):
        if u > 0:
            batch = train[(u - 1) * cfg.batch_size :][: cfg.batch_size]
            if len(batch) < cfg.batch_size:
                break
            t0 = time.time()
            m = learner.update(_on_policy(learner.policy, batch, None))
            diag = {
                "update_s": time.time() - t0,
                "clip_frac": m.get("policy/clipfrac"),
                "kl_ref": m.get("loss/kl"),
                "grad_norm": m.get("grad_norm/policy"),
            }
        else:
            diag = {}
        shares = probe_decisions(
            learner.policy,
            lambda x: tok.decode(x, skip_special_tokens=True),
            {task: (ids, temperature)},
            n=args.probe,
            max_new_tokens=320,
            seed=u,
            eos_token_id=tok.eos_token_id,
        )
        learner.policy.eval()
        after = _probe(learner.policy, held_out, None)["logp"]
        learner.policy.train()
        model_keys = sorted(k for k in shares if k.startswith(f"{task}/MODEL="))
        top_model = max(model_keys, key=lambda k: shares[k]) if model_keys else None
        rows.append(
            {
                "update": u,
                "parsed": shares.get(f"{task}/parsed", 0.0),
                **{k: shares.get(f"{task}/{k}", 0.0) for k in keys},
                "top_model": None if top_model is None else top_model.split("/")[-1],
                "top_model_share": None if top_model is None else shares[top_model],
                "logp_gain": logp_gain(before, after),
                **diag,
            }
        )
        print(overrides, json.dumps(rows[-1]), flush=True)
    return rows


def plot(results: dict[str, list[dict[str, Any]]], keys: list[str], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measures = ["parsed", "logp_gain", *keys]
    fig, axes = plt.subplots(1, len(measures), figsize=(4 * len(measures), 3.4), squeeze=False)
    for ax, measure in zip(axes[0], measures, strict=True):
        for i, (name, rows) in enumerate(results.items()):
            ax.plot([r["update"] for r in rows], [r[measure] for r in rows], "-o", ms=3,
                    color=f"C{i}", label=name)  # fmt: skip
        ax.set_title(measure[:40], fontsize=8)
        ax.set_xlabel("update")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("--updates", type=int, default=10)
    p.add_argument("--probe", type=int, default=32)
    p.add_argument("--variant", action="append", default=[])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--name", default="step_size")
    args = p.parse_args(argv)

    from transformers import AutoTokenizer

    from mlerl.protocol import PromptKind, load_run

    cfg0, samples, model0 = load_replay(args.run_dir, args.threads)
    train, held_out = split_samples(samples)
    scratch = next(s for s in samples if s.prompt_kind is PromptKind.SCRATCH)
    prompt = (scratch.task_id, list(scratch.prompt_ids), scratch.temperature)
    tok = AutoTokenizer.from_pretrained(load_run(args.run_dir / "config.yaml").model.path)
    variants = dict(parse_variant(v) for v in args.variant) if args.variant else DEFAULT_VARIANTS
    results = {
        name: run_variant(model0, tok, cfg0, o, train, held_out, args, prompt)
        for name, o in variants.items()
    }
    keys = [*probe_keys(prompt[0])]
    out = {
        "command": command_line(),
        "commit": git_commit(),
        "machine": machine_info(),
        "run_dir": str(args.run_dir),
        "task": prompt[0],
        "batch_size": cfg0.batch_size,
        "variants": {n: {"overrides": variants[n], "per_update": r} for n, r in results.items()},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(out, indent=1) + "\n")
    plot(results, keys, args.out / f"{args.name}.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
