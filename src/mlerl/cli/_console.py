"""The closing report as the console shows it: every line at most 100 columns.

``report.md`` keeps the full pipe tables (one row per task, up to seven columns of
``private (public, gap)`` cells: 250 characters a line), which a terminal or a CI log wraps into
unreadable text. :func:`console_summary` renders the same markdown for a console of ``width``
columns, whatever sections it holds:

- a table whose aligned columns fit stays a table (columns padded, no pipes);
- a wider table is printed row by row: its first cell as the row's title, then one
  ``column  value`` line per other cell, the column names aligned;
- headings and paragraphs are wrapped at ``width``; a word longer than ``width`` is broken.
"""

from __future__ import annotations

import textwrap

WIDTH = 100
SAY_PREFIX = len("[999999.9s] ")
"""What :meth:`mlerl.cli._progress.Progress.say` puts before each line (runs up to 11 days)."""


def console_summary(
    markdown: str, width: int = WIDTH - SAY_PREFIX, full_report: str | None = None
) -> str:
    """``markdown`` (a report.md) for a console: every line at most ``width`` columns (by default
    what fits beside ``Progress.say``'s time in 100); with ``full_report``, a last line saying
    where the full tables are."""
    out: list[str] = []
    table: list[list[str]] = []
    for line in [*markdown.splitlines(), ""]:
        if line.startswith("|"):
            table.append([cell.strip() for cell in line.strip().strip("|").split("|")])
            continue
        if table:
            out += _table(table, width)
            table = []
        out += _wrap(line, width) if line.strip() else [""]
    while out and not out[-1]:
        out.pop()
    if full_report:
        out += ["", *_wrap(f"full tables: {full_report}", width)]
    return "\n".join(out) + "\n"


def _wrap(text: str, width: int) -> list[str]:
    indent = text[: len(text) - len(text.lstrip())]
    return textwrap.wrap(
        text.strip(),
        width=width,
        initial_indent=indent,
        subsequent_indent=indent,
        break_long_words=True,
        break_on_hyphens=False,
    )


def _is_rule(row: list[str]) -> bool:
    return all(set(cell) <= set("-: ") for cell in row)


def _table(rows: list[list[str]], width: int) -> list[str]:
    header, body = rows[0], [r for r in rows[1:] if not _is_rule(r)]
    columns = len(header)
    body = [(r + [""] * columns)[:columns] for r in body]
    sizes = [max(len(r[i]) for r in [header, *body]) for i in range(columns)]
    if sum(sizes) + 2 * (columns - 1) <= width:
        return [
            "  ".join(cell.ljust(size) for cell, size in zip(r, sizes, strict=True)).rstrip()
            for r in [header, *body]
        ]
    label = min(max((len(h) for h in header[1:]), default=0), width // 2)
    out: list[str] = []
    for row in body:
        out += _wrap(f"{header[0]}: {row[0]}" if header[0] else row[0], width)
        for name, cell in zip(header[1:], row[1:], strict=True):
            first = f"  {name.ljust(label)}  "
            lines = textwrap.wrap(
                cell or "-",
                width=max(width - len(first), 20),
                break_long_words=True,
                break_on_hyphens=False,
            )
            if len(first) > width - 20:  # a column name too long to sit beside its value
                out += _wrap(f"  {name}", width)
                out += ["    " + piece for piece in textwrap.wrap(cell or "-", width=width - 4)]
                continue
            out.append((first + lines[0]).rstrip())
            out += [" " * len(first) + piece for piece in lines[1:]]
    return out
