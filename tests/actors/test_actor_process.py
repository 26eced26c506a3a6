"""``python -m mlerl.actors`` as a process: SIGKILL mid-run, restart, exactly-once at the receiver."""

import asyncio
import os
import signal
import subprocess
import sys

import pytest
import yaml

from mlerl.protocol import announce, encode_weights
from mlerl.actors._state import ActorState
from mlerl.protocol import SampleReceiver, WeightBroadcaster, generate_keys

TASK = "standin-cancer-auc-tiny"


async def _until(cond, timeout, proc=None, log=None):
    async with asyncio.timeout(timeout):
        while not cond():
            if proc is not None and proc.poll() is not None:
                raise AssertionError(f"actor exited {proc.returncode}: {log.read_text()[-3000:]}")
            await asyncio.sleep(0.2)


def _start(config_path, log):
    return subprocess.Popen(
        [sys.executable, "-m", "mlerl.actors", "--config", str(config_path), "--actor-id", "a0"],
        stdout=open(log, "ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


@pytest.mark.slow
async def test_kill_restart_exactly_once_and_weight_updates(tmp_path, tiny_model_dir):
    from mlerl.bench import prepare

    data = tmp_path / "data"
    prepare(TASK, data)
    stored = []
    keys = generate_keys(tmp_path / "keys")  # the actor's default: <dir of config.yaml>/keys
    receiver = SampleReceiver("tcp://127.0.0.1:*", lambda s: stored.append(s), curve=keys)
    broadcaster = WeightBroadcaster("tcp://127.0.0.1:*", republish_s=0.5, curve=keys)
    config = {
        "actors": {
            "engine": "hf",
            "max_new_tokens": 8,
            "heartbeat_s": 0.5,
            "admission": {"max_in_flight": 2, "oversample": 1.0, "max_versions_behind": 0},
        },
        "sandbox": {"backend": "local", "work_root": str(tmp_path / "work")},
        "model": {"path": str(tiny_model_dir)},
        "seed": 0,
        "tasks": {"ids": [TASK], "data_dir": str(data), "tasks_dir": ""},
        "transport": {
            "samples_address": receiver.endpoint,
            "weights_address": broadcaster.endpoint,
        },
    }
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(config))
    log = tmp_path / "actor.log"
    async with receiver, broadcaster:
        proc = _start(config_path, log)
        try:
            await _until(lambda: len(stored) >= 4, 180, proc, log)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        before = len(stored)
        # the killed actor's durable state continues the numbering (no restart from 0)
        killed = ActorState(tmp_path / "actors" / "a0")
        assert killed.next_seq >= before
        assert all(s.seq >= killed.acked_seq + 1 for s in killed.pending())
        proc = _start(config_path, log)
        try:
            await _until(lambda: len(stored) >= before + 4, 180, proc, log)
            broadcaster.publish(announce(encode_weights(_perturbed(tiny_model_dir)), version=1))
            await _until(lambda: stored[-1].policy_version == 1, 180, proc, log)
        finally:
            proc.send_signal(signal.SIGTERM)
            code = await asyncio.to_thread(proc.wait, 60)
    assert code == 0, log.read_text()[-2000:]
    seqs = [s.seq for s in stored]
    assert seqs == list(range(len(seqs)))  # every seq once, in order, across the kill
    assert len({s.sample_id for s in stored}) == len(stored)
    versions = [s.policy_version for s in stored]
    assert versions == sorted(versions) and versions[-1] == 1
    state = tmp_path / "actors" / "a0"
    assert (state / "heartbeat.json").exists() and (state / "state.json").exists()


def _perturbed(model_dir):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    return {k: v + 0.01 for k, v in model.state_dict().items()}
