"""The learner's door, against a real `python -m mlerl.learner` process over real ZeroMQ sockets:
poisoned samples are acked but refused (recorded, counted, never journaled or trained on),
senders without the run's actor key are never heard, weights go only to key holders, and a
bad sample that an older build journaled is skipped on restart instead of crash-looping."""

from __future__ import annotations

import asyncio
import json
import math
import shutil
import subprocess
import sys

import msgspec
import pytest

from mlerl.learner import ExperienceBuffer
from mlerl.learner._buffer import read_journal
from mlerl.learner._publish import load_weight_update
from mlerl.protocol import CurveKeys, SampleSender, WeightSubscriber, generate_keys

from .test_process import _config as _process_config
from .test_process import _port


def _config(tmp_path, model_dir, max_updates, ports):
    """The process tests' run config, the learner on one torch thread."""
    return _process_config(tmp_path, model_dir, max_updates, ports, torch_threads=1)


def _start(config, log):
    return subprocess.Popen(
        [sys.executable, "-m", "mlerl.learner", "--config", str(config)],
        stdout=open(log, "ab"),
        stderr=subprocess.STDOUT,
    )  # noqa: SIM115


async def _keys(run_dir, proc, log) -> CurveKeys:
    async with asyncio.timeout(300):
        while not (run_dir / "keys" / "learner.key").exists():
            assert proc.poll() is None, log.read_text()[-3000:]
            await asyncio.sleep(0.2)
    return CurveKeys(run_dir / "keys")


async def _version(sub, version, proc, log, timeout=300.0):
    """The first weight update at ``version`` or later (the learner must stay up meanwhile)."""
    update = None
    async with asyncio.timeout(timeout):
        while update is None or update.version < version:
            assert proc.poll() is None, log.read_text()[-3000:]
            update = await _latest(sub, 1.0) or update
    return update


async def _stop(proc, log) -> None:
    """SIGTERM, the learner's clean stop: it exits 0."""
    proc.terminate()
    assert await asyncio.to_thread(proc.wait, 300) == 0, log.read_text()[-3000:]


async def _flush(sender, proc, log, timeout=300.0) -> None:
    """``sender.flush``; on a timeout, fail with what the sender and the learner knew."""
    try:
        await sender.flush(timeout=timeout)
    except TimeoutError:
        raise AssertionError(
            f"samples not acked within {timeout} s: acked_seq {sender.acked_seq}, unacked "
            f"{sender.unacked}, counters {sender.counters}, learner exit code {proc.poll()}\n"
            + log.read_text()[-3000:]
        ) from None


async def _not_delivered(address, actor_id, curve, sample, wait_s) -> bool:
    async with SampleSender(address, actor_id, curve=curve, resend_after_s=0.5) as sender:
        await sender.send(sample)
        try:
            await sender.flush(timeout=wait_s)
        except TimeoutError:
            return True
        return False


