"""Metrics sinks: one small interface, several destinations (W&B, JSON lines, console).

Step semantics. Every ``log(metrics, step, stream=...)`` call names its *stream* and a step on
that stream's own axis:

- ``stream="learner"``: ``step`` is the learner's optimizer update step (0, 1, 2, ...).
- ``stream="actor/<actor_id>"`` (or ``"actor"`` for aggregates): ``step`` is that actor's
  sample counter (the number of samples it has produced, i.e. its ``seq`` + 1).
- Other streams (``"eval"``, ``"transport"``) pick a step that increases within the stream.

Streams are independent: their steps need not agree or be comparable. Metric keys are written
as ``<stream>/<key>``. In W&B each stream gets ``define_metric("<stream>/*",
step_metric="<stream>/step")``, so every stream has its own x-axis and no stream is forced onto
W&B's single global step (which must be monotonic across *all* calls).

Values must be real numbers (bool, int, float); a non-number raises ``TypeError`` naming the
key. Non-finite floats are kept: JSONL writes them as the strings ``"nan"``, ``"inf"``,
``"-inf"`` (JSON has no literal for them).

Tables and images (:class:`MediaSink`): W&B keeps them as ``wandb.Table`` and ``wandb.Image``
under ``<stream>/<key>`` on the stream's step axis (offline too: the run's ``files/media``);
:class:`MultiSink` hands them to the sinks that keep media and the others skip them (the JSONL
and console sinks: what the tables show is in the run dir's own files already).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TextIO, cast, runtime_checkable

if TYPE_CHECKING:
    import wandb

_WandbMode = Literal["offline", "online", "disabled"]


@runtime_checkable
class MetricsSink(Protocol):
    """Where metrics go. ``step`` is on ``stream``'s own axis (see the module docstring)."""

    def log(self, metrics: Mapping[str, float], step: int, *, stream: str = "learner") -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class MediaSink(MetricsSink, Protocol):
    """A sink that also keeps tables and images (W&B; see the module docstring)."""

    def log_table(
        self,
        key: str,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        step: int,
        *,
        stream: str = "learner",
    ) -> None: ...

    def log_images(
        self, images: Mapping[str, str | Path], step: int, *, stream: str = "learner"
    ) -> None: ...


