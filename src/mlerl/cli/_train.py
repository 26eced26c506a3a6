"""`mlerl train`: the whole system on one host, or one side of a multi-host run.

Reads top to bottom: compose and validate the config -> run dir (new, or ``resume=RUN_DIR``)
-> prepare the tasks -> the policy model (the embedded bootstrap, or ``model.path``) -> write
the resolved ``config.yaml`` every process reads -> start the learner and the actors under a
supervisor (actors restart if they die) -> show progress until the learner finishes or the
time limit passes -> stop everything (no orphans) -> the closing report.

The learner stops itself after ``learner.max_updates``; Ctrl-C stops the run cleanly and
``mlerl train resume=RUN_DIR`` continues it: the learner restores its last complete
checkpoint (and its journal of samples received after it), the actors their sequence numbers
and unacked outboxes, so no sample is lost or counted twice.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from mlerl.actors import EXIT_INFRA_DOWN
from mlerl.cli._config import VERSION_BASE, TrainConfig, register, resume_conflicts, validate
from mlerl.cli._ports import PortLease, loopback_port
from mlerl.cli._progress import Progress
from mlerl.cli._supervisor import ChildSpec, Supervisor
from mlerl.protocol import ConfigError, CurveError, generate_keys, load_yaml, to_object

CONFIG_NAME = "config.yaml"


def main(argv: list[str] | None = None) -> int:
    register()
    sys.argv = ["mlerl train", *(argv or [])]
    _app()
    return 0


@hydra.main(config_path="conf", config_name="train", **VERSION_BASE)
def _app(cfg: DictConfig) -> None:
    try:
        train = validate(cfg)
        if train.resume:
            run_dir = Path(train.resume).expanduser().resolve()
            stored = load_run_config(run_dir)
            conflicts = resume_conflicts(list(HydraConfig.get().overrides.task), train, stored)
            if conflicts:
                raise ConfigError(
                    "resume",
                    f"{run_dir} continues with its own {CONFIG_NAME}; these "
                    "overrides would change it: "
                    + "; ".join(conflicts)
                    + ". Drop them, or start a new run.",
                )
            train = stored
        else:
            run_dir = Path(HydraConfig.get().runtime.output_dir).resolve()
        code = run(train, run_dir)
    except ConfigError as exc:
        raise SystemExit(f"mlerl train: config error: {exc}") from None
    except CurveError as exc:
        raise SystemExit(f"mlerl train: keys error: {exc}") from None
    if code != 0:
        raise SystemExit(code)


def load_run_config(run_dir: Path) -> TrainConfig:
    path = run_dir / CONFIG_NAME
    if not path.is_file():
        raise ConfigError("resume", f"{run_dir} holds no {CONFIG_NAME}; is it a run directory?")
    return to_object(TrainConfig, load_yaml(path))  # unparsable: ConfigError, not a traceback


def run(train: TrainConfig, run_dir: Path) -> int:
    """Train; returns the learner's exit code (0 when it reached ``max_updates``)."""
    progress = Progress(run_dir, enabled=train.logging.console)
    run_dir.mkdir(parents=True, exist_ok=True)
    _check_isolation(train, run_dir, progress)
    data_dir = _prepare_tasks(train, progress)
    progress.directions = _directions(train, data_dir)
    model_path = _policy(train, data_dir, progress)
    ports = PortLease()  # held (flock) until this process ends, however it ends
    config_path = _write_run_config(train, run_dir, data_dir, model_path, ports)
    progress.say(f"run dir {run_dir}")
    if train.prepare_only:
        print(f"mlerl train: prepared {config_path} (prepare_only: nothing started)")
        return 0
    _wait_for_keys(train, run_dir, progress)

    supervisor = Supervisor(
        _children(train, run_dir, config_path, ports),
        primary=_primary(train),
        events_path=run_dir / "supervisor.log",
    )  # appended across resumes
    deadline = train.time_limit_s or None
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops the run as cleanly as Ctrl-C
    try:
        supervisor.start()
        code = supervisor.wait(deadline_s=deadline, on_tick=progress.tick)
    except KeyboardInterrupt:
        progress.say(
            f"interrupted: stopping every process (resume with `mlerl train resume={run_dir}`)"
        )
        code = 130
    finally:
        supervisor.stop()
        _reap_sandboxes(train)
    progress.tick()
    if code == EXIT_INFRA_DOWN and supervisor.stopped_by != "learner":
        print(
            f"mlerl train: {supervisor.stopped_by}: the sandbox stayed down; run stopped "
            f"(see {run_dir / 'logs' / (supervisor.stopped_by + '.log')})",
            file=sys.stderr,
        )
    elif code not in (0, 124, 130) and supervisor.reason:
        print(
            f"mlerl train: {supervisor.stopped_by} failed: {supervisor.reason} "
            f"(see {run_dir / 'logs' / (supervisor.stopped_by + '.log')})",
            file=sys.stderr,
        )
    if code == 124:
        progress.say(f"time limit of {train.time_limit_s:.0f} s reached")
        code = 0
    if code == 0 and train.role != "actors":
        from mlerl.cli._report import write_report

        write_report(train, run_dir, Path(model_path), progress)
    return code


