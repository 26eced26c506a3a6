"""The learner process: receive -> buffer -> batch -> update -> publish -> log -> checkpoint
(a checkpoint after its update's metrics row: a resume rewinds to it).

Rank 0 owns the network side: a ``SampleReceiver`` stores every sample in the journaled
:class:`ExperienceBuffer` (``add`` without fsync, ``sync`` as the receiver's ``commit``, so a
sample is durable before it is acked) and a ``WeightBroadcaster`` announces each new policy.
Every update runs in a worker thread so receiving and acking go on during training. With
several ranks (torchrun) rank 0 hands each batch to the others with ``broadcast_object_list``;
``None`` tells them to stop. All ranks run the same collective sequence: update, publish
(full-state-dict gather), and every ``checkpoint_every`` updates a checkpoint.

On start the newest loadable checkpoint under ``RUN_DIR/checkpoints`` is restored (models,
optimizers, RNG, version, consumed samples; a corrupt newer one is skipped with a warning); the
journal supplies everything received since, so nothing acked is lost. Batches consumed after
that checkpoint are pending again and the resumed run repeats exactly the updates the crash lost.

At the door every sample is checked (``mlerl.protocol.check_sample`` against the model's
vocabulary and the configured reward/duration bounds); a refused one is acked, recorded in
``RUN_DIR/buffer/refused.jsonl`` with its reason and counted (``buffer/refused``,
``refused/<field>``), never journaled or trained on. Both streams use CURVE with the run's keys
(``RUN_DIR/keys``, generated here when missing) unless ``curve`` is off.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import logging
import math
import os
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from mlerl.learner._buffer import ExperienceBuffer
from mlerl.learner._checkpoint import restore_checkpoint, save_checkpoint
from mlerl.learner._config import LearnerConfig
from mlerl.learner._faults import RankFailed
from mlerl.learner._learner import Learner
from mlerl.learner._models import is_distributed
from mlerl.learner._probe import probe_decisions
from mlerl.learner._publish import full_state_dict, publish_weights
from mlerl.learner._replay import ReplayArchive, fit_to_split, holds_program
from mlerl.learner._samples import SampleLog, log_samples_table
from mlerl.protocol import (
    MetricsConfig,
    MetricsSink,
    PromptKind,
    Sample,
    SampleLimits,
    SampleReceiver,
    TransportConfig,
    WeightBroadcaster,
    WeightUpdate,
    check_sample,
    generate_keys,
    make_sink,
)

log = logging.getLogger("mlerl.learner")


def _init_distributed(timeout_s: float) -> torch.device:
    if "WORLD_SIZE" in os.environ and not is_distributed():
        # NCCL for CUDA tensors, gloo for any CPU tensor a collective meets (object broadcasts,
        # counts)
        backend = "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"
        # A collective waiting longer than this raises instead of hanging; ranks > 0 waiting
        # for the next batch are kept alive by rank 0 (``KEEPALIVE``).
        torch.distributed.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
    if torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local)
        return torch.device("cuda", local)
    return torch.device("cpu")


KEEPALIVE = "keepalive"
"""What rank 0 broadcasts instead of a batch while it waits for samples (see ``serve``)."""


def build_learner(
    config: LearnerConfig, device: torch.device, model_path: str, seed: int = 0
) -> Learner:
    """The policy (and its critic, reference) from the HF directory ``model_path``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    pad = model.config.pad_token_id
    if pad is None:
        try:
            pad = AutoTokenizer.from_pretrained(model_path).pad_token_id
        except (OSError, ValueError):
            pad = None
    learner = Learner(
        config, model, seed=seed, pad_token_id=pad if pad is not None else 0, device=str(device)
    )
    if config.probe_samples > 0 or config.replay_best > 0:
        try:
            learner.tokenizer = AutoTokenizer.from_pretrained(model_path)
        except (OSError, ValueError):
            log.warning("no tokenizer next to %s: the probe and replays are off", model_path)
    return learner


def _decoder(learner: Learner) -> Callable[[list[int]], str]:
    """The policy's text for token ids (what the probe and the replay archive read)."""
    tok = learner.tokenizer
    return lambda ids: tok.decode(ids, skip_special_tokens=True)


def replay_archive(learner: Learner) -> ReplayArchive:
    """The run's self-imitation archive (``replay_best``; empty and unused when 0, or when the
    policy has no tokenizer to check that an answer holds its program)."""
    decode = _decoder(learner)
    k = learner.config.replay_best if learner.tokenizer is not None else 0
    return ReplayArchive(k, lambda s: holds_program(s, decode))


