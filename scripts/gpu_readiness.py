"""GPU readiness: run the checks that need a GPU and write their figures to benchmarks/results/.

    python scripts/gpu_readiness.py [--small-model DIR] [--skip vllm,fsdp,run]

1. vllm: the vLLM engine and its weight sync on the GPU (`pytest -m vllm` in `.venv-vllm`,
   created by scripts/ci/setup_vllm.sh): generate, reload published weights, match a fresh
   engine (throughput figures, by hand: `.venv-vllm/bin/python benchmarks/engines.py --engines vllm`).
2. fsdp: the FSDP2 learner with bf16 mixed precision over 1 and min(2, GPUs) ranks on the same
   batch (benchmarks/learner_ranks.py --bf16): time per update and the weight difference after
   one update -> benchmarks/results/gpu_learner_ranks.json.
3. run: a short paper-scale-shaped run with a small model (``+experiment=paper_scale`` with
   ``model.path=--small-model`` or $MLERL_SMALL_MODEL, e.g. a local Qwen2.5-0.5B-Instruct, the
   embedded stand-in task, local sandbox, 3 updates of 8 samples, learner over min(2, GPUs)
   ranks) -> its metrics summarised in benchmarks/results/gpu_short_run.json.

Without a CUDA GPU it refuses at once (exit 2) and says so; nothing is written. Each check's
outcome (ok / failed / skipped, with the reason) goes to benchmarks/results/gpu_readiness.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"


def gpus() -> int:
    """CUDA devices torch can use (0 without CUDA torch or without a GPU)."""
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _run(name: str, argv: list[str], outcomes: dict, timeout: float, **kw) -> bool:
    print(f"== {name}: {' '.join(argv)}", flush=True)
    t0 = time.monotonic()
    try:
        done = subprocess.run(argv, cwd=REPO, timeout=timeout, **kw)
        ok = done.returncode == 0
        outcomes[name] = {"status": "ok" if ok else f"failed (exit {done.returncode})"}
    except subprocess.TimeoutExpired:
        ok = False
        outcomes[name] = {"status": f"failed (timeout {timeout:.0f} s)"}
    outcomes[name]["wall_s"] = round(time.monotonic() - t0, 1)
    return ok


def check_vllm(outcomes: dict) -> None:
    py = REPO / ".venv-vllm" / "bin" / "python"
    if not py.exists():
        outcomes["vllm"] = {"status": "skipped: .venv-vllm missing (bash scripts/ci/setup_vllm.sh)"}
        return
    _run("vllm", [str(py), "-m", "pytest", "-m", "vllm", "tests/actors", "-q"], outcomes, 1800)


def check_fsdp(outcomes: dict, n: int) -> None:
    ranks = "1" if n < 2 else "1,2"
    _run("fsdp_bf16", [sys.executable, "benchmarks/learner_ranks.py", "--bf16", "--ranks", ranks,
                       "--hidden", "512", "--layers", "8", "--vocab", "32000", "--batch", "16",
                       "--prompt", "1024", "--response", "512", "--threads", "4",
                       "--name", "gpu_learner_ranks"], outcomes, 1800)


def check_run(outcomes: dict, n: int, model: str) -> None:
    if not model:
        outcomes["short_run"] = {"status": "skipped: no --small-model / MLERL_SMALL_MODEL"}
        return
    run_dir = RESULTS.parent / "gpu_short_run"
    argv = [sys.executable, "-m", "mlerl.cli", "train", "+experiment=paper_scale", f"model.path={model}",
            f"hydra.run.dir={run_dir}", "tasks=standin_tiny", "sandbox=local", "instrument=ast",
            f"learner_procs={min(n, 2)}", "num_actors=1", "learner.batch_size=8", "learner.max_updates=3",
            "learner.checkpoint_every=3", "eval_samples=0", "logging=offline"]
    if _run("short_run", argv, outcomes, 3600):
        lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
        updates = [m for m in lines if m.get("stream") == "learner"]
        (RESULTS / "gpu_short_run.json").write_text(json.dumps({"updates": updates}, indent=2))
        try:  # the run's own plots, when the run made them
            import shutil

            for png in (run_dir / "plots").glob("*.png"):
                shutil.copy(png, RESULTS / f"gpu_short_run_{png.name}")
        except OSError:
            pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small-model", default=os.environ.get("MLERL_SMALL_MODEL", ""))
    parser.add_argument("--skip", default="", help="comma-separated: vllm, fsdp, run")
    args = parser.parse_args()
    n = gpus()
    if n == 0:
        print("gpu_readiness: no CUDA GPU visible to torch (torch.cuda.is_available() is False, or "
              "the CPU wheel is installed); these checks need one. Nothing was run or written. "
              "Install CUDA torch (README) and run on a GPU machine.", file=sys.stderr)
        return 2
    skip = set(filter(None, args.skip.split(",")))
    outcomes: dict = {"gpus": n}
    if "vllm" not in skip:
        check_vllm(outcomes)
    if "fsdp" not in skip:
        check_fsdp(outcomes, n)
    if "run" not in skip:
        check_run(outcomes, n, args.small_model)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "gpu_readiness.json").write_text(json.dumps(outcomes, indent=2))
    print(json.dumps(outcomes, indent=2))
    return 0 if all(str(v.get("status", "ok")).startswith(("ok", "skipped"))
                    for v in outcomes.values() if isinstance(v, dict)) else 1


if __name__ == "__main__":
    sys.exit(main())
