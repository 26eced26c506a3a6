"""Every config fact has one owner key, read where it is owned, by type; no shipped key is dead.

Three kinds of checks:

- ``test_every_schema_field_is_read``: no dead fields. Every field of every dataclass in the
  ``mlerl train`` schema (``TrainConfig`` and its nested sections, recursively) must be read
  somewhere in the library code (``packages/*/src`` and ``src/mlerl``, tests and benchmarks
  excluded). "Read" is found with the AST, not with a text grep, so comments and docstrings
  never count: an attribute access ``x.<field>`` anywhere except inside a ``__post_init__``
  (range checks validate a value, they do not use it) and except the dataclass's own field
  declarations; a whole section may also be named as a string (how ``load_section(cls, path,
  "learner")`` reads it). It is deliberately conservative: a field that shares its name with an
  unrelated attribute passes even if dead, but a field that nobody reads fails, which is what
  ``learner.sampling_multiplier`` was.
- No run fact read by string: the facts several processes share are the run contract
  (``mlerl.protocol.RunContract``, loaded with ``load_run``), every ``load_section`` names a
  section of the schema with its own type, and nothing else selects a dotted key.
- One override test per section: a command-line override of a key reaches the process that
  reads it, through the run config file each process loads (``RUN_DIR/config.yaml``, written
  by ``_write_run_config``), read the way that process reads it. Keys that moved or were
  deleted are refused by the schema instead of silently ignored.
"""

from __future__ import annotations

import ast
import dataclasses
import typing
from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException

from mlerl.actors import ActorsConfig
from mlerl.cli._config import TrainConfig, validate
from mlerl.cli._train import _write_run_config
from mlerl.instrument import RewardConfig
from mlerl.learner import LearnerConfig
from mlerl.protocol import MetricsConfig, RunContract, load_run, load_section
from mlerl.sandbox import SandboxConfig

from .test_config import _compose

REPO = Path(__file__).resolve().parents[2]
LIBRARY = [*sorted((REPO / "packages").glob("*/src")), REPO / "src"]


def _schema_fields(cls: type, prefix: str = "") -> list[tuple[str, str]]:
    """(dotted key, field name) of every field of ``cls`` and its nested dataclass sections."""
    out: list[tuple[str, str]] = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key = f"{prefix}{f.name}"
        out.append((key, f.name))
        kind = hints[f.name]
        if dataclasses.is_dataclass(kind):
            out += _schema_fields(kind, key + ".")
    return out