def sample_limits(
    learner: Learner, reward_bounds: tuple[float, float] = (-math.inf, math.inf)
) -> SampleLimits:
    """What a sample must satisfy to be stored: the policy's vocabulary, the reward function's
    documented range (``mlerl.instrument.reward_range`` of the run's ``instrument.reward``; no
    second constant here) and the configured duration bound."""
    lo, hi = reward_bounds
    return SampleLimits(
        vocab_size=int(learner.policy.config.vocab_size),
        reward_min=lo,
        reward_max=hi,
        max_duration_s=learner.config.max_duration_s,
    )


def train_step(
    learner: Learner, batch: list[Sample], run_dir: Path, replay: list[Sample] | None = None
) -> tuple[dict[str, float], WeightUpdate | None]:
    """One update (on ``batch`` and the archive's ``replay``), then publish. Collective."""
    cfg = learner.config
    metrics = learner.update(batch, replay or [])
    update = publish_weights(
        learner.policy, learner.version, run_dir / "weights", cfg.publish_inline_max_bytes
    )
    return metrics, update


def checkpoint_step(learner: Learner, extra: dict[str, Any] | None, run_dir: Path) -> None:
    """Every ``checkpoint_every`` updates, a checkpoint of the current version with ``extra``
    (the buffer's and the replay archive's states, from rank 0). Collective.

    Rank 0 calls it only once the update's metrics are written: a resume rewinds to the
    newest checkpoint, so a checkpoint committed before its row (a stop arriving in between)
    would skip that row for good."""
    cfg = learner.config
    if cfg.checkpoint_every and learner.version % cfg.checkpoint_every == 0:
        save_checkpoint(run_dir / "checkpoints", learner, extra or {}, keep=cfg.keep_checkpoints)


def _done(learner: Learner) -> bool:
    return bool(learner.config.max_updates) and learner.version >= learner.config.max_updates


def pending_full(pending: int, pending_bytes: int, cfg: LearnerConfig) -> bool:
    """Backpressure: the learner holds enough unconsumed samples (``cfg.pending_bound``), or
    enough bytes of them (``max_pending_bytes``); the byte bound never blocks forming a batch."""
    return pending >= cfg.pending_bound or (
        pending >= cfg.batch_size and pending_bytes >= cfg.max_pending_bytes
    )


def open_receiver(
    buffer: ExperienceBuffer,
    transport: TransportConfig,
    cfg: LearnerConfig,
    on_sample: Callable[[Sample], None],
    commit: Callable[[], None],
    on_refused: Callable[[Sample, str], None],
) -> SampleReceiver:
    """The learner's door: stores into ``buffer``, refuses what its check refuses, and stops
    acking new samples while :func:`pending_full` holds for the buffer."""
    return SampleReceiver.from_config(
        transport,
        on_sample,
        stored=buffer.stored_keys(),
        commit=commit,
        full=lambda: pending_full(len(buffer), buffer.pending_bytes, cfg),
        check=buffer.check,
        on_refused=on_refused if buffer.check is not None else None,
    )


