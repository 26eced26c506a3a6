"""End to end: `python -m mlerl.learner` over the real transport, then a restart that resumes;
with self-imitation, the run's best program replayed before and after the resume."""

import asyncio
import json
import subprocess
import sys

import msgspec
import pytest
import yaml

from mlerl.cli._ports import PortLease
from mlerl.learner._buffer import read_journal
from mlerl.learner._checkpoint import complete_checkpoints
from mlerl.learner._publish import load_weight_update
from mlerl.protocol import CurveKeys, ExecStatus, SampleSender, WeightSubscriber

from .test_checkpoint import CFG

_PORTS = PortLease()  # held for the session: ports no bind(0) or other run can be given


def _port() -> int:
    return _PORTS.take(1)[0]


def _config(tmp_path, model_dir, max_updates, ports, **overrides):
    """A run config in ``tmp_path/run`` (the learner's run dir is the config file's dir);
    ``overrides`` replace learner settings."""
    learner = (
        dict(CFG, checkpoint_every=1, max_updates=max_updates, duration_weighting="paper")
        | overrides
    )
    transport = dict(
        samples_address=f"tcp://127.0.0.1:{ports[0]}", weights_address=f"tcp://127.0.0.1:{ports[1]}"
    )
    path = tmp_path / "run" / f"config_{max_updates}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        yaml.safe_dump(
            {
                "learner": learner,
                "transport": transport,
                "model": {"path": str(model_dir)},
                "seed": 0,
            }
        )
    )
    return path


async def _keys(run_dir, timeout=200.0) -> CurveKeys:
    """The run's CURVE keys, once the learner has generated them at start."""
    async with asyncio.timeout(timeout):
        while not (run_dir / "keys" / "learner.key").exists():
            await asyncio.sleep(0.2)
    return CurveKeys(run_dir / "keys")


async def _feed(samples, ports, want_version, keys):
    async with (
        SampleSender(f"tcp://127.0.0.1:{ports[0]}", "a0", curve=keys) as sender,
        WeightSubscriber(f"tcp://127.0.0.1:{ports[1]}", curve=keys) as sub,
    ):
        for s in samples:
            await sender.send(s)
        # no flush: the learner exits at max_updates right after acking the samples it trains
        # on, so a lost last ack could not be resent; the update it publishes shows they arrived
        async with asyncio.timeout(200):
            while True:
                update = await sub.latest()
                if update.version >= want_version:
                    return update


def _setup(tmp_path, tiny_model, make_sample, n):
    """The saved tiny model, two ports, and ``n`` samples (seqs 0..n-1, rewards 0 and 1)."""
    model_dir = tmp_path / "model"
    tiny_model().save_pretrained(model_dir)
    samples = [
        make_sample(seq=i, reward=float(i % 2), duration_s=0.1 + i, t_sampled=1000.0 + i)
        for i in range(n)
    ]
    return model_dir, (_port(), _port()), samples


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_process_trains_publishes_checkpoints_and_resumes(tmp_path, make_sample, tiny_model):
    model_dir, ports, samples = _setup(tmp_path, tiny_model, make_sample, 8)
    samples.insert(3, make_sample(seq=100, status=ExecStatus.INFRA_ERROR))
    samples = [
        msgspec.structs.replace(s, seq=i, sample_id=f"a0:{i}") for i, s in enumerate(samples)
    ]  # seqs 0..8

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlerl.learner",
            "--config",
            str(_config(tmp_path, model_dir, 2, ports)),
        ]
    )
    try:
        update = await _feed(samples, ports, want_version=2, keys=await _keys(tmp_path / "run"))
        assert proc.wait(timeout=200) == 0
    finally:
        proc.kill()
    run = tmp_path / "run"
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2]
    assert lines[-1]["buffer/infra_error"] == 1.0 and lines[-1]["buffer/pending"] == 0.0
    assert (run / "checkpoints" / "step_00000002" / "COMMIT").exists()
    assert len(read_journal(run / "buffer" / "journal.bin")[0]) == 9
    fresh, initial = tiny_model(seed=5), tiny_model()
    load_weight_update(fresh, update)
    moved = max(
        (p - q).abs().max().item() for p, q in zip(fresh.parameters(), initial.parameters())
    )
    assert moved > 1e-4

    # restart: resumes at version 2 from the checkpoint, trains on new samples only
    more = [
        make_sample(seq=9 + i, reward=float(i % 2), duration_s=1.0, t_sampled=2000.0 + i)
        for i in range(4)
    ]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlerl.learner",
            "--config",
            str(_config(tmp_path, model_dir, 3, ports)),
        ]
    )
    try:
        update = await _feed(more, ports, want_version=3, keys=CurveKeys(tmp_path / "run" / "keys"))
        assert proc.wait(timeout=200) == 0
    finally:
        proc.kill()
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2, 3]
    assert update.version == 3


