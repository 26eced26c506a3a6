"""Run two PPO updates (the second with whitened advantages) with FSDP2 (under torchrun) or in one plain process; write the published weights.

Usage: ``python fsdp_worker.py OUT_DIR [cpu|cuda] [SAMPLES]`` or ``torchrun --standalone
--nproc_per_node=N fsdp_worker.py OUT_DIR [cpu|cuda] [SAMPLES]`` (gloo on CPU, NCCL on CUDA;
SAMPLES per update, 8 by default, must split over the N ranks).
Not a test module: test_fsdp.py (CPU) and test_gpu.py (CUDA) run it both ways and compare.
"""

import json
import os
import sys
from pathlib import Path

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from mlerl.learner import Learner, LearnerConfig, publish_weights
from mlerl.learner._checkpoint import latest_checkpoint, save_checkpoint
from mlerl.protocol import ExecStatus, PromptKind, Sample

TINY = dict(
    vocab_size=512,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=128,
    tie_word_embeddings=True,
)


def batch(start: int, n: int = 8) -> list[Sample]:
    out = []
    for seq in range(start, start + n):
        g = torch.Generator().manual_seed(seq)
        p, r = 2 + seq % 3, 2 + (seq * 5) % 6
        ids = torch.randint(1, 512, (p + r,), generator=g).tolist()
        out.append(
            Sample(
                sample_id=f"a:{seq}",
                actor_id="a",
                seq=seq,
                task_id="t",
                prompt_kind=PromptKind.SCRATCH,
                prompt_ids=ids[:p],
                response_ids=ids[p:],
                behaviour_logprobs=[-6.0] * r,
                policy_version=0,
                t_sampled=0.0,
                duration_s=0.5 + seq % 4,
                exec_status=ExecStatus.OK,
                reward=float(seq % 3) - 1.0,
            )
        )
    return out


def main(out: Path, device: str = "cpu", n: int = 8) -> None:
    if "WORLD_SIZE" in os.environ:
        torch.distributed.init_process_group("cpu:gloo,cuda:nccl" if device == "cuda" else "gloo")
    if device == "cuda":
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
        torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(**TINY))
    cfg = LearnerConfig(
        batch_size=n,
        micro_batch_size=2,
        bf16=False,
        gradient_checkpointing=True,
        lr=1e-3,
        critic_lr=1e-3,
    )
    learner = Learner(cfg, model, device=device)
    for start in (0, n):
        # the second update whitens advantages: its mean and std must span both ranks' tokens
        learner.config.normalize_advantages = start == n
        metrics = learner.update(batch(start, n))
    update = publish_weights(learner.policy, learner.version, out, inline_max_bytes=0)
    save_checkpoint(out / "ckpt", learner, {"world": int(os.environ.get("WORLD_SIZE", 1))})
    if update is not None:
        (out / "uri").write_text(update.uri)
        (out / "grad_norm").write_text(repr(metrics["grad_norm/policy"]))
        (out / "split.json").write_text(
            json.dumps({k: v for k, v in metrics.items() if k.startswith("split/")})
        )
        assert latest_checkpoint(out / "ckpt") is not None
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]), *sys.argv[2:3], *[int(a) for a in sys.argv[3:4]])
