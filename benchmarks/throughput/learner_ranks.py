"""Time per learner update with 1 and 2 ranks (FSDP2 under torchrun) on the same batch.

    python benchmarks/throughput/learner_ranks.py [--updates 5] [--batch 8] [--prompt 256] [--response 128]

Runs ``Learner.update`` on one fixed batch ``--updates`` times after one warm-up update, once in
a plain process and once with ``torchrun --standalone --nproc_per_node=2`` (gloo on CPU, NCCL on
GPU), each rank pinned to ``--threads`` torch threads. The model has the embedded policy's shape
class (Qwen2, ``--hidden``/``--layers``/``--vocab``). Also reports the largest difference of the
policy weights after the first update between the two runs (the same update, to rounding).
Writes ``benchmarks/results/learner_ranks.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results"


def _batch(n: int, prompt: int, response: int, vocab: int):
    import torch

    from mlerl.protocol import ExecStatus, PromptKind, Sample

    out = []
    for seq in range(n):
        g = torch.Generator().manual_seed(seq)
        ids = torch.randint(1, vocab, (prompt + response,), generator=g).tolist()
        out.append(
            Sample(
                sample_id=f"a:{seq}",
                actor_id="a",
                seq=seq,
                task_id="t",
                prompt_kind=PromptKind.SCRATCH,
                prompt_ids=ids[:prompt],
                response_ids=ids[prompt:],
                behaviour_logprobs=[-7.0] * response,
                policy_version=0,
                t_sampled=0.0,
                duration_s=1.0 + seq % 4,
                exec_status=ExecStatus.OK,
                reward=float(seq % 3) - 1.0,
            )
        )
    return out


def worker(args: argparse.Namespace) -> None:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from mlerl.learner import Learner, LearnerConfig
    from mlerl.learner import full_state_dict

    torch.set_num_threads(args.threads)
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        torch.distributed.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank = torch.distributed.get_rank() if distributed else 0
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=args.vocab,
            hidden_size=args.hidden,
            num_hidden_layers=args.layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=args.hidden * 3,
            tie_word_embeddings=True,
        )
    )
    cfg = LearnerConfig(
        batch_size=args.batch,
        micro_batch_size=args.batch,
        bf16=args.bf16,
        gradient_checkpointing=False,
        lr=1e-4,
        critic_lr=1e-4,
    )
    device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if torch.cuda.is_available() else "cpu"
    if device != "cpu":
        torch.cuda.set_device(device)
    learner = Learner(cfg, model, device=device)
    batch = _batch(args.batch, args.prompt, args.response, args.vocab)
    learner.update(batch)  # warm-up, and the update whose result is compared
    first = {
        k: v.clone() for k, v in full_state_dict(learner.policy).items()
    }  # later updates are in place
    times = []
    for _ in range(args.updates):
        if distributed:
            torch.distributed.barrier()
        t0 = time.perf_counter()
        learner.update(batch)
        if distributed:
            torch.distributed.barrier()
        times.append(time.perf_counter() - t0)
    if rank == 0:
        torch.save(first, Path(args.out) / "first.pt")
        (Path(args.out) / "times.json").write_text(json.dumps(times))
    if distributed:
        torch.distributed.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=5)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--prompt", type=int, default=256)
    parser.add_argument("--response", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--bf16", action="store_true", help="FSDP2 mixed precision (GPU)")
    parser.add_argument("--ranks", default="1,2", help="rank counts to compare")
    parser.add_argument("--name", default="learner_ranks", help="results file stem")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    import torch

    passthrough = [a for a in sys.argv[1:]]
    result: dict = {"args": vars(args), "load_1min_before": os.getloadavg()[0], "runs": {}}
    firsts = {}
    with tempfile.TemporaryDirectory() as tmp:
        for ranks in [int(r) for r in args.ranks.split(",")]:
            out = Path(tmp) / str(ranks)
            out.mkdir()
            me = [str(Path(__file__).resolve()), *passthrough, "--worker", "--out", str(out)]
            argv = (
                [sys.executable, *me]
                if ranks == 1
                else [
                    sys.executable,
                    "-m",
                    "torch.distributed.run",
                    "--standalone",
                    f"--nproc_per_node={ranks}",
                    *me,
                ]
            )
            subprocess.run(argv, check=True)
            times = json.loads((out / "times.json").read_text())
            result["runs"][ranks] = {"times_s": times, "median_s": statistics.median(times)}
            firsts[ranks] = torch.load(out / "first.pt", weights_only=True)
    if 1 in firsts and len(firsts) > 1:
        other = firsts[max(firsts)]
        result["max_abs_weight_diff_after_first_update"] = max(
            (firsts[1][k].float() - other[k].float()).abs().max().item() for k in firsts[1]
        )
    result["load_1min_after"] = os.getloadavg()[0]
    RESULTS.mkdir(exist_ok=True)
    result["device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    (RESULTS / f"{args.name}.json").write_text(json.dumps(result, indent=2))
    for ranks, run in result["runs"].items():
        print(
            f"{ranks} rank(s): median {run['median_s']:.3f} s per update over {len(run['times_s'])}"
        )
    if "max_abs_weight_diff_after_first_update" in result:
        print(
            f"max |w1 - wN| after the first update: {result['max_abs_weight_diff_after_first_update']:.2e}"
        )


if __name__ == "__main__":
    main()