async def serve(
    learner: Learner,
    buffer: ExperienceBuffer,
    transport: TransportConfig,
    sink: MetricsSink,
    run_dir: Path,
    samples: SampleLog | None = None,
    archive: ReplayArchive | None = None,
) -> None:
    """Rank 0's loop until ``max_updates``, cancellation or SIGTERM (a clean stop)."""
    cfg = learner.config
    archive = archive or ReplayArchive(0, lambda s: False)
    arrived = asyncio.Event()
    main = asyncio.current_task()
    assert main is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main.cancel)

    probe_prompts: dict[str, tuple[list[int], float]] = {}
    """Per task, the first scratch prompt seen and its sampling temperature (the probe's)."""

    def on_sample(sample: Sample) -> None:
        if sample.prompt_kind is PromptKind.SCRATCH:
            probe_prompts.setdefault(sample.task_id, (sample.prompt_ids, sample.temperature))
        buffer.add(sample, sync=False)
        if samples is not None:
            samples.add(sample, learner.version)
        arrived.set()

    def commit() -> None:
        buffer.sync()
        if samples is not None:
            samples.flush()

    def on_refused(sample: Sample, reason: str) -> None:
        buffer.refuse(sample, reason, sync=False)  # made durable by commit(), before the ack

    receiver = open_receiver(buffer, transport, cfg, on_sample, commit, on_refused)
    broadcaster = WeightBroadcaster.from_config(transport)
    async with receiver, broadcaster:
        initial = await asyncio.to_thread(
            publish_weights,
            learner.policy,
            learner.version,
            run_dir / "weights",
            cfg.publish_inline_max_bytes,
        )
        assert initial is not None  # rank 0 publishes every version
        broadcaster.publish(initial)
        while not _done(learner):
            while not buffer.ready(cfg.batch_size):
                arrived.clear()
                try:
                    # not wait_for: on 3.11 it swallows a cancel that meets a set event, and a
                    # cancel is how a failed receiver (a full disk) stops this loop
                    async with asyncio.timeout(cfg.collective_timeout_s / 4):
                        await arrived.wait()
                except TimeoutError:
                    if is_distributed():  # the other ranks wait in a broadcast: keep it alive
                        await asyncio.to_thread(
                            torch.distributed.broadcast_object_list, [KEEPALIVE, None, None], 0
                        )
            if learner.version == 0:  # the initial policy, once its prompts are known
                probed = await asyncio.to_thread(run_probe, learner, probe_prompts)
                if probed:
                    sink.log(probed, step=0, stream="probe")
            batch = buffer.take(cfg.batch_size)
            split = cfg.minibatches * learner.world
            replay = fit_to_split(len(batch), archive.replays(batch), split)
            archive.offer(batch)
            state = {"buffer": buffer.state_dict(), "replay": archive.state_dict()}
            if is_distributed():
                torch.distributed.broadcast_object_list([batch, replay, state], src=0)
            metrics, update = await asyncio.to_thread(train_step, learner, batch, run_dir, replay)
            assert update is not None  # rank 0 publishes every version
            broadcaster.publish(update)
            metrics.update(
                {f"buffer/{k}": float(v) for k, v in buffer.counters.items()},
                **{"buffer/pending": float(len(buffer))},
            )
            metrics.update(
                {
                    "buffer/pending_bytes": float(buffer.pending_bytes),
                    "buffer/deferred": float(receiver.counters["deferred"]),
                }
            )
            metrics.update({f"refused/{k}": float(v) for k, v in buffer.refused_by_field.items()})
            sink.log(metrics, step=learner.version)
            if learner.version % cfg.probe_every == 0:
                probed = await asyncio.to_thread(run_probe, learner, probe_prompts)
                if probed:
                    sink.log(probed, step=learner.version, stream="probe")
            if samples is not None:
                log_samples_table(samples, sink, learner.version)
            await asyncio.to_thread(checkpoint_step, learner, state, run_dir)
        # PUB drops what is still queued when it closes: keep announcing the final version
        # for two republish periods so every subscriber (and a test) sees it.
        await asyncio.sleep(2 * transport.republish_s)


def run_probe(learner: Learner, prompts: dict[str, tuple[list[int], float]]) -> dict[str, float]:
    """The decision probe's shares for the current policy (``mlerl.learner._probe``), a row of
    the ``probe`` metrics stream; empty when it is off, before any scratch prompt arrived, or
    when the policy is sharded over ranks."""
    cfg = learner.config
    if cfg.probe_samples == 0 or not prompts or learner.world > 1 or learner.tokenizer is None:
        return {}
    tok = learner.tokenizer
    t0 = time.time()
    shares = probe_decisions(
        learner.policy,
        _decoder(learner),
        prompts,
        n=cfg.probe_samples,
        max_new_tokens=cfg.probe_max_new_tokens,
        seed=learner.seed * 1_000_003 + learner.version,
        eos_token_id=tok.eos_token_id,
    )
    return {**shares, "time_s": time.time() - t0}


def follow(learner: Learner, run_dir: Path) -> None:
    """Ranks > 0: take each batch from rank 0 and run the same collective step.

    The order of collectives matches rank 0's ``serve``: the initial publish (a full-state-dict
    gather), then per batch a broadcast of the batch followed by ``train_step`` and
    ``checkpoint_step``; a broadcast of ``KEEPALIVE`` only restarts the wait, ``None`` ends it."""
    publish_weights(
        learner.policy,
        learner.version,
        run_dir / "weights",
        learner.config.publish_inline_max_bytes,
    )
    while True:
        box: list[Any] = [None, None, None]
        torch.distributed.broadcast_object_list(box, src=0)
        if box[0] is None:
            return
        if box[0] == KEEPALIVE:
            continue
        train_step(learner, box[0], run_dir, box[1])
        checkpoint_step(learner, box[2], run_dir)


