"""``python -m mlerl.actors --config RUN_DIR/config.yaml --actor-id ID``: one actor process.

Reads top to bottom: load config (the run contract: ``model.path``, ``seed``, ``tasks``,
``transport``; its own ``actors`` section and the ``sandbox`` and ``instrument`` sections) ->
load tasks -> build engine (and, for LM instrumentation, a frozen copy), sandbox, pipeline, durable
state -> connect the sample stream and the weight subscription -> run the actor until it has
sent ``max_samples`` or gets SIGTERM/SIGINT -> flush unacked samples (bounded) -> close.
Restarted after SIGKILL with the same id, it resends its persisted outbox and continues its
sequence numbers (see ``mlerl.actors._state``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import TypeVar

from mlerl.actors._actor import Actor
from mlerl.actors._config import ActorsConfig
from mlerl.actors._engines import make_engine, make_frozen_engine
from mlerl.actors._health import EXIT_INFRA_DOWN
from mlerl.actors._pipeline import RealPipeline
from mlerl.actors._state import ActorState
from mlerl.protocol import ConfigError, CurveError, load_run, load_section
from mlerl.sandbox import SandboxUnavailable

log = logging.getLogger("mlerl.actors")
T = TypeVar("T")


def _optional_section(cls: type[T], path: Path, section: str) -> T:
    try:
        return load_section(cls, path, section)
    except ConfigError as exc:
        if exc.key == section and "missing" in exc.message:
            return cls()
        raise


async def run_actor(config_path: Path, actor_id: str) -> str:
    """Run one actor until stopped; returns '' or why it gave up (the sandbox stayed down)."""
    from mlerl.bench import Registry
    from mlerl.instrument import InstrumentConfig, InstrumentMode
    from mlerl.protocol import SampleSender, WeightSubscriber
    from mlerl.sandbox import SandboxConfig, make_sandbox

    config = load_section(ActorsConfig, config_path, "actors")
    sandbox_config = _optional_section(SandboxConfig, config_path, "sandbox")
    instrument = _optional_section(InstrumentConfig, config_path, "instrument")
    contract = load_run(config_path)
    model_path, seed = contract.model.path, contract.seed
    run_dir = config_path.resolve().parent  # noqa: ASYNC240 - once at start-up, before any task runs
    transport = contract.transport.resolve(run_dir)
    registry = Registry.load(
        contract.tasks.tasks_dir or None,
        contract.tasks.data_dir or None,
        public_fraction=contract.tasks.public_fraction,
    )
    tasks = {task_id: registry.get(task_id) for task_id in contract.tasks.ids}
    state_root = Path(config.state_dir) if config.state_dir else run_dir / "actors"
    state = ActorState(state_root / actor_id)
    keys = transport.curve_keys()
    if keys is not None:
        keys.client_keypair()  # missing keys: a clear error now, not a silent hang later
        keys.server_public()
    lm_mode = instrument.mode in (InstrumentMode.lm, InstrumentMode.paper)
    frozen = make_frozen_engine(config, model_path) if lm_mode else None
    instrumenter = None
    if frozen is not None:
        from mlerl.instrument import LMInstrumenter

        instrumenter = LMInstrumenter(frozen)
    pipeline = RealPipeline(config, instrument, instrumenter)
    engine = make_engine(config, model_path, seed)
    sandbox = make_sandbox(sandbox_config)
    try:
        async with SampleSender(transport.samples_address, actor_id, curve=keys) as sender:
            sub = WeightSubscriber(
                transport.weights_address, version=engine.policy_version, curve=keys
            )
            actor = Actor(
                actor_id,
                config,
                engine=engine,
                sandbox=sandbox,
                sender=sender,
                tasks=tasks,
                pipeline=pipeline,
                state=state,
                weights=aiter(sub),
                seed=seed,
            )
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, actor.stop)
            try:
                await actor.run()
                await asyncio.wait_for(sender.flush(), timeout=30.0)
            except TimeoutError:
                log.warning("actor %s: %d samples still unacked at exit", actor_id, sender.unacked)
            finally:
                sub.close()
                state.prune(sender.acked_seq)
    finally:
        await sandbox.close()
        pipeline.close()
        await engine.close()
        if frozen is not None:
            await frozen.close()
    return actor.infra_down


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mlerl.actors", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--config", required=True, type=Path, help="the run's resolved config.yaml")
    parser.add_argument("--actor-id", required=True, help="unique, stable across restarts")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        down = asyncio.run(run_actor(args.config, args.actor_id))
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    except CurveError as exc:
        print(f"keys error: {exc}", file=sys.stderr)
        return 2
    except SandboxUnavailable as exc:
        print(f"sandbox error: {exc}", file=sys.stderr)
        return 2
    if down:
        print(f"the sandbox stayed down, stopping: {down}", file=sys.stderr)
        return EXIT_INFRA_DOWN
    return 0


if __name__ == "__main__":
    sys.exit(main())