async def _latest(sub, timeout):
    try:
        async with asyncio.timeout(timeout):
            return await sub.latest()
    except TimeoutError:
        return None


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_poisoned_and_unauthenticated_samples_never_reach_training(
    tmp_path, make_sample, tiny_model
):
    model_dir = tmp_path / "model"
    tiny_model().save_pretrained(model_dir)  # vocab_size 512
    ports = (_port(), _port())
    samples_at, weights_at = f"tcp://127.0.0.1:{ports[0]}", f"tcp://127.0.0.1:{ports[1]}"
    run, log = tmp_path / "run", tmp_path / "learner.log"

    def ok(seq, **kw):
        return make_sample(
            **{"seq": seq, "reward": float(seq % 2), "t_sampled": 1000.0 + seq, **kw}
        )

    poisons = {
        1: msgspec.structs.replace(ok(1), behaviour_logprobs=[-0.5, math.nan, -0.5, -0.5]),
        2: msgspec.structs.replace(ok(2), behaviour_logprobs=[-math.inf, -0.5, -0.5, -0.5]),
        4: msgspec.structs.replace(ok(4), response_ids=[1, 2, 512, 3]),  # one past the last row
        5: ok(5, reward=1e6),
    }
    stream = [poisons.get(seq) or ok(seq) for seq in range(8)]  # good: 0, 3, 6, 7

    # max_updates is never reached: the learner stays up until the test stops it (SIGTERM), so
    # its acks, resent if one is lost, are never raced by its exit
    config = _config(tmp_path, model_dir, 3, ports)
    proc = _start(config, log)
    try:
        keys = await _keys(run, proc, log)
        # strangers: no CURVE at all, and a key pair of their own that knows the learner's public key
        generate_keys(tmp_path / "stranger")
        shutil.copy(run / "keys" / "learner.key", tmp_path / "stranger" / "learner.key")
        stranger = CurveKeys(tmp_path / "stranger")
        forged = ok(0, reward=9.0, task_id="forged")  # would take a0's seq 0 if it got in
        assert await _not_delivered(samples_at, "a0", None, forged, 3.0)
        assert await _not_delivered(samples_at, "a0", stranger, forged, 3.0)

        async with (
            WeightSubscriber(weights_at) as plain,
            WeightSubscriber(weights_at, curve=stranger) as odd,
        ):
            async with (
                SampleSender(samples_at, "a0", curve=keys) as sender,
                WeightSubscriber(weights_at, curve=keys) as sub,
            ):
                for sample in stream:
                    await sender.send(sample)
                await _flush(sender, proc, log)  # refused samples are acked too: no endless resend
                update = await _version(sub, 1, proc, log)
            assert await _latest(plain, 2.0) is None and await _latest(odd, 0.5) is None
        await _stop(proc, log)
    finally:
        proc.kill()

    journal = read_journal(run / "buffer" / "journal.bin")[0]
    assert [s.seq for s in journal] == [0, 3, 6, 7] and all(s.task_id != "forged" for s in journal)
    refused = [json.loads(x) for x in (run / "buffer" / "refused.jsonl").read_text().splitlines()]
    assert [(r["seq"], r["reason"].split(":")[0]) for r in refused] == [
        (1, "behaviour_logprobs"),
        (2, "behaviour_logprobs"),
        (4, "response_ids"),
        (5, "reward"),
    ]
    metrics = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert metrics["buffer/refused"] == 4.0 and metrics["refused/behaviour_logprobs"] == 2.0
    assert metrics["refused/response_ids"] == 1.0 and metrics["refused/reward"] == 1.0
    assert metrics["buffer/added"] == 4.0 and metrics["buffer/pending"] == 0.0
    model = tiny_model(seed=9)
    load_weight_update(model, update)
    assert all(p.isfinite().all() for p in model.parameters())  # trained on the 4 good ones only
    text = log.read_text()
    assert "unknown CURVE key" in text and "refused sample a0:5" in text

    # an older build journaled a sample out of the vocabulary: the restart skips it and trains on
    old = ExperienceBuffer(run / "buffer")
    old.add(msgspec.structs.replace(ok(8), prompt_ids=[600, 1, 2]))
    old.close()
    proc = _start(config, log)
    try:
        keys = await _keys(run, proc, log)
        async with (
            SampleSender(samples_at, "a0", curve=keys) as sender,
            WeightSubscriber(weights_at, curve=keys) as sub,
        ):
            for seq in range(9, 13):
                await sender.send(ok(seq))
            await _flush(sender, proc, log)
            await _version(sub, 2, proc, log)
        await _stop(proc, log)
    finally:
        proc.kill()
    steps = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in steps] == [1, 2] and steps[-1]["refused/prompt_ids"] == 1.0
    refused = [json.loads(x) for x in (run / "buffer" / "refused.jsonl").read_text().splitlines()]
    assert refused[-1]["seq"] == 8 and "outside the vocabulary" in refused[-1]["reason"]