def save_policy(learner: Learner, out_dir: Path, model_path: str) -> None:
    """The current policy as a Hugging Face model directory (with ``model_path``'s tokenizer),
    atomically."""
    from transformers import AutoTokenizer

    state = full_state_dict(learner.policy)
    if is_distributed() and torch.distributed.get_rank() != 0:
        return
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model = learner.policy
    model.save_pretrained(tmp, state_dict=state)
    try:
        AutoTokenizer.from_pretrained(model_path).save_pretrained(tmp)
    except (OSError, ValueError):
        log.warning("no tokenizer next to %s; %s has weights only", model_path, out_dir)
    (tmp / "mlerl_version.txt").write_text(str(learner.version))
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)


def run(
    config: LearnerConfig,
    transport: TransportConfig,
    *,
    model_path: str,
    run_dir: str | Path,
    seed: int = 0,
    metrics: MetricsConfig | None = None,
    reward_bounds: tuple[float, float] = (-math.inf, math.inf),
) -> int:
    """The learner process; returns 0 when ``max_updates`` was reached or SIGTERM stopped it.

    ``reward_bounds``: the reward function's range; a sample outside it is refused at the door.

    Trains the HF model in ``model_path``; binds ``transport``'s sample and weight addresses
    (CURVE with the keys in ``transport.keys_dir``, created when missing; None: plain); keeps the
    journal, checkpoints, published weights and logs in ``run_dir``.

    On the way out the current policy is saved to ``RUN_DIR/policy`` (an HF model directory,
    what ``mlerl eval`` and the closing report load). Any failure raises :class:`RankFailed`
    (its cause is the error) without entering another collective; the process entry point
    ends the process with it (``mlerl.learner._faults.die``)."""
    run_dir = Path(run_dir)
    rank = int(os.environ.get("RANK", 0))
    starting = True
    try:
        if config.torch_threads > 0:
            torch.set_num_threads(config.torch_threads)
        device = _init_distributed(config.collective_timeout_s)
        learner = build_learner(config, device, model_path, seed)
        buffer = (
            ExperienceBuffer(
                run_dir / "buffer",
                config.batch_policy,
                check=functools.partial(check_sample, limits=sample_limits(learner, reward_bounds)),
            )
            if rank == 0
            else None
        )
        archive = replay_archive(learner)
        ckpt, extra = restore_checkpoint(run_dir / "checkpoints", learner)
        if ckpt is not None:
            if buffer is not None and extra.get("buffer") is not None:
                buffer.load_state_dict(extra["buffer"])
            if extra.get("replay") is not None:
                archive.load_state_dict(extra["replay"])
            log.info("resumed from %s at version %d", ckpt, learner.version)
        if rank == 0:
            if transport.keys_dir:
                generate_keys(transport.keys_dir)
            # updates after the restored version are done again: their old records are cut
            metrics = metrics or MetricsConfig(wandb_mode="disabled")
            sink = make_sink(metrics, run_dir, name=run_dir.name, resume_step=learner.version)
            table_rows = metrics.wandb_samples_per_update if metrics.wandb_mode != "disabled" else 0
            samples = SampleLog(
                run_dir,
                method=f"duration={config.duration_weighting.value}",
                seed=seed,
                table_rows=table_rows,
            )
            starting = False  # from here on a failure may be a peer's: restartable
            assert buffer is not None  # rank 0 owns the buffer
            try:
                asyncio.run(serve(learner, buffer, transport, sink, run_dir, samples, archive))
            except (asyncio.CancelledError, KeyboardInterrupt):
                log.info("stopped at version %d", learner.version)
            finally:
                sink.close()
                samples.close()
                buffer.close()
            # reached only when serve ended cleanly, so the others wait in ``follow``'s broadcast
            if is_distributed():
                torch.distributed.broadcast_object_list([None, None, None], src=0)
        else:
            starting = False
            follow(learner, run_dir)
        save_policy(learner, run_dir / "policy", model_path)
    except BaseException as exc:
        # no collective from here on: the other ranks may be in a different one
        raise RankFailed(rank, run_dir, starting) from exc
    if is_distributed():
        torch.distributed.destroy_process_group()
    return 0
