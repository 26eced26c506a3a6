"""Bounded pre-parse checks: a submission of absurd shape is invalid before pandas reads it.

``pd.read_csv`` on a hostile file (a million-column header, a 50 MB line, tens of millions of
rows) can hold a grader for its whole timeout. :func:`check_shape` streams the raw bytes once,
in chunks, and stops at the first limit crossed; its cost is a few milliseconds per MB of the
file and it never builds a DataFrame. Limits are far above any real submission of the tasks
(MLE-bench would accept such files; rejecting them is a deliberate choice, see docs/bench.md):

- every line at most :data:`MAX_LINE_BYTES` bytes (lines end at ``\\n``, ``\\r`` or ``\\r\\n``);
- at most ``2 * answer_rows + ROW_MARGIN`` non-empty lines (the header included), so extra
  rows, blank lines and quoted line breaks all fit while a file with millions of rows does not;
- a header record (parsed with the csv module, quoted line breaks included) of at most
  ``max(MIN_MAX_COLUMNS, COLUMN_FACTOR * answer_columns)`` fields.

Messages give sizes, counts and limits only, never a value from the answers.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np

from mlerl.bench._graders import InvalidSubmission

MAX_LINE_BYTES = 1 << 20
"""Longest accepted line (1 MiB): a real row of these tasks is at most a few KB."""
ROW_MARGIN = 1024
MIN_MAX_COLUMNS = 1024
COLUMN_FACTOR = 10
CHUNK_BYTES = 4 << 20

_LINE_BREAKS = re.compile(r"(?<=\r)(?!\n)|(?<=\n)")


def max_lines(answer_rows: int) -> int:
    return 2 * answer_rows + ROW_MARGIN


def max_columns(answer_columns: int) -> int:
    return max(MIN_MAX_COLUMNS, COLUMN_FACTOR * answer_columns)


def _scan_lines(path: Path, line_limit: int, lines_limit: int, answer_rows: int) -> None:
    """One pass over the bytes: no line longer than ``line_limit``, at most ``lines_limit``
    non-empty lines; stops at the first violation."""
    run = 0  # bytes of the line in progress (not yet ended by a line break)
    lines = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK_BYTES):
            buf = np.frombuffer(chunk, dtype=np.uint8)
            breaks = np.flatnonzero((buf == 10) | (buf == 13))
            if breaks.size == 0:
                run += len(chunk)
                longest = run
            else:
                first = run + int(breaks[0])  # the line in progress ends at the first break
                inner = np.diff(breaks) - 1  # lines between consecutive breaks (0: \r\n or blank)
                longest = max(first, int(inner.max()) if inner.size else 0)
                lines += int(first > 0) + int(np.count_nonzero(inner))
                run = len(chunk) - int(breaks[-1]) - 1
                longest = max(longest, run)
            if longest > line_limit:
                raise InvalidSubmission(f"submission has a line longer than {line_limit} bytes")
            if lines + int(run > 0) > lines_limit:
                raise InvalidSubmission(
                    f"submission has more than {lines_limit} non-empty lines "
                    f"(the test set has {answer_rows} rows)"
                )


class _Lines:
    """An iterator over lines that records whether a reader asked for more than there were."""

    def __init__(self, lines: list[str]) -> None:
        self._it = iter(lines)
        self.exhausted = False

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        try:
            return next(self._it)
        except StopIteration:
            self.exhausted = True
            raise


def _header_fields(path: Path, byte_limit: int) -> int:
    """Number of fields in the header record (the first non-blank CSV record, quoted line
    breaks included) when it lies within the first ``byte_limit`` bytes; else invalid."""
    with open(path, "rb") as fh:
        head = fh.read(byte_limit + 1)
    whole = len(head) <= byte_limit
    text = head[:byte_limit].decode("utf-8", errors="replace").removeprefix("\ufeff")
    lines = [ln for ln in _LINE_BREAKS.split(text) if ln.strip("\r\n")]  # pandas skips blank lines
    if not whole and lines and not lines[-1].endswith(("\n", "\r")):
        lines.pop()  # cut by the byte limit
    source = _Lines(lines)
    try:
        record = next(csv.reader(source), [])
    except csv.Error:  # e.g. a header field over the csv module's 128 KiB field limit
        raise InvalidSubmission(
            f"submission header is not a CSV record within {byte_limit} bytes"
        ) from None
    if source.exhausted and not whole:
        raise InvalidSubmission(f"submission header is longer than {byte_limit} bytes")
    return len(record)


def check_shape(path: Path, answer_rows: int, answer_columns: int) -> None:
    """Raise :class:`InvalidSubmission` when ``path`` has an absurd shape for answers of
    ``answer_rows`` x ``answer_columns``; bounded time (one streaming pass, early exit)."""
    _scan_lines(path, MAX_LINE_BYTES, max_lines(answer_rows), answer_rows)
    fields = _header_fields(path, MAX_LINE_BYTES)
    limit = max_columns(answer_columns)
    if fields > limit:
        raise InvalidSubmission(
            f"submission header has {fields} columns; at most {limit} are accepted"
        )
