"""Verification: the original plus marker statements only; the original's own prints neutralised."""

from __future__ import annotations

import ast

import pytest

from mlerl.instrument._markers import marker_of
from mlerl.instrument._verify import Rejected, finalize

ORIG = """\
import pandas as pd
df = pd.read_csv("input/train.csv")
if len(df) > 3:
    model = make()
else:
    model = other()
model.fit(df, df)
"""


def _stmt(src: str) -> ast.stmt:
    return ast.parse(src).body[0]


@pytest.mark.parametrize(
    ("src", "marker"),
    [
        ('print("loaded data")', "loaded data"),
        ('print("training loss:", loss)', "training loss:"),
        ('print("testing loss:", loss.item())', "testing loss:"),
        ('print(f"testing loss: {acc:.3f}")', "testing loss:"),
        ('print("loaded data", sep=" ")', None),  # a keyword: ordinary code
        ('print("loaded data", df)', None),  # only loss markers carry values
        ('print("testing loss:", model.fit(X, y))', None),  # a value with a side effect
        ('print("Loaded data")', None),
        ("print(*markers)", None),
        ('log("loaded data")', None),
    ],
)
def test_marker_statement_form(src: str, marker: str | None) -> None:
    assert marker_of(_stmt(src)) == marker


def test_inserted_markers_are_accepted_and_kept() -> None:
    cand = ORIG.replace('train.csv")\n', 'train.csv")\nprint("loaded data")\n')
    cand = cand.replace("    model = make()\n", '    model = make()\n    print("defined model")\n')
    assert finalize(ORIG, cand) == cand


@pytest.mark.parametrize(
    "edit",
    [
        lambda s: s.replace("df = pd", "data = pd").replace("(df, df)", "(data, data)"),  # rename
        lambda s: s.replace("model.fit(df, df)\n", ""),  # dropped line
        lambda s: s + "import os\nos.system('true')\n",  # added code
        lambda s: s.replace("make()", "make(1)"),  # changed call
        lambda s: s + 'print("trained model", model)\n',  # value on a non-loss marker
        lambda s: s.replace("    model = other()\n", "    model = other()\nprint('x')\n"),
    ],
)
def test_modifications_are_rejected(edit) -> None:
    with pytest.raises(Rejected) as info:
        finalize(ORIG, edit(ORIG))
    assert info.value.reason == "modified_program"


def test_adding_an_else_clause_of_markers_is_rejected() -> None:
    orig = "for i in range(2):\n    pass\n"
    with pytest.raises(Rejected):
        finalize(orig, 'for i in range(2):\n    pass\nelse:\n    print("trained model")\n')


def test_unparsable_candidate_is_a_syntax_error() -> None:
    with pytest.raises(Rejected) as info:
        finalize(ORIG, "def (:\n")
    assert info.value.reason == "syntax_error"


def test_the_originals_own_marker_prints_are_neutralised() -> None:
    orig = 'print("loaded data")\nx = 1\nprint("trained model",)\n'
    cand = 'print("loaded data")\nx = 1\nprint("defined model")\nprint("trained model",)\n'
    out = finalize(orig, cand)
    assert out == (
        'print("loaded data", sep=" ")\nx = 1\nprint("defined model")\n'
        'print("trained model", sep=" ",)\n'
    )
    markers = [marker_of(s) for s in ast.parse(out).body]
    assert markers == [None, None, "defined model", None]