class _Reads(ast.NodeVisitor):
    """Names read in a module: attribute accesses and string constants (the latter count only
    for whole sections, see ``_library_reads``), outside ``__post_init__`` and outside annotated
    class-level declarations (a dataclass field's own definition)."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.strings: set[str] = set()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name != "__post_init__":
            self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:  # the default may read other names; the target is no read
            self.visit(node.value)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.names.add(node.attr)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            self.strings.add(node.value)


def _library_modules() -> list[Path]:
    return [path for root in LIBRARY for path in sorted(root.rglob("*.py"))]


def _library_reads() -> set[str]:
    """Fields read by attribute, and top-level sections also by name (``load_section``)."""
    reads = _Reads()
    for path in _library_modules():
        reads.visit(ast.parse(path.read_text(), filename=str(path)))
    sections = {
        f.name
        for f in dataclasses.fields(TrainConfig)
        if dataclasses.is_dataclass(typing.get_type_hints(TrainConfig)[f.name])
    }
    return reads.names | (reads.strings & sections)


def test_every_schema_field_is_read():
    reads = _library_reads()
    dead = [key for key, name in _schema_fields(TrainConfig) if name not in reads]
    assert not dead, f"schema fields nobody reads (delete them or wire them): {dead}"


def _calls(paths: list[Path], name: str) -> list[tuple[Path, ast.Call]]:
    """Calls of a function or method called ``name`` in ``paths``."""
    out = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if called == name:
                    out.append((path, node))
    return out


def _readers() -> list[Path]:
    """Library modules and benchmark scripts: everything that reads a run config."""
    return _library_modules() + sorted((REPO / "benchmarks").rglob("*.py"))


def test_no_run_fact_is_read_by_a_dotted_key():
    """The shared facts come typed from ``load_run``; only mlerl.protocol's config modules
    select a key of a config tree (``load_section`` selects one section)."""
    protocol = REPO / "packages" / "protocol" / "src" / "mlerl" / "protocol"
    allowed = {protocol / "_config.py", protocol / "_run_contract.py"}
    found = [
        f"{path.relative_to(REPO)}:{call.lineno}"
        for path, call in _calls(_readers(), "select")
        if path not in allowed and "OmegaConf" in ast.unparse(call.func)
    ]
    found += [
        f"{path.relative_to(REPO)}:{call.lineno}" for path, call in _calls(_readers(), "load_value")
    ]
    assert not found, f"read these through mlerl.protocol.load_run (or load_section): {found}"


def test_every_load_section_names_a_schema_section_of_its_type():
    """``load_section(Cls, path, "name")``: ``name`` is a section of ``TrainConfig`` (dotted for
    a nested one) whose type is ``Cls``, so a renamed or retyped section fails here, not in a run."""
    checked = 0
    for path, call in _calls(_readers(), "load_section"):
        if (
            len(call.args) < 3
            or not isinstance(call.args[2], ast.Constant)
            or not isinstance(call.args[0], ast.Name)
        ):
            continue  # e.g. the learner's `--section` argument, or a helper passing `cls` on
        cls_name, section = call.args[0].id, call.args[2].value
        kind: type = TrainConfig
        for part in section.split("."):
            kind = typing.get_type_hints(kind).get(part)
            assert kind is not None, (
                f"{path.relative_to(REPO)}:{call.lineno}: no section {section!r}"
            )
        assert cls_name in {c.__name__ for c in kind.__mro__}, (
            f"{path.relative_to(REPO)}:{call.lineno}: section {section!r} is a {kind.__name__}, not {cls_name}"
        )
        checked += 1
    assert checked >= 4  # the actors', the learner's, the eval's and a benchmark's


def test_the_dead_field_check_sees_a_dead_field():
    """The check above is not vacuous: a field no code mentions is reported."""

    @dataclasses.dataclass
    class WithDead:
        zz_never_read_anywhere: int = 0

    assert "zz_never_read_anywhere" not in _library_reads()
    assert _schema_fields(WithDead) == [("zz_never_read_anywhere", "zz_never_read_anywhere")]


# ---- one override test per section -------------------------------------------------------
def _run_config(tmp_path: Path, overrides: list[str]) -> Path:
    """The run config every process reads, for ``mlerl train <overrides>`` (role all)."""
    train = validate(_compose(["transport.curve=false", *overrides]))
    model = train.model.path or str(tmp_path / "model")
    return _write_run_config(train, tmp_path, tmp_path / "data", model)


def test_top_level_seed_reaches_learner_and_actors(tmp_path):
    path = _run_config(tmp_path, ["seed=7"])
    assert load_run(path).seed == 7  # both entry points read it here


def test_model_path_reaches_learner_and_actors(tmp_path):
    path = _run_config(tmp_path, [f"model.path={tmp_path / 'm'}"])
    assert load_run(path).model.path == str(tmp_path / "m")


def test_tasks_reach_the_actors(tmp_path):
    tasks = load_run(_run_config(tmp_path, ["tasks.ids=[a,b]", "tasks.tasks_dir=/specs"])).tasks
    assert (tasks.ids, tasks.tasks_dir) == (["a", "b"], "/specs")
    assert tasks.data_dir == str(tmp_path / "data")  # resolved, in its owner


def test_the_run_contract_is_what_train_wrote(tmp_path):
    """The schema extends the contract: every contract field the supervisor holds is what each
    process loads, with nothing lost or renamed on the way through the file."""
    train = validate(_compose(["transport.curve=false", "seed=3", "tasks.public_fraction=0.25"]))
    path = _write_run_config(train, tmp_path, tmp_path / "data", str(tmp_path / "m"))
    assert isinstance(train, RunContract)
    run = load_run(path)
    assert (run.seed, run.model.path, run.transport) == (
        train.seed,
        train.model.path,
        train.transport,
    )
    assert {f.name: getattr(run.tasks, f.name) for f in dataclasses.fields(run.tasks)} == {
        f.name: getattr(train.tasks, f.name) for f in dataclasses.fields(run.tasks)
    }


def test_transport_is_one_section_for_both_sides(tmp_path):
    path = _run_config(
        tmp_path,
        [
            "transport.samples_address=tcp://127.0.0.1:7001",
            "transport.keys_dir=/keys",
            "transport.curve=true",
        ],
    )
    transport = load_run(path).transport.resolve(tmp_path)
    assert transport.samples_address == "tcp://127.0.0.1:7001"  # given: honoured with role=all
    assert transport.weights_address.startswith("tcp://127.0.0.1:")  # empty: a free port
    assert transport.keys_dir == "/keys"


def test_transport_addresses_are_required_for_split_roles(tmp_path):
    from mlerl.protocol import ConfigError

    train = validate(_compose(["role=learner", "transport.curve=false"]))
    with pytest.raises(ConfigError, match="transport.samples_address"):
        _write_run_config(train, tmp_path, tmp_path / "data", "model")


@pytest.mark.parametrize(
    "section,cls,override,field,value",
    [
        ("learner", LearnerConfig, "learner.lr=0.25", "lr", 0.25),
        ("actors", ActorsConfig, "actors.temperature=0.5", "temperature", 0.5),
        ("sandbox", SandboxConfig, "sandbox.max_concurrency=3", "max_concurrency", 3),
        ("instrument.reward", RewardConfig, "instrument.reward.failure=-3.0", "failure", -3.0),
        ("logging", MetricsConfig, "logging.wandb_mode=disabled", "wandb_mode", "disabled"),
    ],
)
def test_section_override_reaches_its_reader(tmp_path, section, cls, override, field, value):
    loaded = load_section(cls, _run_config(tmp_path, [override]), section)
    assert getattr(loaded, field) == value


def test_instrument_mode_reaches_the_actors(tmp_path):
    from mlerl.instrument import InstrumentConfig, InstrumentMode, MarkerMode

    path = _run_config(tmp_path, ["instrument=paper"])
    loaded = load_section(InstrumentConfig, path, "instrument")  # what the actor process reads
    assert (loaded.mode, loaded.markers) == (InstrumentMode.paper, MarkerMode.paper)


def test_sandbox_limits_reach_the_actors(tmp_path):
    """Execution limits are the sandbox section's (0 s: each task's own limit)."""
    loaded = load_section(
        SandboxConfig,
        _run_config(tmp_path, ["sandbox.limits.memory_mb=2048", "sandbox.limits.pids=256"]),
        "sandbox",
    )
    assert (loaded.limits.memory_mb, loaded.limits.pids, loaded.limits.wall_time_s) == (
        2048,
        256,
        0.0,
    )


@pytest.mark.parametrize(
    "key",
    [
        "learner.model_path=/m",
        "learner.run_dir=/r",
        "learner.seed=1",
        "learner.receive_address=tcp://x:1",
        "learner.curve=false",
        "learner.sampling_multiplier=3",
        "learner.temperature=0.5",
        "actors.model_path=/m",
        "actors.task_ids=[a]",
        "actors.data_dir=/d",
        "actors.seed=1",
        "actors.samples_address=tcp://x:1",
        "actors.keys_dir=/k",
        "actors.exec_time_limit_s=60",
        "actors.exec_memory_mb=1024",
        "actors.exec_cpus=2",
        # the door's reward bounds are the reward function's range now (instrument.reward)
        "learner.reward_min=-100",
        "learner.reward_max=100",
    ],
)
def test_moved_and_deleted_keys_are_refused(key):
    with pytest.raises(ConfigCompositionException):
        _compose([key])


def test_reward_range_and_public_fraction_reach_their_readers(tmp_path):
    """The learner's door reads the reward's range from `instrument.reward`; the actors read
    `tasks.public_fraction` (null: each task's own)."""
    from mlerl.learner.__main__ import _reward_bounds

    path = _run_config(tmp_path, [])
    assert _reward_bounds(path) == (-10.0, 1.0) and load_run(path).tasks.public_fraction is None
    path = _run_config(tmp_path, ["instrument.reward.kind=paper", "tasks.public_fraction=1"])
    assert (
        _reward_bounds(path) == (float("-inf"), float("inf"))
        and load_run(path).tasks.public_fraction == 1.0
    )
    path = _run_config(tmp_path, ["instrument=paper"])
    assert _reward_bounds(path) == (float("-inf"), float("inf"))  # the preset's raw reward


def test_bad_public_fraction_names_the_key():
    from mlerl.protocol import ConfigError

    with pytest.raises(ConfigError, match="tasks.public_fraction"):
        validate(_compose(["tasks.public_fraction=0"]))