def _numbers(metrics: Mapping[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in metrics.items():
        if not isinstance(value, (int, float)) and callable(getattr(value, "item", None)):
            value = value.item()  # a 0-d numpy/torch scalar
        if not isinstance(value, (int, float)):
            raise TypeError(f"{key}: metric value must be a number, got {type(value).__name__}")
        out[str(key)] = float(value) if isinstance(value, bool) else value
    return out


def _check_stream(stream: str, step: int) -> None:
    if not stream or stream.startswith("/") or stream.endswith("/"):
        raise ValueError(
            f"stream: must be a non-empty name without leading/trailing '/', got {stream!r}"
        )
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"step: must be an int >= 0, got {step!r}")


def _json_value(value: float) -> float | str:
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


class JsonlSink:
    """Append one JSON object per ``log`` call: ``{"time", "stream", "step", <metrics>...}``.

    Each line is flushed at once, so a crash loses at most the line being written.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: TextIO | None = self.path.open("a", encoding="utf-8")

    def log(self, metrics: Mapping[str, float], step: int, *, stream: str = "learner") -> None:
        _check_stream(stream, step)
        if self._file is None:
            raise ValueError(f"JsonlSink({self.path}) is closed")
        row: dict[str, Any] = {"time": time.time(), "stream": stream, "step": step}
        for key, value in _numbers(metrics).items():
            if key in row:
                raise ValueError(f"{key}: reserved key in a metrics row")
            row[key] = _json_value(value)
        self._file.write(json.dumps(row, allow_nan=False) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class ConsoleSink:
    """Print one line per call (with rich when installed), at most every ``every`` steps per
    stream."""

    def __init__(self, every: int = 1) -> None:
        if every < 1:
            raise ValueError("every: must be >= 1")
        self.every = every
        self._print: Callable[[str], None]
        try:
            from rich.console import Console

            console = Console(highlight=False, markup=False)
            console.soft_wrap = not console.is_terminal  # a log file gets whole lines
            self._print = console.print
        except ImportError:  # rich is an optional extra
            self._print = print

    def log(self, metrics: Mapping[str, float], step: int, *, stream: str = "learner") -> None:
        _check_stream(stream, step)
        if step % self.every:
            return
        parts = " ".join(f"{k}={v:.4g}" for k, v in _numbers(metrics).items())
        self._print(f"[{stream}] step={step} {parts}")

    def close(self) -> None:
        pass


class WandbSink:
    """Log to Weights & Biases; ``wandb`` is imported only when this sink is created.

    ``mode`` is ``"offline"`` by default (run files under ``<run_dir>/wandb/``, sync later with
    ``wandb sync``), ``"online"`` to stream (needs a key), or ``"disabled"`` (no files, no-op).

    ``run.finish()`` returns before W&B's background service has written the last records, so
    ``close()`` also calls ``wandb.teardown()`` (``teardown=True``): when it returns the run
    files are complete. Pass ``teardown=False`` if other W&B runs live in the same process.

    ``run_id`` continues that W&B run (``resume="allow"``): a resumed training run logs into the
    run it started, not a new one.
    """

    def __init__(
        self,
        run_dir: str | Path,
        *,
        project: str = "mlerl",
        mode: str = "offline",
        name: str | None = None,
        entity: str | None = None,
        config: Mapping[str, Any] | None = None,
        tags: Iterable[str] = (),
        teardown: bool = True,
        run_id: str | None = None,
    ) -> None:
        if mode not in ("offline", "online", "disabled"):
            raise ValueError(f"mode: must be offline, online or disabled, got {mode!r}")
        import wandb

        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._streams: set[str] = set()
        self._teardown = teardown
        self._run: wandb.Run | None = wandb.init(
            project=project,
            entity=entity,
            name=name,
            mode=cast(_WandbMode, mode),  # checked above
            dir=os.fspath(self.run_dir),
            config=dict(config or {}),
            tags=list(tags),
            reinit="create_new",
            id=run_id,
            resume="allow" if run_id else None,
        )
        self.run_id: str = self._run.id

    @property
    def _live(self) -> wandb.Run:
        if self._run is None:
            raise ValueError("WandbSink is closed")
        return self._run

    def _define(self, stream: str) -> None:
        if stream not in self._streams:
            self._live.define_metric(f"{stream}/step")
            self._live.define_metric(f"{stream}/*", step_metric=f"{stream}/step")
            self._streams.add(stream)

    def log(self, metrics: Mapping[str, float], step: int, *, stream: str = "learner") -> None:
        _check_stream(stream, step)
        self._define(stream)
        data: dict[str, float] = {f"{stream}/{k}": v for k, v in _numbers(metrics).items()}
        data[f"{stream}/step"] = step
        self._live.log(data)

    def log_table(
        self,
        key: str,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        step: int,
        *,
        stream: str = "learner",
    ) -> None:
        """``rows`` (each as long as ``columns``) as one ``wandb.Table`` at ``<stream>/<key>``."""
        import wandb

        _check_stream(stream, step)
        bad = [i for i, row in enumerate(rows) if len(row) != len(columns)]
        if bad:
            raise ValueError(
                f"{key}: row {bad[0]} has {len(rows[bad[0]])} cells, expected {len(columns)}"
            )
        self._define(stream)
        # mixed types: a column may hold None beside numbers, or cells a markdown table gave as text
        table = wandb.Table(
            columns=list(columns), data=[list(row) for row in rows], allow_mixed_types=True
        )
        self._live.log({f"{stream}/{key}": table, f"{stream}/step": step})

    def log_images(
        self, images: Mapping[str, str | Path], step: int, *, stream: str = "learner"
    ) -> None:
        """Each image file (PNG) as a ``wandb.Image`` at ``<stream>/<key>``."""
        import wandb

        _check_stream(stream, step)
        missing = [os.fspath(p) for p in images.values() if not Path(p).is_file()]
        if missing:
            raise FileNotFoundError(f"images: no file {missing[0]}")
        self._define(stream)
        data: dict[str, Any] = {
            f"{stream}/{k}": wandb.Image(os.fspath(p)) for k, p in images.items()
        }
        data[f"{stream}/step"] = step
        self._live.log(data)

    def close(self) -> None:
        if self._run is not None:
            self._run.finish()
            self._run = None
            if self._teardown:
                import wandb

                wandb.teardown()


class MultiSink:
    """Fan out to several sinks. ``close`` closes all of them, then raises the first error."""

    def __init__(self, sinks: Iterable[MetricsSink]) -> None:
        self.sinks = list(sinks)

    def log(self, metrics: Mapping[str, float], step: int, *, stream: str = "learner") -> None:
        for sink in self.sinks:
            sink.log(metrics, step, stream=stream)

    def log_table(
        self,
        key: str,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        step: int,
        *,
        stream: str = "learner",
    ) -> None:
        for sink in self.sinks:
            if isinstance(sink, MediaSink):
                sink.log_table(key, columns, rows, step, stream=stream)

    def log_images(
        self, images: Mapping[str, str | Path], step: int, *, stream: str = "learner"
    ) -> None:
        for sink in self.sinks:
            if isinstance(sink, MediaSink):
                sink.log_images(images, step, stream=stream)

    def close(self) -> None:
        errors: list[Exception] = []
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:  # noqa: BLE001 - close the rest; the first error is raised after
                errors.append(exc)
        if errors:
            raise errors[0]


@dataclass
class MetricsConfig:
    """Where a process's metrics go (the run config's ``logging`` section)."""

    wandb_mode: str = "offline"
    """``offline`` (default: run files under the run dir, ``wandb sync`` later), ``online``
    (needs ``WANDB_API_KEY``) or ``disabled``."""
    wandb_project: str = "mlerl"
    """W&B project name."""
    wandb_entity: str = ""
    """W&B entity (team); empty: your default."""
    jsonl: bool = True
    """Also append every record to ``<run dir>/metrics.jsonl`` (what ``mlerl train`` shows and
    ``mlerl tasks compare`` reads)."""
    console: bool = True
    """Print progress to the terminal."""
    wandb_samples_per_update: int = 16
    """W&B only: after each learner update, a ``samples`` table of (at most) this many of the
    samples received since the previous one, the newest, with long texts cut (plan 1000,
    program 4000, output 400 characters), so the run's table grows by a bounded amount per
    update; every sample stays whole in ``samples.jsonl``. 0: no samples table."""

    def __post_init__(self) -> None:
        from mlerl.protocol._config import check

        check(
            self.wandb_mode in ("offline", "online", "disabled"),
            "wandb_mode",
            "must be 'offline', 'online' or 'disabled'",
        )
        check(self.wandb_samples_per_update >= 0, "wandb_samples_per_update", "must be >= 0")


WANDB_RUN_ID_FILE = "mlerl-run-id"
"""Under ``<run dir>/wandb/``: the W&B run id, so a resumed run keeps logging into it."""


def make_sink(
    config: MetricsConfig,
    run_dir: str | Path,
    *,
    name: str,
    run_config: Mapping[str, Any] | None = None,
    resume_step: int | None = None,
) -> MediaSink:
    """The sinks ``config`` asks for, as one :class:`MultiSink` (JSONL first, then W&B).

    The W&B run id is kept in ``<run dir>/wandb/mlerl-run-id``; a later ``make_sink`` on the same
    run dir (``mlerl train resume=...``) continues that W&B run.

    ``resume_step``: the learner step a resumed process restarts from. Updates after it are
    done again, so their earlier rows are cut from ``metrics.jsonl`` (:func:`rewind_jsonl`) and
    each step keeps one record. W&B cannot delete what a run logged, so a rewound run logs into
    a new W&B run that first replays the kept rows; the superseded run's id is listed in
    ``<run dir>/wandb/mlerl-superseded-runs``."""
    sinks: list[MetricsSink] = []
    jsonl = Path(run_dir) / "metrics.jsonl"
    rewound = resume_step is not None and jsonl.is_file() and rewind_jsonl(jsonl, resume_step) > 0
    if config.jsonl:
        sinks.append(JsonlSink(jsonl))
    if config.wandb_mode != "disabled":
        id_file = Path(run_dir) / "wandb" / WANDB_RUN_ID_FILE
        run_id = id_file.read_text().strip() if id_file.is_file() else None
        if rewound and run_id is not None:
            with open(id_file.with_name(WANDB_SUPERSEDED_FILE), "a") as f:
                f.write(run_id + "\n")
            run_id = None
        sink = WandbSink(
            run_dir,
            project=config.wandb_project,
            mode=config.wandb_mode,
            name=name,
            entity=config.wandb_entity or None,
            config=run_config,
            run_id=run_id,
        )
        if run_id is None:
            id_file.write_text(sink.run_id)
            if rewound:
                for row in read_jsonl(jsonl):
                    sink.log(
                        {k: v for k, v in row.items() if k not in ("time", "stream", "step")},
                        int(row["step"]),
                        stream=str(row["stream"]),
                    )
        sinks.append(sink)
    return MultiSink(sinks)


WANDB_SUPERSEDED_FILE = "mlerl-superseded-runs"
"""Under ``<run dir>/wandb/``: ids of W&B runs replaced after a resume redid their last steps."""


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """The complete rows of a metrics.jsonl (a torn last line is skipped), with ``"nan"``,
    ``"inf"`` and ``"-inf"`` read back as floats."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict) and "stream" in row and "step" in row:
                rows.append(
                    {k: float(v) if v in ("nan", "inf", "-inf") else v for k, v in row.items()}
                )
    return rows


def rewind_jsonl(path: str | Path, step: int, stream: str = "learner") -> int:
    """Cut ``path`` just before its first ``stream`` row with a step above ``step``; returns how
    many rows were cut. The learner writes its steps in increasing order and a rewound file stays
    so, so what is cut is exactly the suffix of updates a resume will do again. A torn last
    line is cut too."""
    data = Path(path).read_bytes()
    offset = 0
    for line in data.splitlines(keepends=True):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            break  # torn: only the last line can be
        if (
            isinstance(row, dict)
            and row.get("stream") == stream
            and int(row.get("step", -1)) > step
        ):
            break
        offset += len(line)
    if offset == len(data):
        return 0
    cut = sum(1 for line in data[offset:].splitlines() if line.strip())
    os.truncate(path, offset)
    return cut
