"""Checkpoints: atomic under kill -9, resume picks the last complete one and makes the same next update."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

from mlerl.learner import ExperienceBuffer, Learner, LearnerConfig
from mlerl.learner._checkpoint import (
    complete_checkpoints,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)

CFG = dict(  # a small update on the tiny model: the learner tests' shared settings
    batch_size=4,
    micro_batch_size=2,
    bf16=False,
    gradient_checkpointing=False,
    lr=1e-3,
    critic_lr=1e-3,
)


def _params(model):
    return {n: p.detach().clone() for n, p in model.state_dict().items()}


def test_resume_makes_the_same_next_update(tmp_path, make_sample, tiny_model):
    buf = ExperienceBuffer(tmp_path / "buffer")
    for i in range(12):
        buf.add(
            make_sample(seq=i, reward=float(i % 3), duration_s=0.1 * (12 - i), t_sampled=100.0 + i)
        )
    cfg = LearnerConfig(**CFG, duration_weighting="running")
    learner = Learner(cfg, tiny_model())
    learner.update(buf.take(4))
    save_checkpoint(tmp_path / "ckpt", learner, {"buffer": buf.state_dict()})
    metrics = learner.update(buf.take(4))
    expected = _params(learner.policy), _params(learner.critic)
    buf.close()

    # a fresh process would do exactly this: rebuild from the initial model, reopen, load
    buf2 = ExperienceBuffer(tmp_path / "buffer")
    resumed = Learner(cfg, tiny_model())
    extra = load_checkpoint(latest_checkpoint(tmp_path / "ckpt"), resumed)
    buf2.load_state_dict(extra["buffer"])
    assert resumed.version == 1 and len(buf2) == 8
    metrics2 = resumed.update(buf2.take(4))
    for want, got in zip(expected, (_params(resumed.policy), _params(resumed.critic))):
        for name in want:
            assert torch.equal(want[name], got[name]), name
    assert (
        metrics2["loss/policy"] == metrics["loss/policy"]
        and metrics2["weights/w_max"] == metrics["weights/w_max"]
    )


def test_keep_prunes_old_checkpoints(tmp_path, tiny_model):
    learner = Learner(LearnerConfig(**CFG), tiny_model())
    for v in range(4):
        learner.version = v
        save_checkpoint(tmp_path, learner, {}, keep=2)
    assert [p.name for p in complete_checkpoints(tmp_path)] == ["step_00000002", "step_00000003"]


_CRASHER = textwrap.dedent(
    """
    import sys, time, torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    import mlerl.learner._checkpoint as ck
    from mlerl.learner import Learner, LearnerConfig
    from mlerl.learner._checkpoint import save_checkpoint
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(**{tiny!r}))
    learner = Learner(LearnerConfig(**{cfg!r}), model)
    learner.version = 1
    save_checkpoint(sys.argv[1], learner, {{"marker": 1}})
    def hang(tmp, *args):
        print("WRITING", flush=True)
        time.sleep(120)
    ck._write_commit = hang
    learner.version = 2
    save_checkpoint(sys.argv[1], learner, {{"marker": 2}})
    """
)


@pytest.mark.timeout(120)
def test_kill_9_during_checkpoint_resumes_from_last_complete(tmp_path, tiny_model, tiny_kwargs):
    script = tmp_path / "crash.py"
    script.write_text(_CRASHER.format(tiny=tiny_kwargs, cfg=CFG))
    root = tmp_path / "ckpt"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(root)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert (
            proc.stdout.readline().strip() == "WRITING"
        )  # state.pt of step 2 written, no COMMIT yet
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert (root / ".tmp-step_00000002" / "state.pt").exists()  # the torn write is there ...
    assert latest_checkpoint(root).name == "step_00000001"  # ... but never chosen
    learner = Learner(LearnerConfig(**CFG), tiny_model(seed=3))
    assert load_checkpoint(latest_checkpoint(root), learner) == {"marker": 1}
    assert learner.version == 1
    reference = tiny_model()  # the crasher's weights (seed 0)
    for (name, p), q in zip(reference.named_parameters(), learner.policy.parameters()):
        assert torch.equal(p, q), name
    learner.version = 2
    save_checkpoint(root, learner, {})  # the next save clears the crashed temp dir
    assert not (root / ".tmp-step_00000002").exists()
    assert latest_checkpoint(root).name == "step_00000002"
