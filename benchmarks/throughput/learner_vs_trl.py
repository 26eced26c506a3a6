"""Learner throughput next to TRL: one policy update on the same model, batch and settings.

``python benchmarks/throughput/learner_vs_trl.py [--threads 1] [--batch-size 16 --micro-batch-size 4 ...]``
(``--skip-trl`` measures mlerl alone; TRL comes with ``pip install -e '.[bench]'``).

What is compared. TRL 1.x has no PPO trainer any more (PPOTrainer left the library), so the
closest equivalent of ``mlerl.learner.Learner.update`` is one optimizer step of TRL's
``GRPOTrainer``, and mlerl is configured to do the same update:

- the same Qwen2 weights (saved once to a temporary directory and loaded by both), fp32, CPU,
  no gradient checkpointing unless ``--gradient-checkpointing`` (then both);
- the same batch: ``batch_size`` samples in groups of ``group_size`` that share a prompt, with
  the same prompt and response token ids and rewards; behaviour log-probs are the initial
  model's, so the PPO ratio starts at 1 in both;
- the same loss: clipped ratio (eps 0.2), group-mean baseline without std scaling
  (mlerl ``advantage=grpo, grpo_std=false``; TRL ``scale_rewards="none"``), token mean over the
  whole batch (mlerl ``loss_agg=token_mean``; TRL ``loss_type="dapo"``), k3 KL to a frozen
  reference (coefficient ``--kl-coef``, so both run a reference forward), entropy bonus
  ``--entropy-coef``, no critic, no duration weighting;
- the same step: ``batch_size / micro_batch_size`` micro-batches accumulated into ONE AdamW
  step (lr 1e-5, no weight decay, grad-norm clip 1.0, constant learning rate).

What is timed. mlerl: the wall time of ``Learner.update(samples)`` (collate, reference
forward, forward/backward per micro-batch, clip, AdamW step, metrics). TRL: its own
``Trainer.train`` loop, timed by a callback from ``on_step_begin`` to ``on_step_end`` of each
optimizer step; the rollout is a ``rollout_func`` that hands back the pre-tokenized batch (no
generation), so the step holds TRL's padding, decoding of completions for the reward
function, reward and advantage computation, reference forward, forward/backward per
micro-batch, clip, AdamW step and metric gathering. The first ``--warmup`` updates of each
round are not timed. Tokens are counted once, from the batch, for both: prompt + response
tokens (no padding) and response tokens alone, divided by the update's wall time.

Known differences that remain: TRL pads all prompts of the batch to the longest (left) and
completions to the longest (right) and runs its LM head on every completion position (padding
included); mlerl packs each micro-batch's rows end to end in one row (per-sequence causal
attention, no padding) and runs a chunked LM head + log-softmax + entropy on response
positions only, never materialising the (tokens x vocab) logits; TRL's entropy bonus is a
per-micro-batch mean. The JSON's
``first_update_agreement`` compares the two parameter changes of the first update
(cosine of the deltas), which tells whether the two did the same update.

Writes ``benchmarks/results/learner_vs_trl.json`` (or ``--out``) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import msgspec
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common
from _common import git_commit, machine_info  # benchmarks/ is sys.path[0] when run as a script
from mlerl.learner import LearnerConfig, build_learner, collate, token_logprobs
from mlerl.protocol import ExecStatus, PromptKind, Sample

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "benchmarks" / "results" / "learner_vs_trl.json"
PAD_ID, EOS_ID = 0, 1  # the benchmark tokenizer's special tokens; sample tokens are >= 2


@dataclass
class BenchConfig:
    vocab_size: int = 8192
    """Vocabulary of the Qwen2 model (the embedded default policy's size)."""
    hidden_size: int = 256
    """Qwen2 hidden size."""
    num_layers: int = 4
    """Decoder layers."""
    num_heads: int = 4
    """Attention heads."""
    num_kv_heads: int = 2
    """Key/value heads."""
    intermediate_size: int = 768
    """MLP width."""
    batch_size: int = 16
    """Samples per update."""
    group_size: int = 4
    """Samples per prompt (TRL's num_generations; must divide batch_size and be >= 2)."""
    micro_batch_size: int = 4
    """Samples per forward/backward (TRL's per_device_train_batch_size; the embedded default's)."""
    prompt_len: int = 256
    """Longest prompt in tokens."""
    response_len: int = 512
    """Longest response in tokens."""
    length_jitter: float = 0.5
    """Lengths are drawn uniformly from [(1 - jitter) * len, len]; 0 makes every row full length."""
    kl_coef: float = 0.001
    """KL coefficient (TRL's beta); > 0 makes both run a reference model."""
    entropy_coef: float = 0.001
    """Entropy bonus coefficient."""
    lr: float = 1e-5
    """AdamW learning rate."""
    gradient_checkpointing: bool = False
    """Recompute activations in backward (both frameworks)."""
    warmup: int = 1
    """Untimed updates at the start of each round."""
    reps: int = 2
    """Timed updates per round and framework."""
    rounds: int = 2
    """Rounds of (mlerl, TRL); each builds both afresh, so load changes hit both."""
    threads: int = 0
    """torch intra-op threads for both (0: torch's default, one per core)."""
    seed: int = 0
    """Seeds the model init, the batch and both frameworks."""
    skip_trl: bool = False
    """Measure mlerl only."""
    out: str = str(DEFAULT_OUT)
    """Where the JSON goes."""

    def __post_init__(self) -> None:
        positive = (
            "vocab_size",
            "hidden_size",
            "num_layers",
            "num_heads",
            "num_kv_heads",
            "intermediate_size",
            "batch_size",
            "micro_batch_size",
            "prompt_len",
            "response_len",
            "reps",
            "rounds",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise SystemExit(
                    f"--{name.replace('_', '-')}: must be >= 1, got {getattr(self, name)}"
                )
        if self.vocab_size < 3:
            raise SystemExit("--vocab-size: must be >= 3 (pad, eos and at least one token)")
        if self.hidden_size % self.num_heads or self.num_heads % self.num_kv_heads:
            raise SystemExit(
                "--hidden-size must be a multiple of --num-heads, which must be a multiple of --num-kv-heads"
            )
        if self.group_size < 2 or self.batch_size % self.group_size:
            raise SystemExit(
                f"--group-size: must be >= 2 and divide --batch-size ({self.batch_size}), got {self.group_size}"
            )
        if self.batch_size % self.micro_batch_size:
            raise SystemExit(
                f"--micro-batch-size: must divide --batch-size ({self.batch_size}), got {self.micro_batch_size}"
            )
        if not 0 <= self.length_jitter < 1:
            raise SystemExit(f"--length-jitter: must be in [0, 1), got {self.length_jitter}")
        if self.threads < 0:
            raise SystemExit(f"--threads: must be >= 0, got {self.threads}")
        if self.warmup < 0 or self.kl_coef < 0 or self.entropy_coef < 0 or self.lr <= 0:
            raise SystemExit("--warmup, --kl-coef and --entropy-coef must be >= 0 and --lr > 0")


def parse_args(argv: list[str] | None) -> BenchConfig:
    """Command line -> :class:`BenchConfig` (one flag per field, same names with dashes)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, default in asdict(BenchConfig()).items():
        flag = "--" + name.replace("_", "-")
        if isinstance(default, bool):
            parser.add_argument(flag, action="store_true")
        else:
            parser.add_argument(flag, type=type(default), default=default)
    return BenchConfig(**vars(parser.parse_args(argv)))


# ---------------------------------------------------------------------------- model and batch
def save_initial_model(cfg: BenchConfig, directory: Path) -> Path:
    """A random Qwen2 and a word-level tokenizer (``<pad>``, ``<eos>``, ``t2``...), saved for both."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    vocab = {"<pad>": PAD_ID, "<eos>": EOS_ID} | {f"t{i}": i for i in range(2, cfg.vocab_size)}
    backend = Tokenizer(WordLevel(vocab, unk_token="<pad>"))
    backend.pre_tokenizer = WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>"
    )
    torch.manual_seed(cfg.seed)
    model = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=cfg.vocab_size,
            hidden_size=cfg.hidden_size,
            num_hidden_layers=cfg.num_layers,
            num_attention_heads=cfg.num_heads,
            num_key_value_heads=cfg.num_kv_heads,
            intermediate_size=cfg.intermediate_size,
            max_position_embeddings=max(4096, cfg.prompt_len + cfg.response_len),
            tie_word_embeddings=True,
            bos_token_id=None,
            eos_token_id=EOS_ID,
            pad_token_id=PAD_ID,
        )
    )
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def _length(rng: torch.Generator, longest: int, jitter: float) -> int:
    shortest = max(1, round(longest * (1 - jitter)))
    return int(torch.randint(shortest, longest + 1, (1,), generator=rng))


