"""Throughput of the sample stream: ``python benchmarks/throughput/protocol_throughput.py [--samples N] [--out PATH]``.

One actor process (this one) sends N samples to a receiver in a second process (spawned), over
``tcp://127.0.0.1`` and over ``ipc://``; the clock runs from the first ``send`` to the end of
``flush`` (every sample acknowledged); each case runs ``--repeat`` times and the median is
reported. Two receiver storages: ``memory`` (count only) and ``journal`` (append each sample's
bytes to a file, fsync once per received batch, then ack: the durable path the learner uses).
Two sample sizes: ``realistic`` (1024 prompt + 512 response tokens) and ``tiny`` (4 + 4).
``--security none,curve`` runs every case in plain text and with CURVE (keys generated per
run, ZAP authentication of the sender: what ``mlerl train`` uses by default). Writes ``benchmarks/results/protocol.json`` by default.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import platform
import tempfile
import time
from pathlib import Path

from mlerl.protocol import (
    CurveKeys,
    ExecStatus,
    PromptKind,
    Sample,
    SampleReceiver,
    SampleSender,
    encode,
    generate_keys,
)

RESULTS = Path(__file__).resolve().parents[1] / "results"


def _sample(seq: int, prompt_tokens: int, response_tokens: int) -> Sample:
    return Sample(
        sample_id=f"bench:{seq}",
        actor_id="bench",
        seq=seq,
        task_id="spaceship-titanic",
        prompt_kind=PromptKind.SCRATCH,
        prompt_ids=list(range(prompt_tokens)),
        response_ids=list(range(response_tokens)),
        behaviour_logprobs=[-0.7] * response_tokens,
        policy_version=1,
        t_sampled=1.0,
        t_exec_started=2.0,
        t_exec_finished=3.0,
        t_graded=3.5,
        duration_s=1.0,
        exec_status=ExecStatus.OK,
        markers=["imported packages"],
        reward=0.1,
        code="import pandas as pd\n" * 60,
        output_tail="training loss: 0.5\n" * 40,
    )


def _serve(bind: str, journal: str | None, endpoint: mp.Queue, keys: str | None) -> None:
    asyncio.run(_serve_async(bind, journal, endpoint, keys))


async def _serve_async(
    bind: str, journal: str | None, endpoint: mp.Queue, keys: str | None
) -> None:
    f = open(journal, "ab") if journal else None  # noqa: SIM115 - closed with the process

    async def on_sample(sample: Sample) -> None:
        if f is not None:
            f.write(encode(sample))

    async def commit() -> None:
        if f is not None:
            f.flush()
            os.fsync(f.fileno())

    receiver = SampleReceiver(
        bind, on_sample, commit=commit, curve=CurveKeys(keys) if keys else None
    )
    endpoint.put(receiver.endpoint)
    async with receiver:
        await asyncio.Event().wait()


async def _send_all(address: str, samples: list[Sample], keys: str | None) -> float:
    curve = CurveKeys(keys) if keys else None
    async with SampleSender(address, "bench", hwm=1000, resend_after_s=30.0, curve=curve) as sender:
        start = time.perf_counter()
        for sample in samples:
            await sender.send(sample)
        await sender.flush(timeout=600)
        return time.perf_counter() - start


def _measure(bind: str, journal: str | None, samples: list[Sample], keys: str | None) -> float:
    ctx = mp.get_context("spawn")
    queue: mp.Queue = ctx.Queue()
    proc = ctx.Process(target=_serve, args=(bind, journal, queue, keys), daemon=True)
    proc.start()
    try:
        address = queue.get(timeout=60)
        return asyncio.run(_send_all(address, samples, keys))
    finally:
        proc.kill()
        proc.join()


def _run_profile(
    profile: str, samples: list[Sample], tmp: str, repeat: int, securities: list[str]
) -> list[dict]:
    sample_bytes = len(encode(samples[0]))
    keys = str(generate_keys(f"{tmp}/keys").directory) if "curve" in securities else None
    results = []
    for transport in ("tcp", "ipc"):
        for storage in ("memory", "journal"):
            for security in securities:
                bind = "tcp://127.0.0.1:*" if transport == "tcp" else f"ipc://{tmp}/{storage}.sock"
                journal = (
                    f"{tmp}/{profile}-{transport}-{storage}.journal"
                    if storage == "journal"
                    else None
                )
                use = keys if security == "curve" else None
                runs = sorted(_measure(bind, journal, samples, use) for _ in range(repeat))
                results.append(
                    _result(profile, sample_bytes, transport, storage, security, samples, runs)
                )
                print(json.dumps(results[-1]))
    return results


def _result(
    profile: str,
    sample_bytes: int,
    transport: str,
    storage: str,
    security: str,
    samples: list[Sample],
    runs: list[float],
) -> dict:
    seconds = runs[len(runs) // 2]  # the median: the machine is shared and noisy
    return {
        "profile": profile,
        "sample_bytes": sample_bytes,
        "transport": transport,
        "storage": storage,
        "security": security,
        "samples": len(samples),
        "seconds": round(seconds, 3),
        "runs_seconds": [round(r, 3) for r in runs],
        "samples_per_s": round(len(samples) / seconds, 1),
        "mb_per_s": round(len(samples) * sample_bytes / seconds / 1e6, 2),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=5000)
    parser.add_argument("--prompt-tokens", type=int, default=1024)
    parser.add_argument("--response-tokens", type=int, default=512)
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs per case; the median is reported"
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "protocol.json")
    parser.add_argument("--security", default="none,curve", help="comma list of none, curve")
    args = parser.parse_args(argv)
    securities = args.security.split(",")
    if not set(securities) <= {"none", "curve"}:
        parser.error("--security: choose from none, curve")
    profiles = {"realistic": (args.prompt_tokens, args.response_tokens), "tiny": (4, 4)}
    load_at_start = os.getloadavg()[0]
    results = []
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="mlerl-bench-") as tmp:
        for profile, (prompt, response) in profiles.items():
            samples = [_sample(i, prompt, response) for i in range(args.samples)]
            results += _run_profile(profile, samples, tmp, args.repeat, securities)
    report = {
        "benchmark": "protocol.sample_stream",
        "description": "one sender process -> one receiver process, ack after storage, flush",
        "realistic_prompt_tokens": args.prompt_tokens,
        "realistic_response_tokens": args.response_tokens,
        "results": results,
        "machine": {
            "cpus": os.cpu_count(),
            "load_avg_1m_at_start": load_at_start,
            "load_avg_1m_at_end": os.getloadavg()[0],
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
