"""Generation throughput of the engines on a tiny random Qwen2: ``python benchmarks/throughput/engines.py``.

Writes (merges into) ``benchmarks/results/engines.json``, one entry per engine, so running it
in the main venv (``--engines hf``) and in ``.venv-vllm`` (``--engines vllm,openai``; openai
is measured against a vLLM OpenAI-compatible server this script starts) fills in all three. Throughput = generated tokens / wall seconds of a
``generate`` call with ``--prompts`` conversations, best and median of ``--repeats`` calls after
one warm-up call. The model is random, so almost every response runs to ``--new-tokens``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from mlerl.protocol import ChatMessage, InferenceEngine, SamplingParams

RESULTS = Path(__file__).resolve().parents[1] / "results"


async def measure(engine: InferenceEngine, prompts: int, new_tokens: int, repeats: int) -> dict:
    convs = [
        [ChatMessage(role="user", content=f"Write a training script, variant {i}.")]
        for i in range(prompts)
    ]
    params = SamplingParams(max_new_tokens=new_tokens, temperature=0.7, seed=0)
    await engine.generate(convs[:2], params)  # warm-up
    rates, tokens = [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = await engine.generate(convs, params)
        dt = time.perf_counter() - t0
        tokens = sum(len(c.token_ids) for c in out)
        rates.append(tokens / dt)
    return {
        "tokens_per_s_best": max(rates),
        "tokens_per_s_median": statistics.median(rates),
        "tokens_per_call": tokens,
        "prompts": prompts,
        "new_tokens": new_tokens,
        "repeats": repeats,
    }


@contextlib.contextmanager
def _vllm_server(model_dir: Path, timeout_s: float = 600.0) -> Iterator[str]:
    """A vLLM OpenAI-compatible server on a free loopback port, stopped on exit."""
    import httpx

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
           "--served-model-name", "tiny", "--dtype", "float32", "--max-model-len", "1024",
           "--gpu-memory-utilization", "0.3", "--enforce-eager", "--logprobs-mode", "processed_logprobs",
           "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("vLLM server failed to start")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


async def run(args: argparse.Namespace) -> dict:
    from mlerl.actors import build_tiny_model_dir

    model_dir = build_tiny_model_dir(
        Path(tempfile.mkdtemp()) / "tiny", hidden_size=256, num_layers=4
    )
    results: dict = {}
    engines = args.engines.split(",")
    if "hf" in engines:
        from mlerl.actors import HFEngine

        hf = HFEngine(model_dir, max_batch_size=args.prompts)
        results["hf"] = await measure(hf, args.prompts, args.new_tokens, args.repeats)
        await hf.close()
    if "vllm" in engines:
        from mlerl.actors import VLLMEngine

        vl = VLLMEngine(model_dir, dtype="float32", max_model_len=1024)
        try:
            results["vllm"] = await measure(vl, args.prompts, args.new_tokens, args.repeats)
        finally:
            await vl.close()
    if "openai" in engines:
        from mlerl.actors import OpenAIEngine

        with _vllm_server(model_dir) as url:
            oa = OpenAIEngine(url, "tiny")
            results["openai"] = await measure(oa, args.prompts, args.new_tokens, args.repeats)
            await oa.close()
    model = {"arch": "Qwen2", "hidden_size": 256, "layers": 4, "dtype": "float32"}
    for entry in results.values():
        entry.update(
            model=model,
            cpus=os.cpu_count(),
            machine=platform.machine(),
            load_avg_1m=os.getloadavg()[0],
            measured_at=time.strftime("%Y-%m-%dT%H:%M:%S"),
        )
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--engines",
        default="hf",
        help="comma list of hf, vllm, openai (openai: against a vLLM server started here)",
    )
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", type=Path, default=RESULTS / "engines.json")
    args = p.parse_args()
    results = asyncio.run(run(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    merged = json.loads(args.out.read_text()) if args.out.exists() else {}
    merged.update(results)
    args.out.write_text(json.dumps(merged, indent=2, sort_keys=True) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
