"""Terminal progress for `mlerl train`: one line per learner update, read from metrics.jsonl.

The learner is the only writer of ``RUN_DIR/metrics.jsonl`` (one JSON object per line, see
``mlerl.protocol.JsonlSink``); this reader follows it by byte offset, tolerating a partly
written last line, so progress never blocks or slows training. A restarted learner cuts the
rows of the updates it does again (``mlerl.protocol.make_sink(resume_step=...)``); the reader
then goes on from the new end.

The "best score" column is the batch's best public score in each task's own direction (its
minimum when lower is better), one value per task in ``directions`` order, read from the
learner's ``split/task/<id>/score_min|score_max``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

_COLUMNS = (
    ("step", "step", "{:>4.0f}"),
    ("reward", "batch/reward_mean", "{:>8.3f}"),
    ("valid", "batch/valid_frac", "{:>5.2f}"),
    ("best score", "", "{:>10.4f}"),
    ("exec s", "batch/duration_mean", "{:>7.2f}"),
    ("loss", "loss/policy", "{:>8.4f}"),
    ("stale v", "staleness/versions_mean", "{:>7.2f}"),
)


class Progress:
    def __init__(
        self, run_dir: Path, enabled: bool = True, directions: dict[str, bool] | None = None
    ) -> None:
        self._path = run_dir / "metrics.jsonl"
        self.directions: dict[str, bool] = dict(directions or {})
        """Task id -> lower is better, for the best column (set once the tasks are loaded)."""
        self._offset = 0
        self._enabled = enabled
        self._t0 = time.monotonic()
        self._header_done = False
        try:
            from rich.console import Console

            # soft_wrap off a terminal: a log file or CI gets each line whole, never cut at
            # rich's default 80 columns (a terminal wraps long lines itself)
            console = Console(highlight=False)
            console.soft_wrap = not console.is_terminal
            self._console: Any = console
        except ImportError:  # rich is optional for the meta-package's console output
            self._console = None

    def say(self, message: str) -> None:
        if not self._enabled:
            return
        line = f"[{time.monotonic() - self._t0:7.1f}s] {message}"
        if self._console is not None:
            self._console.print(line, markup=False)
        else:
            print(line, flush=True)

    def tick(self) -> None:
        """Print learner updates that appeared since the last call."""
        if not self._enabled or not self._path.exists():
            return
        with open(self._path, "rb") as f:
            size = f.seek(0, 2)
            if size < self._offset:  # a resumed learner cut the updates it does again
                self._offset = size
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n")
        if end < 0:
            return
        self._offset += end + 1
        for raw in data[: end + 1].splitlines():
            try:
                record = json.loads(raw)
            except json.JSONDecodeError:
                continue
            if record.get("stream", "learner") == "learner" and "step" in record:
                self._row(record)

    def _row(self, record: dict[str, Any]) -> None:
        if not self._header_done:
            self.say("  ".join(name for name, _, _ in _COLUMNS))
            self._header_done = True
        cells = []
        for name, key, fmt in _COLUMNS:
            width = max(len(name), len(fmt.format(0.0)))
            if not key:
                cells.append(best_cell(record, self.directions).rjust(width))
                continue
            value = record.get(key)
            cells.append(
                fmt.format(value).rjust(width)
                if isinstance(value, int | float)
                else "-".rjust(width)
            )
        self.say("  ".join(cells))


def best_cell(record: dict[str, Any], directions: dict[str, bool]) -> str:
    """Each task's best public score of the batch, in the task's direction, space-separated
    ("-" for a task with no valid sample in the batch; "-" overall when directions are unknown)."""
    cells = []
    for task, lower in directions.items():
        value = record.get(f"split/task/{task}/score_{'min' if lower else 'max'}")
        cells.append(f"{value:.4f}" if isinstance(value, int | float) else "-")
    return " ".join(cells) if cells else "-"
