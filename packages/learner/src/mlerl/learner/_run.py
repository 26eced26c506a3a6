"""The learner process: receive -> buffer -> batch -> update -> publish -> log -> checkpoint.

Rank 0 owns the network side: a ``SampleReceiver`` stores every sample in the journaled
:class:`ExperienceBuffer` (``add`` without fsync, ``sync`` as the receiver's ``commit``, so a
sample is durable before it is acked) and a ``WeightBroadcaster`` announces each new policy.
Every update runs in a worker thread so receiving and acking go on during training. With
several ranks (torchrun) rank 0 hands each batch to the others with ``broadcast_object_list``;
``None`` tells them to stop. All ranks run the same collective sequence: update, publish
(full-state-dict gather), and every ``checkpoint_every`` updates a checkpoint.

On start the last complete checkpoint under ``RUN_DIR/checkpoints`` is restored (models,
optimizers, RNG, version, consumed samples); the journal supplies everything received since,
so nothing acked is lost. Batches consumed after that checkpoint are pending again and the
resumed run repeats exactly the updates the crash lost.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
from pathlib import Path
from typing import Any

import torch

from mlerl.protocol import JsonlSink, Sample, SampleReceiver, TransportConfig, WeightBroadcaster, WeightUpdate

from mlerl.learner._buffer import ExperienceBuffer
from mlerl.learner._checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from mlerl.learner._config import LearnerConfig
from mlerl.learner._learner import Learner
from mlerl.learner._models import is_distributed
from mlerl.learner._publish import publish_weights

log = logging.getLogger("mlerl.learner")


def _init_distributed() -> torch.device:
    if "WORLD_SIZE" in os.environ and not is_distributed():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        # ranks > 0 wait in a collective while rank 0 waits for samples: allow long waits
        torch.distributed.init_process_group(backend, timeout=datetime.timedelta(hours=24))
    if torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local)
        return torch.device("cuda", local)
    return torch.device("cpu")


def build_learner(config: LearnerConfig, device: torch.device) -> Learner:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(config.seed)
    model = AutoModelForCausalLM.from_pretrained(config.model_path, dtype=torch.float32)
    pad = model.config.pad_token_id
    if pad is None:
        try:
            pad = AutoTokenizer.from_pretrained(config.model_path).pad_token_id
        except (OSError, ValueError):
            pad = None
    return Learner(config, model, pad_token_id=pad if pad is not None else 0, device=str(device))


def train_step(learner: Learner, batch: list[Sample], buffer_state: dict[str, Any] | None) -> tuple[dict[str, float], WeightUpdate | None]:
    """One update, then publish, then (every ``checkpoint_every``) checkpoint. Collective."""
    cfg = learner.config
    metrics = learner.update(batch)
    update = publish_weights(learner.policy, learner.version, Path(cfg.run_dir) / "weights", cfg.publish_inline_max_bytes)
    if cfg.checkpoint_every and learner.version % cfg.checkpoint_every == 0:
        save_checkpoint(Path(cfg.run_dir) / "checkpoints", learner, {"buffer": buffer_state}, keep=cfg.keep_checkpoints)
    return metrics, update


def _done(learner: Learner) -> bool:
    return bool(learner.config.max_updates) and learner.version >= learner.config.max_updates


async def serve(learner: Learner, buffer: ExperienceBuffer, transport: TransportConfig, sink: Any) -> None:
    """Rank 0's loop until ``max_updates`` (or cancellation)."""
    cfg = learner.config
    arrived = asyncio.Event()

    def on_sample(sample: Sample) -> None:
        buffer.add(sample, sync=False)
        arrived.set()

    receiver = SampleReceiver.from_config(transport, on_sample, stored=buffer.stored_keys(), commit=buffer.sync)
    broadcaster = WeightBroadcaster.from_config(transport)
    async with receiver, broadcaster:
        initial = await asyncio.to_thread(publish_weights, learner.policy, learner.version, Path(cfg.run_dir) / "weights", cfg.publish_inline_max_bytes)
        broadcaster.publish(initial)
        while not _done(learner):
            while not buffer.ready(cfg.batch_size):
                arrived.clear()
                await arrived.wait()
            batch = buffer.take(cfg.batch_size)
            state = buffer.state_dict()
            if is_distributed():
                torch.distributed.broadcast_object_list([batch, state], src=0)
            metrics, update = await asyncio.to_thread(train_step, learner, batch, state)
            broadcaster.publish(update)
            metrics.update({f"buffer/{k}": float(v) for k, v in buffer.counters.items()}, **{"buffer/pending": float(len(buffer))})
            sink.log(metrics, step=learner.version)
    if is_distributed():
        torch.distributed.broadcast_object_list([None, None], src=0)


def follow(learner: Learner) -> None:
    """Ranks > 0: take each batch from rank 0 and run the same collective step."""
    while True:
        box: list[Any] = [None, None]
        torch.distributed.broadcast_object_list(box, src=0)
        if box[0] is None:
            return
        train_step(learner, box[0], box[1])


def run(config: LearnerConfig) -> int:
    """The learner process; returns 0 when ``max_updates`` was reached."""
    device = _init_distributed()
    rank = torch.distributed.get_rank() if is_distributed() else 0
    run_dir = Path(config.run_dir)
    learner = build_learner(config, device)
    buffer = ExperienceBuffer(run_dir / "buffer", config.batch_policy) if rank == 0 else None
    ckpt = latest_checkpoint(run_dir / "checkpoints")
    if ckpt is not None:
        extra = load_checkpoint(ckpt, learner)
        if buffer is not None and extra.get("buffer") is not None:
            buffer.load_state_dict(extra["buffer"])
        log.info("resumed from %s at version %d", ckpt, learner.version)
    try:
        if rank == 0:
            transport = TransportConfig(samples_address=config.receive_address, weights_address=config.publish_address)
            sink = JsonlSink(run_dir / "metrics.jsonl")
            try:
                asyncio.run(serve(learner, buffer, transport, sink))
            finally:
                sink.close()
                buffer.close()
        else:
            follow(learner)
    finally:
        if is_distributed():
            torch.distributed.destroy_process_group()
    return 0