def _check_isolation(train: TrainConfig, run_dir: Path, progress: Progress) -> None:
    """The local sandbox isolates or the run does not start (unless the user opted out)."""
    if train.sandbox.backend != "local" or train.role == "learner":
        return
    from mlerl.sandbox import SandboxUnavailable, make_sandbox

    try:
        box = make_sandbox(train.sandbox)
    except SandboxUnavailable as exc:
        raise SystemExit(f"mlerl train: {exc}") from None
    missing = getattr(box, "missing", {})
    if missing:
        note = "UNISOLATED sandbox (sandbox.allow_unisolated=true): " + "; ".join(
            f"{k}: {v}" for k, v in missing.items()
        )
        progress.say(note)
        with open(run_dir / "UNISOLATED", "w") as f:  # the report says so too
            f.write(note + "\n")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _directions(train: TrainConfig, data_dir: Path) -> dict[str, bool]:
    """Task id -> lower is better, for the console's best column."""
    from mlerl.bench import Registry

    registry = Registry.load(train.tasks.tasks_dir or None, data_dir)
    return {task_id: registry.get(task_id).lower_is_better for task_id in train.tasks.ids}


def _prepare_tasks(train: TrainConfig, progress: Progress) -> Path:
    from mlerl.bench import Registry, TaskError, default_data_dir, prepare

    data_dir = (
        Path(train.tasks.data_dir).expanduser() if train.tasks.data_dir else default_data_dir()
    )
    registry = Registry.load(train.tasks.tasks_dir or None, data_dir)
    for task_id in train.tasks.ids:
        try:
            task = registry.get(task_id)
        except TaskError as exc:
            raise ConfigError("tasks.ids", str(exc)) from None
        if not task.is_prepared():  # missing, or a stand-in built from another data version
            stale = task.private_dir.is_dir() and task.public_dir.is_dir()
            state = "was prepared from another data version" if stale else "is not prepared"
            if not train.tasks.prepare:
                raise ConfigError(
                    "tasks.ids",
                    f"{task_id} {state} under {data_dir} "
                    "(run `mlerl tasks prepare` or set tasks.prepare=true)",
                )
            progress.say(f"preparing {task_id} in {data_dir}" + (" (stale)" if stale else ""))
            prepare(task_id, data_dir)
    return data_dir


def _policy(train: TrainConfig, data_dir: Path, progress: Progress) -> str:
    if train.model.path:
        path = Path(train.model.path).expanduser()
        if not (path / "config.json").is_file():
            raise ConfigError("model.path", f"{path} is not a Hugging Face model directory")
        return str(path)
    from mlerl.embedded import REFERENCE, build_policy

    bootstrap = fill_bootstrap(train, data_dir)
    progress.say("the embedded policy: the reference build, a cached one, or built here once")
    reference = REFERENCE if train.model.reference else None
    return str(
        build_policy(train.model.embedded_cache, bootstrap, log=progress.say, reference=reference)
    )


def fill_bootstrap(train: TrainConfig, data_dir: Path):
    """``model.bootstrap`` with the keys start-up decides filled in (``DECIDED_AT_START``): the
    actors' prompts and, where it names no tasks, the run's stand-in tasks. Its key names the
    embedded policy this run builds or reuses (the reference build's included)."""
    from mlerl.actors import PromptConfig
    from mlerl.embedded import default_task_ids

    bootstrap = train.model.bootstrap
    # SFT must see the prompts RL will send: the actors' prompts own the fact
    if bootstrap.prompts not in (PromptConfig(), train.actors.prompts):
        raise ConfigError(
            "model.bootstrap.prompts",
            "set actors.prompts instead (the bootstrap "
            "uses the actors' prompts, so SFT and RL see the same ones)",
        )
    bootstrap.prompts = train.actors.prompts
    if not bootstrap.task_ids:  # bootstrap on the stand-ins being trained, when they are ones
        standins = set(default_task_ids(data_dir))
        bootstrap.task_ids = [t for t in train.tasks.ids if t in standins]
    return bootstrap


