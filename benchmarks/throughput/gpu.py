"""The GPU path, measured: generation, learner and weight-sync figures of real-size models.

    python benchmarks/throughput/gpu.py                                   # a CUDA GPU: -> benchmarks/results/gpu.json
    python benchmarks/throughput/gpu.py --models qwen2.5-0.5b --prompts 64
    python benchmarks/throughput/gpu.py --dry-run --out /tmp/gpu_dryrun.json   # CPU, tiny model (CI runs this)

For each model (Qwen2.5-0.5B and -3B by default, built at random from their published configs
by ``mlerl.embedded.build_random_model`` and cached under ``--model-cache``), in one process:

1. generation: the engine the paper-scale run uses (``VLLMEngine``, bf16) generates
   ``--prompts`` conversations at the paper's sampling (T 0.7, top-p 1, ``--new-tokens`` 1024)
   -> generated tokens/s (``benchmarks/throughput/engines.py``'s ``measure``: best and median of
   ``--repeats`` calls after a warm-up). A random model almost never emits its stop token, so
   nearly every response runs to ``--new-tokens``.
2. learner: ``build_learner`` loads the same directory; ``Learner.update`` runs on a synthetic
   batch (``--batch`` samples of ``--prompt-tokens`` + ``--response-tokens``, groups of 4 sharing
   a prompt) once to warm up, then ``--updates`` times -> tokens/s (prompt + response tokens per
   second of update) and MFU.
3. weight sync: learner -> engine, ``--sync-repeats`` times: ``publish_weights`` (gather,
   serialise, write the file the actors are told about) then ``engine.update_weights`` (read,
   verify size and sha256, load into the running engine). The ZeroMQ announcement between them
   carries a path, not the weights, and is left out.
4. memory: peak allocated by the learner in this process and the device's used memory (vLLM
   runs in its own process, so only ``device_used_gib`` includes it); on CPU the process's
   maximum resident set.

MFU. Model FLOPs per update (the PaLM paper's convention, appendix B), per sequence of S = p + r
tokens (p prompt, r response) for a model of L layers, attention width d_attn = heads x head_dim,
N_body non-embedding parameters and an LM head of V x d: one forward pass costs
2 N_body S + 4 L d_attn S^2 (weight matmuls, QK^T and AV; the causal mask's saving is not
subtracted) plus 2 V d r for the LM head, which the learner runs on the r response-predicting
positions only; a backward pass costs twice its forward. An update counts, from its
``LearnerConfig``: the policy's forward + backward per PPO epoch (and one more forward with the
proximal ratio), the reference's forward (``kl_coef`` > 0) and the critic's forward plus forward +
backward per epoch (GAE; its head is 1-wide). Gradient-checkpoint recomputation is not counted
(MFU, not hardware FLOPs utilisation). MFU = FLOPs per update / median update seconds / peak,
the peak being the GPU's dense bf16 tensor-core figure from its datasheet (``PEAK_BF16_TFLOPS``,
matched on the device name; ``--peak-tflops`` overrides it and is required for a GPU not listed).

The learner is by default the policy alone (group baseline, no critic, no KL reference: what a
3B policy with fp32 AdamW state fits into on one 80 GB GPU next to vLLM, and what the
tokens/s targets compare with); ``--paper-losses`` adds the paper's GAE critic and KL reference.

With ``--tests`` (the default on a GPU; ``--no-tests`` skips) it first runs the GPU tests,
``pytest -m gpu tests`` (``--tests-marker`` to change the selection, e.g. ``"gpu and not docker"``
without a Docker engine), and records their outcome in the results beside the figures, so one
command leaves one record of a lent GPU. It replaces ``scripts/gpu_readiness.py``.

Without a CUDA GPU it refuses (exit 2) and writes nothing, unless ``--dry-run``: then it runs
the same functions on CPU with the ``tiny`` architecture, ``HFEngine`` and small sizes, marks
the result ``"dry_run": true`` and writes it only to ``--out``, which may not be
``benchmarks/results/gpu.json`` (measured figures are never overwritten by a dry run).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common
from _common import (
    REPO,
    RESULTS,
    command_line,
    git_commit,
    machine_info,
    write_json,
)  # benchmarks/ is sys.path[0]
from engines import measure as measure_generation

GPU_RESULTS = RESULTS / "gpu.json"
PEAK_BF16_TFLOPS = (  # dense (no sparsity) bf16 tensor-core peak, vendor datasheets; first match wins
    ("H100 NVL", 835.5),
    ("H100 PCIe", 756.5),
    ("H100", 989.5),
    ("GH200", 989.5),
    ("H200", 989.5),
    ("A100", 312.0),
    ("L40S", 366.0),
)
GPU_DEFAULTS = dict(
    models="qwen2.5-0.5b,qwen2.5-3b",
    engine="vllm",
    prompts=128,
    new_tokens=1024,
    repeats=2,
    batch=32,
    micro_batch=4,
    prompt_tokens=512,
    response_tokens=1024,
    updates=3,
    sync_repeats=3,
)
DRY_DEFAULTS = dict(
    models="tiny",
    engine="hf",
    prompts=4,
    new_tokens=16,
    repeats=1,
    batch=8,
    micro_batch=4,
    prompt_tokens=32,
    response_tokens=32,
    updates=2,
    sync_repeats=2,
)


# ---- FLOPs ----------------------------------------------------------------------------------
def forward_flops(model_config: Any, prompt: int, response: int, *, lm_head: bool = True) -> float:
    """Model FLOPs of one forward pass over one sequence (see the module docstring)."""
    c = model_config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    d_attn = c.num_attention_heads * head_dim
    kv = c.num_key_value_heads * head_dim
    per_layer = (
        c.hidden_size * d_attn
        + 2 * c.hidden_size * kv
        + d_attn * c.hidden_size  # q, k, v, o
        + 3 * c.hidden_size * c.intermediate_size
    )  # gate, up, down
    s = prompt + response
    flops = 2.0 * c.num_hidden_layers * per_layer * s + 4.0 * c.num_hidden_layers * d_attn * s * s
    if lm_head:
        flops += 2.0 * c.vocab_size * c.hidden_size * response
    return flops


def update_flops(learner_config: Any, model_config: Any, lengths: list[tuple[int, int]]) -> float:
    """Model FLOPs of one ``Learner.update`` on sequences of (prompt, response) lengths."""
    cfg = learner_config
    policy = sum(forward_flops(model_config, p, r) for p, r in lengths)
    body = sum(forward_flops(model_config, p, r, lm_head=False) for p, r in lengths)
    passes = 3 * cfg.ppo_epochs * policy  # forward + backward (2x) per epoch
    if getattr(cfg.ratio_base, "value", cfg.ratio_base) == "proximal":
        passes += policy
    if cfg.kl_coef > 0:
        passes += policy  # the frozen reference's log-probs
    if (
        getattr(cfg.advantage, "value", cfg.advantage) == "gae"
        and getattr(cfg.critic, "value", cfg.critic) != "none"
    ):
        passes += body + 3 * cfg.ppo_epochs * body  # old values, then the value loss's steps
    return passes


def peak_tflops(device_name: str, override: float | None) -> tuple[float | None, str]:
    """(peak dense bf16 TFLOP/s, where it came from) for ``device_name``."""
    if override:
        return override, "--peak-tflops"
    for key, value in PEAK_BF16_TFLOPS:
        if key in device_name:
            return value, f"datasheet ({key})"
    return None, "unknown device: pass --peak-tflops"


# ---- the measurements -----------------------------------------------------------------------
def synthetic_batch(n: int, prompt: int, response: int, vocab: int, seed: int = 0) -> list:
    """``n`` samples in groups of 4 sharing a prompt, random tokens, varied rewards and durations."""
    import torch

    from mlerl.protocol import ExecStatus, PromptKind, Sample

    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        if i % 4 == 0:
            prompt_ids = torch.randint(3, vocab, (prompt,), generator=g).tolist()
        out.append(
            Sample(
                sample_id=f"gpu:{i}",
                actor_id="gpu",
                seq=i,
                task_id="synthetic",
                prompt_kind=PromptKind.SCRATCH,
                prompt_ids=prompt_ids,
                response_ids=torch.randint(3, vocab, (response,), generator=g).tolist(),
                behaviour_logprobs=[-11.0] * response,
                policy_version=0,
                temperature=0.7,
                t_sampled=0.0,
                duration_s=1.0 + i % 5,
                exec_status=ExecStatus.OK,
                reward=float(i % 3) - 1.0,
            )
        )
    return out


def learner_config(args: argparse.Namespace):
    from mlerl.learner import LearnerConfig

    common = dict(
        batch_size=args.batch,
        micro_batch_size=args.micro_batch,
        bf16=True,
        gradient_checkpointing=True,
        lr=1e-5,
        critic_lr=1e-5,
        publish_inline_max_bytes=64 * 1024 * 1024,
    )
    if args.paper_losses:
        return LearnerConfig(**common)  # the defaults are appendix B.1's: GAE critic, KL 0.001
    return LearnerConfig(**common, advantage="grpo", critic="none", kl_coef=0.0)


def _synchronize(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure_learner(
    learner: Any, batch: list, updates: int, peak: float | None, device: str
) -> dict:
    """Tokens/s, FLOPs and MFU of ``learner.update(batch)`` (after one warm-up update)."""
    learner.update(batch)
    times = []
    for _ in range(updates):
        _synchronize(device)
        t0 = time.perf_counter()
        learner.update(batch)
        _synchronize(device)
        times.append(time.perf_counter() - t0)
    lengths = [(len(s.prompt_ids), len(s.response_ids)) for s in batch]
    median = statistics.median(times)
    flops = update_flops(learner.config, learner.policy.config, lengths)
    tokens = sum(p + r for p, r in lengths)
    achieved = flops / median / 1e12
    return {
        "update_s": times,
        "update_s_median": median,
        "tokens_per_update": tokens,
        "tokens_per_s": tokens / median,
        "response_tokens_per_s": sum(r for _, r in lengths) / median,
        "flops_per_update": flops,
        "achieved_tflops": achieved,
        "mfu": achieved / peak if peak else None,
    }


async def measure_weight_sync(learner: Any, engine: Any, out_dir: Path, repeats: int) -> dict:
    """Seconds from the learner's weights to the engine's: publish, then load; ``repeats`` times."""
    from mlerl.learner import publish_weights

    publish, load = [], []
    for i in range(repeats):
        version = learner.version + i  # newer each time, so the engine loads every one
        t0 = time.perf_counter()
        update = publish_weights(
            learner.policy, version, out_dir, learner.config.publish_inline_max_bytes
        )
        t1 = time.perf_counter()
        await engine.update_weights(update)
        publish.append(t1 - t0)
        load.append(time.perf_counter() - t1)
        if update.uri != "inline":
            os.unlink(update.uri)  # 12 GB per file for the 3B model in fp32
        if engine.policy_version != version:
            raise RuntimeError(
                f"weight sync: the engine is at version {engine.policy_version}, not {version}"
            )
    total = [a + b for a, b in zip(publish, load)]
    return {
        "publish_s": publish,
        "engine_load_s": load,
        "total_s": total,
        "total_s_median": statistics.median(total),
        "bytes": update.size_bytes,
        "via": "inline" if update.uri == "inline" else "file",
        "engine_version_after": engine.policy_version,
    }


def memory(device: str) -> dict:
    import torch

    if device.startswith("cuda"):
        free, total = torch.cuda.mem_get_info()
        return {
            "learner_peak_allocated_gib": torch.cuda.max_memory_allocated() / 2**30,
            "device_used_gib": (total - free) / 2**30,
            "device_total_gib": total / 2**30,
        }
    return {
        "process_max_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 2**30
    }


def make_engine(kind: str, model_dir: Path, args: argparse.Namespace, device: str):
    if kind == "vllm":
        from mlerl.actors import VLLMEngine

        return VLLMEngine(
            model_dir,
            dtype="bfloat16",
            max_model_len=args.max_model_len,
            gpu_memory_utilization=args.gpu_memory_utilization,
            enforce_eager=not args.cuda_graphs,
        )
    from mlerl.actors import HFEngine

    dtype = "bfloat16" if device.startswith("cuda") else "float32"
    return HFEngine(model_dir, device=device, dtype=dtype, max_batch_size=args.prompts)


async def measure_model(
    arch: str, args: argparse.Namespace, device: str, peak: float | None
) -> dict:
    """Every figure of one architecture (engine first: vLLM reserves its share of the GPU)."""
    import torch

    from mlerl.embedded import build_random_model
    from mlerl.learner import build_learner

    t0 = time.perf_counter()
    model_dir = build_random_model(arch, Path(args.model_cache).expanduser() / arch, seed=0)
    row: dict = {
        "model_dir": str(model_dir),
        "build_or_reuse_s": time.perf_counter() - t0,
        "engine": args.engine,
    }
    engine = make_engine(args.engine, model_dir, args, device)
    learner = None
    try:
        gen = await measure_generation(engine, args.prompts, args.new_tokens, args.repeats)
        row["generation"] = {**gen, "temperature": 0.7, "top_p": 1.0}
        row["memory_after_generation"] = memory(device)
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        learner = build_learner(learner_config(args), torch.device(device), str(model_dir))
        row["params"] = learner.policy.num_parameters()
        batch = synthetic_batch(
            args.batch, args.prompt_tokens, args.response_tokens, learner.policy.config.vocab_size
        )
        row["learner"] = measure_learner(learner, batch, args.updates, peak, device)
        row["learner"]["paper_losses"] = args.paper_losses
        with tempfile.TemporaryDirectory(prefix="mlerl-gpu-sync-") as tmp:
            row["weight_sync"] = await measure_weight_sync(
                learner, engine, Path(tmp), args.sync_repeats
            )
        row["memory"] = memory(device)
    finally:
        await engine.close()
        del learner, engine
        gc.collect()
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    return row


def run_gpu_tests(marker: str, timeout_s: float = 3600) -> dict:
    """``pytest -m MARKER tests``: exit status, pytest's summary line and wall seconds."""
    argv = [sys.executable, "-m", "pytest", "-m", marker, "tests", "-q", "-p", "no:cacheprovider"]
    print(f"== tests: {' '.join(argv[1:])}", flush=True)
    t0 = time.perf_counter()
    try:
        done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout_s)
        code, lines = done.returncode, (done.stdout or "").strip().splitlines()
    except subprocess.TimeoutExpired:
        code, lines = None, [f"timed out after {timeout_s:.0f} s"]
    print("\n".join(lines[-30:]), flush=True)
    return {
        "command": "python " + " ".join(argv[1:]),
        "returncode": code,
        "summary": lines[-1] if lines else "",
        "wall_s": time.perf_counter() - t0,
    }


