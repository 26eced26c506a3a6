"""Suite-wide: how two pytest-xdist workers share the modules, tests marked ``gpu`` need a
CUDA GPU, and the random real-size model the ``gpu`` tests share.

Without CUDA every ``gpu`` test is skipped with the reason below: the one skip the suite allows
(``make test`` deselects them anyway with ``-m "not gpu"``; ``pytest -m gpu`` runs them on a GPU
machine, README "Running at the paper's scale").
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

NO_CUDA = (
    "needs a CUDA GPU: torch.cuda.is_available() is False here (no GPU, or the CPU torch "
    "wheel); run `pytest -m gpu` on a GPU machine (README, 'Running at the paper's scale')"
)


SYSTEM_MODULES = frozenset(
    {
        "tests/cli/test_train_e2e.py",
        "tests/cli/test_distributed_e2e.py",
        "tests/cli/test_fault_matrix.py",
    }
)
"""The end-to-end modules that each start a whole system (supervisor, learner ranks, actors,
sandboxes) and time its recoveries: with two workers they run one after another on one worker,
never two at once on 2 cores."""


@pytest.hookimpl(optionalhook=True)  # .venv-vllm runs the vLLM tests without pytest-xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadfile`` (`make test`: two pytest-xdist workers), with SYSTEM_MODULES one unit:
    each module runs whole on one worker, so its module fixtures run once, as in a serial run.
    (xdist's own ``loadgroup`` marks do not group under pytest 9.2: it renames node ids, which
    pytest no longer reads.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class LoadFileWithSystem(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "system" if path in SYSTEM_MODULES else path

    return LoadFileWithSystem(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import torch

    if torch.cuda.is_available():
        return
    for item in gpu_items:
        item.add_marker(pytest.mark.skip(reason=NO_CUDA))


@pytest.fixture(scope="session")
def random_qwen25_05b() -> Path:
    """Qwen2.5-0.5B's architecture initialised at random (``mlerl.embedded.build_random_model``),
    built once and reused from ``$MLERL_RANDOM_MODELS`` (default ``~/.cache/mlerl/random-models``,
    the cache ``benchmarks/throughput/gpu.py`` uses too)."""
    from mlerl.embedded import build_random_model

    cache = Path(os.environ.get("MLERL_RANDOM_MODELS", "~/.cache/mlerl/random-models")).expanduser()
    return build_random_model("qwen2.5-0.5b", cache / "qwen2.5-0.5b")


_BLOCK, _RECORD_HEADER, _FILE_HEADER = 32768, 7, 7  # W&B's .wandb file: a LevelDB-style log


def _wandb_log_records(path: Path) -> list[bytes]:
    """The records of one ``run-<id>.wandb`` file: after a 7-byte file header, 32 KiB blocks of
    chunks (CRC32C 4 bytes, length 2 LE, type 1: full / first / middle / last), as W&B writes."""
    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path}: not a W&B run file"
    records, parts, offset = [], [], _FILE_HEADER
    while offset + _RECORD_HEADER <= len(data):
        left = _BLOCK - offset % _BLOCK
        if left < _RECORD_HEADER:  # a block's tail too short for a header is zero padding
            offset += left
            continue
        length = int.from_bytes(data[offset + 4 : offset + 6], "little")
        kind = data[offset + 6]
        if kind == 0 and length == 0:
            break
        chunk = data[offset + _RECORD_HEADER : offset + _RECORD_HEADER + length]
        offset += _RECORD_HEADER + length
        parts.append(chunk)
        if kind in (1, 4):  # full, last
            records.append(b"".join(parts))
            parts = []
    return records


class OfflineWandb:
    """What the offline W&B runs under ``<run dir>/wandb`` hold, read back from their files."""

    def __init__(self, run_dir: Path) -> None:
        self.runs = sorted((run_dir / "wandb").glob("offline-run-*"))

    def history(self) -> list[dict[str, object]]:
        """Every logged row of every run (oldest run first), each as {key: decoded JSON value}."""
        import json

        from wandb.proto import wandb_internal_pb2

        rows = []
        for run in self.runs:
            (log_file,) = run.glob("run-*.wandb")
            for raw in _wandb_log_records(log_file):
                record = wandb_internal_pb2.Record()
                record.ParseFromString(raw)
                if record.WhichOneof("record_type") != "history":
                    continue
                row: dict[str, object] = {}
                for item in record.history.item:  # a media value comes as one item per field
                    *outer, last = list(item.nested_key) or [item.key]
                    node = row
                    for key in outer:
                        node = node.setdefault(key, {})  # type: ignore[assignment]
                    node[last] = json.loads(item.value_json)
                rows.append(row)
        return rows

    def media(self, value: dict[str, object]) -> Path:
        """The file a logged table or image refers to (``value``: its history value)."""
        for run in self.runs:
            path = run / "files" / str(value["path"])
            if path.is_file():
                return path
        raise FileNotFoundError(value["path"])

    def table(self, value: dict[str, object]) -> tuple[list[str], list[list[object]]]:
        """A logged table's columns and rows."""
        import json

        data = json.loads(self.media(value).read_text())
        return data["columns"], data["data"]


@pytest.fixture
def wandb_offline(monkeypatch: pytest.MonkeyPatch) -> type[OfflineWandb]:
    """Quiet offline W&B (no git, code or console capture) and the reader of its run files."""
    for key, value in {
        "WANDB_SILENT": "true",
        "WANDB_DISABLE_GIT": "true",
        "WANDB_DISABLE_CODE": "true",
        "WANDB_CONSOLE": "off",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    return OfflineWandb
