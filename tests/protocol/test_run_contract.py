"""The run contract: ``load_run`` reads the facts every process shares from a run config, typed,
and refuses bad input with a ConfigError naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlerl.protocol import ConfigError, RunContract, RunTransportConfig, load_run

GOOD = """\
seed: 7
resume: ''            # the supervisor's keys: not the contract's, ignored
model:
  path: /models/policy
  embedded_cache: ~/.cache/x
  bootstrap: {seed: 3}
tasks:
  ids: [a, b]
  data_dir: /data
  tasks_dir: ''
  public_fraction: 0.5
  prepare: true
transport:
  samples_address: tcp://127.0.0.1:7001
  weights_address: tcp://127.0.0.1:7002
  curve: false
  keys_dir: ''
learner: {lr: 0.1}
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def test_a_run_config_loads_typed(tmp_path):
    run = load_run(_write(tmp_path, GOOD))
    assert isinstance(run, RunContract)
    assert (run.seed, run.model.path) == (7, "/models/policy")
    assert (run.tasks.ids, run.tasks.data_dir, run.tasks.tasks_dir, run.tasks.public_fraction) == (
        ["a", "b"],
        "/data",
        "",
        0.5,
    )
    assert run.transport == RunTransportConfig(
        "tcp://127.0.0.1:7001", "tcp://127.0.0.1:7002", curve=False
    )
    resolved = run.transport.resolve(tmp_path)
    assert resolved.samples_address == "tcp://127.0.0.1:7001" and resolved.keys_dir is None


def test_missing_keys_take_the_schema_defaults(tmp_path):
    """A run config without ``tasks.public_fraction`` (older runs) or ``seed`` reads as the schema
    would: the same value the supervisor saw."""
    run = load_run(_write(tmp_path, "model: {path: /m}\n"))
    assert (run.seed, run.tasks.ids, run.tasks.public_fraction) == (
        0,
        ["standin-cancer-auc-tiny"],
        None,
    )


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("seed: many\nmodel: {path: /m}\n", "seed"),
        ("model: {path: /m}\ntasks: {ids: []}\n", "tasks.ids"),
        ("model: {path: /m}\ntasks: {public_fraction: 0}\n", "tasks.public_fraction"),
        (
            "model: {path: /m}\ntransport: {samples_address: 'http://x:1'}\n",
            "transport.samples_address",
        ),
        ("model: {path: ''}\n", "model.path"),
        ("seed: 1\n", "model.path"),
        ("model: /m\n", "model"),
        ("model: {path: /m}\ntasks: {ids: a}\n", "tasks.ids"),
    ],
)
def test_bad_input_names_the_key(tmp_path, text, key):
    with pytest.raises(ConfigError) as info:
        load_run(_write(tmp_path, text))
    assert info.value.key == key, info.value


def test_an_unreadable_file_names_the_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read the config file"):
        load_run(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="must hold a YAML mapping"):
        load_run(_write(tmp_path, "- a list\n"))