def test_bad_config_exits_2(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"learner": {"clip_ratio": 3.0}}))
    proc = subprocess.run(
        [sys.executable, "-m", "mlerl.learner", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2 and "clip_ratio" in proc.stderr


_STOP_DURING_CHECKPOINT = """
import os, signal, sys, time
import mlerl.learner._process as process
from mlerl.learner.__main__ import main

real = process.save_checkpoint

def save_checkpoint(root, learner, extra, keep):
    if learner.version == 2:  # a stop (torchrun's SIGTERM) while this checkpoint is written
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(2)
    real(root, learner, extra, keep=keep)

process.save_checkpoint = save_checkpoint
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_a_stop_while_a_checkpoint_commits_loses_no_update_record(
    tmp_path, make_sample, tiny_model
):
    """A resume rewinds to the newest checkpoint: every checkpoint's update must have its
    metrics row on disk by then, or the resumed run would never write that row."""
    model_dir, ports, samples = _setup(tmp_path, tiny_model, make_sample, 12)
    script = tmp_path / "stop_during_checkpoint.py"
    script.write_text(_STOP_DURING_CHECKPOINT)
    proc = subprocess.Popen(
        [sys.executable, str(script), "--config", str(_config(tmp_path, model_dir, 3, ports))]
    )
    try:
        await _feed(samples, ports, want_version=2, keys=await _keys(tmp_path / "run"))
        proc.wait(timeout=200)
    finally:
        proc.kill()
    run = tmp_path / "run"
    logged = {json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()}
    committed = {
        int(p.name.removeprefix("step_")) for p in complete_checkpoints(run / "checkpoints")
    }
    assert 2 in committed  # the stop came while version 2's checkpoint was being written
    assert committed <= logged


PROMPT = [7, 8, 9]


def _tokenizer(model_dir) -> None:
    """A word-level tokenizer of the tiny model's 512 ids (``t<i>``), so the learner can decode
    a response and see that it holds its program."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(WordLevel(vocab={f"t{i}": i for i in range(512)}, unk_token="t0"))
    tok.pre_tokenizer = WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0").save_pretrained(model_dir)


def _scratch(make_sample, seq, *, best=False):
    """A from-scratch sample of ``PROMPT``; ``best``: valid, and its program is its response."""
    s = make_sample(seq=seq, reward=0.0, duration_s=1.0, t_sampled=1000.0 + seq)
    s = msgspec.structs.replace(s, prompt_ids=PROMPT, exec_status=ExecStatus.PROGRAM_ERROR)
    if best:
        code = " ".join(f"t{i}" for i in s.response_ids)
        s = msgspec.structs.replace(
            s,
            exec_status=ExecStatus.OK,
            valid_submission=True,
            score=0.1,
            reward_parts={"score": -0.1},
            reward=1.0,
            code=code,
        )
    return s


REPLAY = dict(advantage="grpo", critic="none", kl_coef=0.0, micro_batch_size=4, replay_best=1)
"""Self-imitation of the best program (it needs a group baseline)."""


def _learner(tmp_path, model_dir, max_updates, ports):
    config = str(_config(tmp_path, model_dir, max_updates, ports, **REPLAY))
    return subprocess.Popen([sys.executable, "-m", "mlerl.learner", "--config", config])


def _replays(run) -> list:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r.get("replay/samples")) for r in rows]


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_the_best_program_is_replayed_and_still_after_a_resume(
    tmp_path, make_sample, tiny_model
):
    model_dir = tmp_path / "model"
    tiny_model().save_pretrained(model_dir)
    _tokenizer(model_dir)
    ports = (_port(), _port())
    first = [_scratch(make_sample, 0, best=True)] + [_scratch(make_sample, i) for i in range(1, 8)]
    proc = _learner(tmp_path, model_dir, 2, ports)
    try:
        await _feed(first, ports, want_version=2, keys=await _keys(tmp_path / "run"))
        assert proc.wait(timeout=200) == 0
    finally:
        proc.kill()
    run = tmp_path / "run"
    # update 1 trains on seqs 0-3 (nothing archived yet), update 2 on 4-7 plus seq 0's replay
    assert _replays(run) == [(1, None), (2, 1.0)]

    proc = _learner(tmp_path, model_dir, 3, ports)
    try:
        more = [_scratch(make_sample, i) for i in range(8, 12)]
        await _feed(more, ports, want_version=3, keys=CurveKeys(run / "keys"))
        assert proc.wait(timeout=200) == 0
    finally:
        proc.kill()
    assert _replays(run) == [(1, None), (2, 1.0), (3, 1.0)]