# ---- entry point ----------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="CPU, tiny model, HFEngine: checks the code path (CI)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"results file (default {GPU_RESULTS.relative_to(RESULTS.parent.parent)}; "
        "required with --dry-run, which may not write there)",
    )
    p.add_argument(
        "--models",
        help=f"comma list of mlerl.embedded.ARCHITECTURES (GPU: {GPU_DEFAULTS['models']})",
    )
    p.add_argument(
        "--model-cache",
        default="~/.cache/mlerl/random-models",
        help="where random models are built and reused",
    )
    p.add_argument(
        "--engine", choices=["vllm", "hf"], help="generation engine (GPU: vllm; dry run: hf)"
    )
    for name, what in (
        ("prompts", "conversations per generate call"),
        ("new-tokens", "max new tokens"),
        ("repeats", "timed generate calls"),
        ("batch", "learner samples per update"),
        ("micro-batch", "learner micro-batch"),
        ("prompt-tokens", "tokens per synthetic prompt"),
        ("response-tokens", "tokens per synthetic response"),
        ("updates", "timed learner updates"),
        ("sync-repeats", "timed weight syncs"),
    ):
        p.add_argument(
            f"--{name}",
            type=int,
            help=f"{what} (GPU: {GPU_DEFAULTS[name.replace('-', '_')]}; "
            f"dry run: {DRY_DEFAULTS[name.replace('-', '_')]})",
        )
    p.add_argument(
        "--paper-losses", action="store_true", help="GAE critic + KL reference (appendix B.1)"
    )
    p.add_argument(
        "--peak-tflops", type=float, default=None, help="peak dense bf16 TFLOP/s for MFU"
    )
    p.add_argument("--max-model-len", type=int, default=2048)
    p.add_argument(
        "--gpu-memory-utilization", type=float, default=0.2, help="vLLM's share of the GPU"
    )
    p.add_argument(
        "--tests",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run the GPU tests first and record their outcome (default: on a GPU yes, dry run no)",
    )
    p.add_argument("--tests-marker", default="gpu", help="pytest -m selection for --tests")
    p.add_argument(
        "--cuda-graphs",
        action="store_true",
        help="vLLM with CUDA graphs (VLLMEngine's default, and so the training run's, is eager)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.dry_run and (args.out is None or args.out.resolve() == GPU_RESULTS.resolve()):
        print(
            f"gpu.py: --dry-run needs --out PATH other than {GPU_RESULTS} (it holds measured GPU "
            "figures; a dry run never replaces them). Nothing was run or written.",
            file=sys.stderr,
        )
        return 2
    import torch

    cuda = torch.cuda.is_available()
    if not args.dry_run and not cuda:
        print(
            "gpu.py: no CUDA GPU visible to torch (torch.cuda.is_available() is False, or the CPU wheel "
            "is installed). Nothing was run or written. Run it on a GPU machine with CUDA torch "
            "(README, 'Running at the paper's scale'), or check the code path on CPU with "
            "--dry-run --out PATH.",
            file=sys.stderr,
        )
        return 2
    for key, value in (DRY_DEFAULTS if args.dry_run else GPU_DEFAULTS).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    out = args.out or GPU_RESULTS
    device = "cpu" if args.dry_run else "cuda"
    name = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    peak, peak_source = peak_tflops(name, args.peak_tflops)
    result: dict = {
        "benchmark": "gpu",
        "dry_run": args.dry_run,
        "device": name,
        "gpus": torch.cuda.device_count() if cuda else 0,
        "peak_bf16_tflops": peak,
        "peak_source": peak_source,
        "flops_formula": "per sequence, forward: 2*N_body*S + 4*L*d_attn*S^2 + 2*V*d*r (LM head on the r "
        "response positions); backward = 2x forward; policy fwd+bwd per epoch, + reference "
        "fwd, + critic fwd and fwd+bwd per epoch when configured; no recomputation counted",
        "torch": torch.__version__,
        "command": command_line(),
        "git_commit": git_commit(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": machine_info(),
        "settings": {
            k: v
            for k, v in vars(args).items()
            if k not in ("out", "dry_run", "tests", "tests_marker")
        },
        "gpu_tests": None,
        "models": {},
    }
    if args.tests if args.tests is not None else not args.dry_run:
        result["gpu_tests"] = run_gpu_tests(args.tests_marker)
    for arch in [m for m in args.models.split(",") if m]:
        print(f"== {arch}", flush=True)
        result["models"][arch] = asyncio.run(measure_model(arch, args, device, peak))
        row = result["models"][arch]
        print(
            f"{arch}: generation {row['generation']['tokens_per_s_median']:.0f} tok/s, learner "
            f"{row['learner']['tokens_per_s']:.0f} tok/s (MFU {row['learner']['mfu']}), weight sync "
            f"{row['weight_sync']['total_s_median']:.2f} s",
            flush=True,
        )
    result["machine"]["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
    write_json(out, result)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