def _write_run_config(
    train: TrainConfig,
    run_dir: Path,
    data_dir: Path,
    model_path: str,
    ports: PortLease | None = None,
) -> Path:
    """Resolve what start-up decides into the keys that own it, and save what every process
    reads (each reads every fact from its owner section: nothing is copied between sections).
    ``ports`` holds the loopback ports picked here for as long as the caller keeps it."""
    ports = ports or PortLease()
    train.model.path = model_path
    train.tasks.data_dir = str(data_dir)
    transport = train.transport
    if train.role == "all":
        # One host: loopback ports that nothing else can be handed (mlerl.cli._ports), unless
        # given. A resumed run keeps its ports and holds them again.
        for key in ("samples_address", "weights_address"):
            address = getattr(transport, key)
            if not address:
                setattr(transport, key, f"tcp://127.0.0.1:{ports.take(1)[0]}")
            elif (port := loopback_port(address)) is not None and not ports.hold(port):
                raise ConfigError(
                    f"transport.{key}",
                    f"{address} is in use (another run or "
                    "program holds its port); stop it, or start a new run",
                )
    for key in ("samples_address", "weights_address"):
        if not getattr(transport, key):
            raise ConfigError(
                f"transport.{key}",
                f"required with role={train.role} (the learner "
                "binds it, the actors connect to it; see docs/protocol.md)",
            )
    if transport.curve and train.role in ("all", "learner"):
        # before any child starts: the actors read the keys the learner serves with
        generate_keys(transport.keys_dir or run_dir / "keys")
    path = run_dir / CONFIG_NAME
    OmegaConf.save(OmegaConf.structured(train), path)
    return path


def _wait_for_keys(train: TrainConfig, run_dir: Path, progress: Progress) -> None:
    """``role=actors``: the learner side creates the run's keys; wait (``keys_wait_s``) until
    the ones the actors need are in ``transport.keys_dir``, so the two sides start in any order."""
    if train.role != "actors" or not train.transport.curve:
        return
    from mlerl.protocol import CurveKeys

    keys = CurveKeys(train.transport.keys_dir or run_dir / "keys")
    deadline = time.monotonic() + train.keys_wait_s
    said = False
    while True:
        try:
            keys.client_keypair()
            keys.server_public()
            return
        except CurveError:
            if time.monotonic() >= deadline:
                raise
        if not said:
            progress.say(
                f"waiting up to {train.keys_wait_s:.0f} s for the learner's keys in "
                f"{keys.directory} (learner.key, actors.key_secret)"
            )
            said = True
        time.sleep(1.0)


def _children(
    train: TrainConfig, run_dir: Path, config_path: Path, ports: PortLease
) -> list[ChildSpec]:
    logs = run_dir / "logs"
    specs: list[ChildSpec] = []
    if train.role in ("all", "learner"):
        module = ["-m", "mlerl.learner", "--config", str(config_path)]
        if train.learner_procs > 1:
            # when a rank dies torchrun stops the group and exits; the supervisor starts a new
            # torchrun (a fresh rendezvous: torchrun's in-place restart reused the dead rank's
            # gloo address here) that resumes from the last checkpoint and the journal. Its
            # rendezvous port is one of ours (``--standalone`` would bind an ephemeral port,
            # which the kernel may also hand to anyone else).
            launcher = [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--nnodes=1",
                f"--nproc_per_node={train.learner_procs}",
                "--max-restarts=0",
                "--rdzv-backend=c10d",
                f"--rdzv-endpoint=127.0.0.1:{ports.take(1)[0]}",
                f"--rdzv-id=mlerl-{os.getpid()}",
            ]
        else:
            launcher = [sys.executable]
        from mlerl.learner import FATAL_FILE  # here: importing mlerl.learner imports torch

        specs.append(
            ChildSpec(
                "learner",
                launcher + module,
                logs / "learner.log",
                restart=train.learner_procs > 1,
                max_restarts=train.learner_restarts,
                fatal_file=run_dir / FATAL_FILE,
            )
        )
    if train.role in ("all", "actors"):
        for i in range(train.num_actors):
            name = f"{train.actor_prefix}-{i}"
            argv = [
                sys.executable,
                "-m",
                "mlerl.actors",
                "--config",
                str(config_path),
                "--actor-id",
                name,
            ]
            specs.append(
                ChildSpec(
                    name,
                    argv,
                    logs / f"{name}.log",
                    restart=True,
                    fatal_exit_codes=(EXIT_INFRA_DOWN,),
                )
            )
    return specs


def _primary(train: TrainConfig) -> str:
    return f"{train.actor_prefix}-0" if train.role == "actors" else "learner"


def _reap_sandboxes(train: TrainConfig) -> None:
    """Remove containers a killed actor may have left (the local backend needs nothing)."""
    if train.sandbox.backend != "docker":
        return
    import asyncio

    from mlerl.sandbox import reap

    try:
        asyncio.run(reap(train.sandbox))
    except Exception as exc:  # noqa: BLE001 - reaping is best effort at shutdown; report it
        print(f"mlerl train: could not reap sandbox containers: {exc}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