def make_batch(cfg: BenchConfig) -> list[Sample]:
    """``batch_size`` samples, ``group_size`` per prompt, random tokens and 0/1 rewards.

    Behaviour log-probs are placeholders here; :func:`score_behaviour` fills in the model's."""
    rng = torch.Generator().manual_seed(cfg.seed)
    tokens = lambda n: torch.randint(2, cfg.vocab_size, (n,), generator=rng).tolist()  # noqa: E731
    samples = []
    for group in range(cfg.batch_size // cfg.group_size):
        prompt = tokens(_length(rng, cfg.prompt_len, cfg.length_jitter))
        for k in range(cfg.group_size):
            response = tokens(_length(rng, cfg.response_len, cfg.length_jitter))
            seq = group * cfg.group_size + k
            samples.append(
                Sample(
                    sample_id=f"bench:{seq}",
                    actor_id="bench",
                    seq=seq,
                    task_id=f"g{group}",
                    prompt_kind=PromptKind.SCRATCH,
                    prompt_ids=prompt,
                    response_ids=response,
                    behaviour_logprobs=[0.0] * len(response),
                    policy_version=0,
                    t_sampled=0.0,
                    duration_s=1.0,
                    exec_status=ExecStatus.OK,
                    reward=float(k % 2),  # every group has both rewards
                )
            )
    return samples


@torch.no_grad()
def score_behaviour(model_dir: Path, samples: list[Sample]) -> list[Sample]:
    """The samples with behaviour log-probs of the initial model (so the PPO ratio starts at 1)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    out = []
    for s in samples:
        tb = collate([s], PAD_ID)
        logprobs, _ = token_logprobs(model, tb)
        p = len(s.prompt_ids)
        behaviour = logprobs[0, p - 1 : p - 1 + len(s.response_ids)].tolist()
        out.append(msgspec.structs.replace(s, behaviour_logprobs=behaviour))
    return out


def batch_tokens(samples: list[Sample]) -> dict[str, int]:
    """Tokens in the batch, counted once for both frameworks (no padding)."""
    prompt = sum(len(s.prompt_ids) for s in samples)
    response = sum(len(s.response_ids) for s in samples)
    return {
        "samples": len(samples),
        "prompt_tokens": prompt,
        "response_tokens": response,
        "tokens": prompt + response,
    }


# ---------------------------------------------------------------------------- mlerl
def mlerl_config(cfg: BenchConfig) -> LearnerConfig:
    """The learner configured for TRL's GRPO update (see the module docstring)."""
    return LearnerConfig(
        batch_size=cfg.batch_size,
        ppo_epochs=1,
        minibatches=1,
        micro_batch_size=cfg.micro_batch_size,
        lr=cfg.lr,
        weight_decay=0.0,
        grad_clip=1.0,
        clip_ratio=0.2,
        entropy_coef=cfg.entropy_coef,
        kl_coef=cfg.kl_coef,
        kl_estimator="k3",
        advantage="grpo",
        grpo_std=False,
        critic="none",
        loss_agg="token_mean",
        duration_weighting="none",
        ratio_base="behaviour",
        bf16=False,
        gradient_checkpointing=cfg.gradient_checkpointing,
        fsdp=False,
    )


def run_mlerl(cfg: BenchConfig, model_dir: Path, samples: list[Sample], work: Path) -> dict:
    """Warm-up + timed ``Learner.update`` calls; returns update times and the first update's weights."""
    learner = build_learner(mlerl_config(cfg), torch.device("cpu"), str(model_dir), cfg.seed)
    times, cpu, first = [], [], None
    for i in range(cfg.warmup + cfg.reps):
        t0, c0 = time.perf_counter(), time.process_time()
        learner.update(samples)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        if i == 0:
            first = _params(learner.policy)
        if i >= cfg.warmup:
            times.append(dt)
            cpu.append(dc)
    return {
        "update_s": times,
        "cpu_s": cpu,
        "updates_applied": learner.version,
        "first_update_params": first,
        "torch_threads": torch.get_num_threads(),
    }


def _params(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


# ---------------------------------------------------------------------------- TRL
def trl_rollout(samples: list[Sample], group_size: int):
    """A ``rollout_func`` that returns the pre-tokenized batch instead of generating.

    TRL hands it the generation batch's prompts (``"g<group>"``, each repeated ``group_size``
    times); the k-th occurrence of a group's prompt gets the group's k-th sample."""
    groups: dict[str, list[Sample]] = {}
    for s in samples:
        groups.setdefault(s.task_id, []).append(s)

    def rollout(prompts: list[str], trainer) -> dict[str, list]:
        seen: dict[str, int] = {}
        chosen = []
        for p in prompts:
            k = seen.get(p, 0)
            seen[p] = k + 1
            if k >= group_size:
                raise RuntimeError(
                    f"TRL asked for more than {group_size} completions of prompt {p!r}"
                )
            chosen.append(groups[p][k])
        return {
            "prompt_ids": [list(s.prompt_ids) for s in chosen],
            "completion_ids": [list(s.response_ids) for s in chosen],
            "logprobs": [list(s.behaviour_logprobs) for s in chosen],
            "bench_reward": [s.reward for s in chosen],
        }

    return rollout


def bench_reward(prompts, completions, bench_reward, **_) -> list[float]:
    """TRL reward function: the sample's reward, forwarded by :func:`trl_rollout`."""
    return list(bench_reward)


def trl_args(cfg: BenchConfig, output_dir: Path):
    """GRPOConfig for the same update as :func:`mlerl_config` (see the module docstring)."""
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(output_dir),
        use_cpu=True,
        bf16=False,
        fp16=False,
        seed=cfg.seed,
        report_to="none",
        logging_strategy="no",
        save_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
        per_device_train_batch_size=cfg.micro_batch_size,
        gradient_accumulation_steps=cfg.batch_size // cfg.micro_batch_size,
        num_generations=cfg.group_size,
        num_iterations=1,
        max_steps=cfg.warmup + cfg.reps,
        max_completion_length=cfg.response_len,
        learning_rate=cfg.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        optim="adamw_torch",
        max_grad_norm=1.0,
        epsilon=0.2,
        beta=cfg.kl_coef,
        entropy_coef=cfg.entropy_coef,
        loss_type="dapo",
        scale_rewards="none",
        temperature=1.0,
        gradient_checkpointing=cfg.gradient_checkpointing,
        mask_truncated_completions=False,
        model_init_kwargs={"dtype": torch.float32},
    )


def run_trl(cfg: BenchConfig, model_dir: Path, samples: list[Sample], work: Path) -> dict:
    """TRL's own training loop for warm-up + reps optimizer steps, each timed by a callback."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is flagged experimental
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOTrainer

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []
            self.cpu: list[float] = []
            self.first: dict[str, torch.Tensor] | None = None

        def on_step_begin(self, args, state, control, **kw):
            self.threads = torch.get_num_threads()  # accelerate may change it; recorded to be sure
            self.t0, self.c0 = time.perf_counter(), time.process_time()

        def on_step_end(self, args, state, control, model=None, **kw):
            self.times.append(time.perf_counter() - self.t0)
            self.cpu.append(time.process_time() - self.c0)
            if state.global_step == 1:
                self.first = _params(model)

    prompts = sorted({s.task_id for s in samples}, key=lambda t: int(t[1:]))
    timer = StepTimer()
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=bench_reward,
        args=trl_args(cfg, work / "trl"),
        train_dataset=Dataset.from_dict({"prompt": prompts}),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        rollout_func=trl_rollout(samples, cfg.group_size),
        callbacks=[timer],
    )
    trainer.train()
    steps = trainer.state.global_step
    return {
        "update_s": timer.times[cfg.warmup :],
        "cpu_s": timer.cpu[cfg.warmup :],
        "updates_applied": steps,
        "tokens_seen_per_update": trainer.state.num_input_tokens_seen / max(steps, 1),
        "first_update_params": timer.first,
        "torch_threads": timer.threads,
    }


# ---------------------------------------------------------------------------- report
def summarise(times: list[float], tokens: dict[str, int], cpu: list[float] | None = None) -> dict:
    """Median and spread of update times, and throughput at the median; with ``cpu`` (this
    process's CPU seconds per update), tokens per CPU second too: on a loaded host the wall time
    includes waits for a core, the CPU time does not."""
    median = statistics.median(times)
    extra = {}
    if cpu:
        extra = {
            "cpu_s": [round(c, 4) for c in cpu],
            "median_cpu_s": statistics.median(cpu),
            "tokens_per_cpu_s": tokens["tokens"] / statistics.median(cpu),
        }
    return extra | {
        "update_s": [round(t, 4) for t in times],
        "median_s": median,
        "min_s": min(times),
        "max_s": max(times),
        "stdev_s": statistics.stdev(times) if len(times) > 1 else 0.0,
        "tokens_per_s": tokens["tokens"] / median,
        "response_tokens_per_s": tokens["response_tokens"] / median,
        "tokens_per_s_range": [tokens["tokens"] / max(times), tokens["tokens"] / min(times)],
    }


def agreement(
    initial: dict[str, torch.Tensor], a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]
) -> dict:
    """Cosine and relative L2 difference of the two first-update parameter changes."""
    if set(a) != set(b):
        raise RuntimeError(f"parameter names differ: {sorted(set(a) ^ set(b))[:5]}")
    # float64: millions of lr-sized steps summed in float32 put the cosine visibly above 1
    da = torch.cat([(a[n] - initial[n]).flatten() for n in sorted(a)]).double()
    db = torch.cat([(b[n] - initial[n]).flatten() for n in sorted(a)]).double()
    cos = float(da @ db / (da.norm() * db.norm()).clamp(min=1e-300))
    return {
        "cosine": cos,
        "relative_l2_diff": float((da - db).norm() / da.norm().clamp(min=1e-300)),
    }


def machine() -> dict:
    """`_common.machine_info` (its load average is taken before and after the run here) plus the
    facts that change how a learner timing reads."""
    info = {k: v for k, v in machine_info().items() if k != "load_avg"}
    return info | {
        "torch_threads": torch.get_num_threads(),
        "processor": platform.machine(),
        "niceness": os.nice(0),
    }


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("torch", "transformers", "trl", "accelerate", "datasets", "mlerl-learner"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def table(results: dict, tokens: dict) -> str:
    lines = [
        f"{tokens['samples']} samples, {tokens['tokens']} tokens ({tokens['response_tokens']} response) per update",
        f"{'':<22}{'median s':>10}{'min-max s':>16}{'tokens/s':>11}{'resp tok/s':>12}{'cpu s':>8}{'tok/cpu-s':>11}",
    ]
    for name, r in results.items():
        lines.append(
            f"{name:<22}{r['median_s']:>10.3f}{r['min_s']:>8.3f}-{r['max_s']:<7.3f}"
            f"{r['tokens_per_s']:>11.0f}{r['response_tokens_per_s']:>12.0f}"
            f"{r.get('median_cpu_s', float('nan')):>8.2f}{r.get('tokens_per_cpu_s', float('nan')):>11.0f}"
        )
    return "\n".join(lines)


def measure(
    cfg: BenchConfig, model_dir: Path, samples: list[Sample], work: Path
) -> dict[str, dict]:
    """``rounds`` x (mlerl, then TRL), each built afresh; update times pooled per framework."""
    runners = {"mlerl": run_mlerl} | ({} if cfg.skip_trl else {"trl": run_trl})
    raw: dict[str, dict] = {name: {"update_s": [], "cpu_s": [], "load_avg": []} for name in runners}
    for round_ in range(cfg.rounds):
        for name, run in runners.items():
            load = os.getloadavg()[0]
            r = run(cfg, model_dir, samples, work / f"round{round_}")
            acc = raw[name]
            acc["update_s"] += r.pop("update_s")
            acc["cpu_s"] += r.pop("cpu_s")
            acc["load_avg"].append(
                [load, os.getloadavg()[0]]
            )  # 1-minute load before and after the block
            first = r.pop("first_update_params")
            acc.setdefault("first_update_params", first)  # round 0's
            acc.update(r)
    return raw


def build_report(
    cfg: BenchConfig,
    argv: list[str],
    raw: dict[str, dict],
    tokens: dict[str, int],
    initial: dict[str, torch.Tensor],
    load_before: tuple[float, ...],
) -> dict:
    """Everything the JSON holds: command, versions, machine, config, batch, results."""
    keep = ("updates_applied", "torch_threads", "load_avg", "tokens_seen_per_update")
    results = {
        name: summarise(r["update_s"], tokens, r.get("cpu_s")) | {k: r[k] for k in keep if k in r}
        for name, r in raw.items()
    }
    report = {
        "benchmark": "learner_vs_trl",
        "command": shlex.join(["python", "benchmarks/throughput/learner_vs_trl.py", *argv]),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "git_commit": git_commit(),
        "versions": versions(),
        "machine": machine()
        | {"load_avg_before": list(load_before), "load_avg_after": list(os.getloadavg())},
        "config": asdict(cfg),
        "batch": tokens,
        "compared": {
            "mlerl": "mlerl.learner.Learner.update (GRPO baseline, no critic, token mean)",
            "trl": "trl.GRPOTrainer.train, one optimizer step per update (loss_type dapo), "
            "rollout_func returning the pre-tokenized batch",
        },
        "results": results,
    }
    if "trl" in raw:
        report["mlerl_over_trl_tokens_per_s"] = (
            results["mlerl"]["tokens_per_s"] / results["trl"]["tokens_per_s"]
        )
        report["mlerl_over_trl_tokens_per_cpu_s"] = (
            results["mlerl"]["tokens_per_cpu_s"] / results["trl"]["tokens_per_cpu_s"]
        )
        report["first_update_agreement"] = agreement(
            initial, raw["mlerl"]["first_update_params"], raw["trl"]["first_update_params"]
        )
    return report


def main(argv: list[str] | None = None) -> dict:
    from transformers import AutoModelForCausalLM

    argv = sys.argv[1:] if argv is None else argv
    cfg = parse_args(argv)
    if not cfg.skip_trl:
        try:
            import trl  # noqa: F401
        except ImportError:
            raise SystemExit(
                "TRL is not installed: pip install -e '.[bench]' (or pass --skip-trl)"
            ) from None
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="learner_vs_trl_") as tmp:
        work = Path(tmp)
        model_dir = save_initial_model(cfg, work / "model")
        samples = score_behaviour(model_dir, make_batch(cfg))
        initial = _params(AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32))
        raw = measure(cfg, model_dir, samples, work)
    tokens = batch_tokens(samples)
    report = build_report(cfg, argv, raw, tokens, initial, load_before)
    out = Path(cfg.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    names = {"mlerl": "mlerl Learner.update", "trl": "TRL GRPOTrainer"}
    print(table({names[k]: v for k, v in report["results"].items()}, tokens))
    if "first_update_agreement" in report:
        print(
            f"first update, cosine of the two parameter changes: {report['first_update_agreement']['cosine']:.5f}"
        )
    print(f"wrote {out}")
    return report


if __name__ == "__main__":
    main()
