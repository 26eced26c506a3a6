"""The typed configuration of `mlerl train`, registered with Hydra's ConfigStore.

Each section is the owning package's own dataclass (``learner`` is
:class:`mlerl.learner.LearnerConfig`, ``sandbox`` is :class:`mlerl.sandbox.SandboxConfig`, ...),
so a field is documented once, where it is used. This module only adds what the supervisor alone
reads (the embedded bootstrap, task preparation, process counts) and ties them together.

Every fact has one owner key, and every process reads it there (nothing is copied between
sections at start-up). The facts several processes read (``seed``, ``model.path``, ``tasks``,
``transport``) are the run contract, :class:`mlerl.protocol.RunContract`, which
:class:`TrainConfig` extends: the learner, the actors and ``mlerl eval --run`` load it with
``mlerl.protocol.load_run``, each package's own section with ``load_section``. Start-up only
resolves what it decides into the owning key (the embedded policy's path into ``model.path``,
the default data root into ``tasks.data_dir``, free loopback ports into ``transport`` with
``role=all``) before writing ``RUN_DIR/config.yaml``. An unknown key is refused by the schema
while composing. YAML groups live in ``conf/`` beside this file; ``conf/train.yaml`` is the
primary config.

Validation happens twice, both at start-up: OmegaConf checks types while composing (a string
for an int fails with the full key), and :func:`validate` instantiates every dataclass so its
``__post_init__`` range checks run (a ConfigError names ``section.key``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from mlerl.actors import ActorsConfig
from mlerl.embedded import BootstrapConfig
from mlerl.instrument import InstrumentConfig
from mlerl.learner import LearnerConfig
from mlerl.protocol import MetricsConfig, RunContract, RunModel, RunTasks, check, to_object
from mlerl.sandbox import SandboxConfig


@dataclass
class ModelConfig(RunModel):
    """``model``: the run contract's ``path`` (:class:`mlerl.protocol.RunModel`), plus how the
    supervisor builds the embedded policy when it is empty."""

    embedded_cache: str = "~/.cache/mlerl/embedded"
    """Where the embedded policy (tokenizer + bootstrapped model) is cached."""
    bootstrap: BootstrapConfig = field(default_factory=BootstrapConfig)
    """How the embedded policy is built (corpus, model shape, SFT budget)."""
    reference: bool = True
    """Take the reference build shipped with mlerl-embedded where its key matches (the default
    run's policy: no build, the same weights on every machine); false builds it here."""


@dataclass
class TasksConfig(RunTasks):
    """``tasks``: the run contract's tasks (:class:`mlerl.protocol.RunTasks`), plus whether the
    supervisor prepares missing ones."""

    prepare: bool = True
    """Prepare stand-in tasks that are missing from ``data_dir`` before training."""


@dataclass
class TrainConfig(RunContract):
    """The run contract (:class:`mlerl.protocol.RunContract`: ``seed``, ``model.path``,
    ``tasks``, ``transport``; documented there) and what only the supervisor or one package
    reads."""

    resume: str = ""
    """A run directory to continue; empty starts a new run in Hydra's output dir."""
    num_actors: int = 1
    """Actor processes."""
    learner_procs: int = 1
    """Learner processes (``torchrun --nproc_per_node``; FSDP2 shards across them). The paper: 8."""
    learner_restarts: int = 3
    """With ``learner_procs > 1``: how often the learner group (a new torchrun) is restarted after
    a rank dies; each restart resumes from the last checkpoint and the journal."""
    role: str = "all"
    """``all`` runs learner and actors here; ``learner`` or ``actors`` runs one side, for
    multi-host runs (set ``transport.samples_address``/``weights_address`` on both hosts)."""
    actor_prefix: str = "actor"
    """Actor ids are ``<actor_prefix>-<i>``; give each actor host its own prefix (its node
    name under `mlerl slurm`) so ids stay unique across hosts and stable across restarts."""
    prepare_only: bool = False
    """Prepare tasks, policy, keys (role all/learner) and ``RUN_DIR/config.yaml``, then exit
    without starting a process: what a cluster job runs before launching torchrun itself."""
    keys_wait_s: float = 600.0
    """``role=actors``: how long to wait for the learner's keys (``learner.key`` and
    ``actors.key_secret`` in ``transport.keys_dir``) before giving up; the learner side creates
    them, so the two invocations may start in either order."""
    time_limit_s: float = 0.0
    """Stop training after this many seconds (0: only ``learner.max_updates`` stops it)."""
    eval_samples: int = 16
    """K for the closing best-of-K report (trained vs bootstrapped policy); 0 skips it."""
    model: ModelConfig = field(default_factory=ModelConfig)
    tasks: TasksConfig = field(default_factory=TasksConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    instrument: InstrumentConfig = field(default_factory=InstrumentConfig)
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    actors: ActorsConfig = field(default_factory=ActorsConfig)
    logging: MetricsConfig = field(default_factory=MetricsConfig)

    def __post_init__(self) -> None:
        check(self.num_actors >= 1, "num_actors", "must be >= 1")
        check(self.learner_procs >= 1, "learner_procs", "must be >= 1")
        check(self.learner_restarts >= 0, "learner_restarts", "must be >= 0")
        check(
            self.role in ("all", "learner", "actors"),
            "role",
            "must be 'all', 'learner' or 'actors'",
        )
        check(self.time_limit_s >= 0, "time_limit_s", "must be >= 0")
        check(self.keys_wait_s >= 0, "keys_wait_s", "must be >= 0")
        check(
            bool(self.actor_prefix)
            and "/" not in self.actor_prefix
            and " " not in self.actor_prefix,
            "actor_prefix",
            "must be a non-empty name without '/' or spaces",
        )
        check(self.eval_samples >= 0, "eval_samples", "must be >= 0")
        # Each actor runs its programs in its own sandbox: `sandbox.max_concurrency` owns how many
        # run at once; admission may not count more as running (they would queue in the sandbox,
        # and the admission's staleness and oversampling rules would misjudge them).
        slots, running = self.sandbox.max_concurrency, self.actors.admission.max_in_flight
        check(
            running <= slots,
            "actors.admission.max_in_flight",
            f"{running} exceeds sandbox.max_concurrency={slots}, the programs one actor's "
            "sandbox runs "
            "at once; lower it or raise sandbox.max_concurrency (e.g. "
            f"sandbox.max_concurrency={running})",
        )


def register() -> None:
    """Register the schema so ``conf/train.yaml`` can list ``train_schema`` in its defaults.
    Once per process: Hydra 1.4 warns when a name is stored again."""
    store = ConfigStore.instance()
    if "train_schema.yaml" not in store.repo:
        store.store(name="train_schema", node=TrainConfig)


def _hydra_version() -> tuple[int, int]:
    found = re.match(r"(\d+)\.(\d+)", hydra.__version__)
    if found is None:
        raise RuntimeError(f"hydra {hydra.__version__}: no major.minor version")
    major, minor = found.groups()
    return int(major), int(minor)


VERSION_BASE: dict[str, str] = {} if _hydra_version() >= (1, 4) else {"version_base": "1.3"}
"""``**VERSION_BASE`` for ``hydra.main`` and ``initialize_config_dir``: the tree is written for
Hydra 1.3's defaults, which 1.3 warns about unless ``version_base`` names them, and which are
1.4's own defaults; 1.4 deprecated the argument and warns whenever it is given."""


def validate(cfg: Any) -> TrainConfig:
    """Instantiate the composed config, running every section's range checks."""
    return to_object(TrainConfig, cfg)


DECIDED_AT_START = (
    "model.path",
    "tasks.data_dir",
    "transport.samples_address",
    "transport.weights_address",
    "model.bootstrap.task_ids",
    "model.bootstrap.prompts",
)
"""Keys start-up fills in when they hold their default (see the module docstring); on resume
the default means "as this run decided", never a change."""


def resume_conflicts(
    overrides: list[str], requested: TrainConfig, stored: TrainConfig
) -> list[str]:
    """The command-line overrides that would change a resumed run: ``key: given X, the run has Y``.

    ``mlerl train resume=DIR`` continues DIR with its own ``config.yaml``. An override that
    repeats the run's value is fine (a Slurm resubmission repeats its command line); one that
    differs is reported, so it is refused instead of silently ignored. ``hydra.*`` and
    ``resume`` are not run facts; a group choice (``learner=paper``) compares its whole section.
    """

    def plain(c: TrainConfig) -> dict:
        return OmegaConf.to_container(OmegaConf.structured(c), enum_to_str=True)  # type: ignore[return-value]  # a structured config converts to a dict

    new, old, default = plain(requested), plain(stored), plain(TrainConfig())
    conflicts: list[str] = []

    def compare(key: str, a: Any, b: Any, d: Any) -> None:
        if key in DECIDED_AT_START and a == d:
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b)):
                compare(f"{key}.{k}", a.get(k), b.get(k), d.get(k) if isinstance(d, dict) else None)
        elif _norm(a) != _norm(b):
            conflicts.append(f"{key}: given {a!r}, the run has {b!r}")

    for item in overrides:
        key = item.split("=", 1)[0].lstrip("~+")
        if key == "resume" or key.split(".")[0] == "hydra" or "@" in key:
            continue
        compare(key, _select(new, key), _select(old, key), _select(default, key))
    return list(dict.fromkeys(conflicts))


def _select(tree: Any, key: str) -> Any:
    for part in key.split("."):
        tree = tree.get(part) if isinstance(tree, dict) else None
    return tree


def _norm(value: Any) -> Any:
    return os.path.expanduser(value) if isinstance(value, str) and value.startswith("~") else value
