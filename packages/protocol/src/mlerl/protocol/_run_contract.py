"""``RunContract``: the facts every process of a run reads, typed, and :func:`load_run`.

``mlerl train`` writes one config per run, ``RUN_DIR/config.yaml``. Its schema (``TrainConfig``
in ``mlerl.cli``) extends :class:`RunContract`, so the contract's fields *are* that file's keys
and are documented once, here: the policy (``model.path``), ``seed``, the tasks (``tasks``) and
where the two streams meet (``transport``). Every entry point that starts from a run config
(``python -m mlerl.learner``, ``python -m mlerl.actors``, ``mlerl eval --run``) calls
:func:`load_run` once and passes the typed values down; no process names these keys as strings,
so a renamed field fails type checking and the tests, not a run.

Each package's own section (``learner``, ``actors``, ``sandbox``, ``instrument``, ``logging``)
is that package's dataclass, read with :func:`~mlerl.protocol.load_section` by the processes
that use it; the contract holds only what no single package owns.

Guarantees of :func:`load_run`: the file is read once; keys outside the contract are ignored
(they belong to other sections); a missing contract key takes the same default
``TrainConfig`` gives it (so the supervisor and its children never disagree on a value);
a wrong type or a range error raises :class:`~mlerl.protocol.ConfigError` naming the dotted key;
``model.path`` must be set (``mlerl train`` writes the resolved path).
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from mlerl.protocol._config import ConfigError, check, load_yaml, to_object
from mlerl.protocol._transport_config import RunTransportConfig


@dataclass
class RunModel:
    path: str = ""
    """HF model directory of the policy, read by the learner and the actors. Empty: the
    embedded tiny policy, built offline and cached on first use (the run's ``config.yaml`` then
    holds its path)."""


@dataclass
class RunTasks:
    ids: list[str] = field(default_factory=lambda: ["standin-cancer-auc-tiny"])
    """Task ids trained on (see ``mlerl tasks list``), drawn uniformly per action by the actors."""
    data_dir: str = ""
    """Prepared data root (MLE-bench layout). Empty: MLE-bench's cache dir (the run's
    ``config.yaml`` holds the resolved path)."""
    tasks_dir: str = ""
    """Extra task-spec directories (user tasks) besides the built-in ones."""
    public_fraction: float | None = None
    """Share of each task's answers on its public leaderboard, which rewards and selections read
    (the rest is the private one, which reports show). None: each task's own (``task.yaml``'s
    ``public_fraction``, else 0.5). 1: no split, rewards and reports on all answers (the paper)."""

    def __post_init__(self) -> None:
        check(len(self.ids) > 0, "ids", "must name at least one task")
        check(
            self.public_fraction is None or 0.0 < self.public_fraction <= 1.0,
            "public_fraction",
            "must lie in (0, 1] (1: no split), or be null for each task's own",
        )


@dataclass
class RunContract:
    """The run facts the learner, the actors and the evaluation all read (see the module
    docstring); ``mlerl.cli``'s ``TrainConfig`` adds what only the supervisor reads."""

    seed: int = 0
    """Seeds sampling, batching and tasks (the learner's minibatches and value head, each
    actor's task and prompt choice and sampling, combined with its id). The embedded bootstrap
    has its own ``model.bootstrap.seed``, so a sweep over ``seed`` starts every run from the
    same policy."""
    model: RunModel = field(default_factory=RunModel)
    """The policy every process loads."""
    tasks: RunTasks = field(default_factory=RunTasks)
    """What is trained on (the actors) and evaluated (``mlerl eval --run``, the report)."""
    transport: RunTransportConfig = field(default_factory=RunTransportConfig)
    """Where the sample and weight streams meet: the learner binds, every actor connects."""


def load_run(path: str | Path) -> RunContract:
    """The run contract of the run config at ``path`` (``RUN_DIR/config.yaml``), validated.

    A missing or unparsable file, a wrong type, a range error or an empty ``model.path`` raises
    :class:`ConfigError` naming the key (the file's path for an unreadable file)."""
    root = load_yaml(path)
    run = to_object(RunContract, _project(root, RunContract))
    check(
        bool(run.model.path),
        "model.path",
        f"empty in {path}; a run config names its policy (`mlerl train` writes the resolved path)",
    )
    return run


def _project(node: Any, cls: type) -> dict[str, Any]:
    """The part of ``node`` (a config mapping) that ``cls``'s fields name, recursively: the rest
    of a run config belongs to other sections, which the contract does not validate."""
    from omegaconf import DictConfig

    hints = typing.get_type_hints(cls)
    out: dict[str, Any] = {}
    for f in fields(cls):
        if f.name not in node:
            continue
        child = node[f.name]
        if is_dataclass(hints[f.name]):
            if not isinstance(child, DictConfig):
                raise ConfigError(f.name, f"must be a section (a mapping), got {child!r}")
            try:
                out[f.name] = _project(child, hints[f.name])
            except ConfigError as exc:
                raise exc.under(f.name) from None
        else:
            out[f.name] = child
    return out
