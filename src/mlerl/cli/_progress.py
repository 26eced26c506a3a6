"""Terminal progress for `mlerl train`: one line per learner update, read from metrics.jsonl.

The learner is the only writer of ``RUN_DIR/metrics.jsonl`` (one JSON object per line, see
``mlerl.protocol.JsonlSink``); this reader follows it by byte offset, tolerating a partly
written last line, so progress never blocks or slows training. A restarted learner cuts the
rows of the updates it does again (``mlerl.protocol.make_sink(resume_step=...)``); the reader
then goes on from the new end.
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
    ("best score", "batch/score_max", "{:>10.4f}"),
    ("exec s", "batch/duration_mean", "{:>7.2f}"),
    ("loss", "loss/policy", "{:>8.4f}"),
    ("stale v", "staleness/versions_mean", "{:>7.2f}"),
)


class Progress:
    def __init__(self, run_dir: Path, enabled: bool = True) -> None:
        self._path = run_dir / "metrics.jsonl"
        self._offset = 0
        self._enabled = enabled
        self._t0 = time.monotonic()
        self._header_done = False
        try:
            from rich.console import Console

            self._console: Any = Console(highlight=False)
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
            value = record.get(key)
            width = max(len(name), len(fmt.format(0.0)))
            cells.append(fmt.format(value).rjust(width) if isinstance(value, int | float) else "-".rjust(width))
        self.say("  ".join(cells))
