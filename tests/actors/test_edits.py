"""Search/replace edits (the ``edit`` improve format): parsing, applying, writing, and the
parser's verdict on an IMPROVE answer that carries them."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlerl.actors import edit_answer
from mlerl.actors._edits import EditError, apply_edits, format_edits, make_edits, parse_edits
from mlerl.actors._parse import parse_response
from mlerl.protocol import ParseStatus

PARENT = """import pandas as pd
from sklearn.linear_model import Ridge
train = pd.read_csv("./input/train.csv")
model = Ridge(alpha=1.0)
model.fit(train[["a"]], train["y"])
"""


def _block(*edits: tuple[str, str]) -> str:
    return "\n".join(f"<<<<<<< SEARCH\n{s}\n=======\n{r}\n>>>>>>> REPLACE" for s, r in edits)


def test_one_edit_replaces_the_lines_it_names():
    edits = parse_edits(_block(("model = Ridge(alpha=1.0)", "model = Ridge(alpha=10.0)")))
    assert edits == [(["model = Ridge(alpha=1.0)"], ["model = Ridge(alpha=10.0)"])]
    assert apply_edits(PARENT, edits) == PARENT.replace("alpha=1.0", "alpha=10.0")


def test_two_edits_apply_in_order_and_an_empty_replace_deletes():
    block = _block(
        ("from sklearn.linear_model import Ridge", "from sklearn.linear_model import Lasso"),
        ("model = Ridge(alpha=1.0)", "model = Lasso(alpha=0.1)"),
    )
    assert apply_edits(PARENT, parse_edits(block)) == PARENT.replace(
        "import Ridge", "import Lasso"
    ).replace("Ridge(alpha=1.0)", "Lasso(alpha=0.1)")
    deleted = apply_edits(
        PARENT,
        parse_edits(
            '<<<<<<< SEARCH\nmodel.fit(train[["a"]], train["y"])\n=======\n>>>>>>> REPLACE'
        ),
    )
    assert deleted == PARENT.replace('model.fit(train[["a"]], train["y"])\n', "")


def test_trailing_whitespace_does_not_matter_but_indentation_does():
    code = "for c in cols:\n    model = Ridge()\n"
    assert (
        apply_edits(code, [(["    model = Ridge()   "], ["    model = Lasso()"])])
        == "for c in cols:\n    model = Lasso()\n"
    )
    with pytest.raises(EditError, match="not found"):
        apply_edits(code, [(["model = Ridge()"], ["model = Lasso()"])])


@pytest.mark.parametrize(
    "search, reason",
    [
        ("model.fit(X, y)", "edit 1: the search text is not found"),
        ("", "edit 1: the search text is empty"),
    ],
)
def test_a_search_that_is_not_in_the_parent_is_refused(search, reason):
    with pytest.raises(EditError, match=reason):
        apply_edits(PARENT, [([search] if search else [], ["x = 1"])])


def test_an_ambiguous_search_is_refused_rather_than_guessed():
    code = "x = 1\ny = 2\nx = 1\n"
    with pytest.raises(EditError, match="found 2 times"):
        apply_edits(code, [(["x = 1"], ["x = 3"])])
    assert apply_edits(code, [(["y = 2", "x = 1"], ["y = 2", "x = 3"])]) == "x = 1\ny = 2\nx = 3\n"


@pytest.mark.parametrize(
    "body, reason",
    [
        ("model = Ridge()", "line 1: text outside an edit"),
        ("<<<<<<< SEARCH\nx\n=======\ny", "never closed"),
        ("<<<<<<< SEARCH\nx\n>>>>>>> REPLACE", "line 3: '>>>>>>> REPLACE' before '======='"),
        ("<<<<<<< SEARCH\nx\n=======\ny\n=======\n>>>>>>> REPLACE", "line 5: '=======' before"),
        ("\n\n", "no edit"),
    ],
)
def test_malformed_edits_say_what_is_wrong(body, reason):
    with pytest.raises(EditError, match=reason):
        parse_edits(body)


def test_make_edits_widens_a_repeated_line_and_an_insertion_with_context():
    parent = "a = 1\nb = 2\na = 1\nc = 3\n"
    edits = make_edits(parent, "a = 1\nb = 2\na = 5\nc = 3\n")
    # "a = 1" alone is ambiguous: one line more on each side
    assert edits == [(["b = 2", "a = 1", "c = 3"], ["b = 2", "a = 5", "c = 3"])]
    inserted = make_edits(parent, "a = 1\nb = 2\na = 1\nc = 3\nd = 4\n")
    assert inserted == [
        (["c = 3"], ["c = 3", "d = 4"])
    ]  # an empty search is widened (no line after it)
    assert make_edits(parent, parent) == []


lines = st.lists(
    st.sampled_from(["a = 1", "b = 2", "c = 3", "    d = 4", "print(a)", "e = 5"]),
    min_size=1,
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(lines, lines)
def test_make_edits_round_trips_any_two_programs(a, b):
    parent, revised = "\n".join(a) + "\n", "\n".join(b) + "\n"
    text = format_edits(make_edits(parent, revised))
    if parent != revised:
        assert apply_edits(parent, parse_edits(text)) == revised


def test_an_improve_answer_with_edits_parses_to_the_whole_revised_program():
    answer = (
        "I will regularise more.\n\n```python\n"
        + edit_answer(PARENT, PARENT.replace("1.0", "10.0"))
        + "\n```"
    )
    parsed = parse_response(answer, "stop", parent=PARENT)
    assert (parsed.status, parsed.plan, parsed.code) == (
        ParseStatus.OK,
        "I will regularise more.",
        PARENT.replace("1.0", "10.0"),
    )
    # the same answer where no parent is given (a scratch prompt, or the paper's rewrite format)
    assert parse_response(answer, "stop").status is ParseStatus.SYNTAX_ERROR


def test_an_improve_answer_whose_edit_does_not_apply_is_an_edit_mismatch_and_runs_nothing():
    answer = "Plan.\n\n```python\n" + _block(("model.fit(X, y)", "model.fit(X, y, w)")) + "\n```"
    parsed = parse_response(answer, "stop", parent=PARENT)
    assert parsed.status is ParseStatus.EDIT_MISMATCH and parsed.code == ""
    assert "not found in the previous solution" in parsed.detail


def test_edits_that_produce_invalid_python_are_a_syntax_error():
    answer = (
        "Plan.\n\n```python\n"
        + _block(("model = Ridge(alpha=1.0)", "model = Ridge(alpha="))
        + "\n```"
    )
    parsed = parse_response(answer, "stop", parent=PARENT)
    assert parsed.status is ParseStatus.SYNTAX_ERROR and "Ridge(alpha=\n" in parsed.code


def test_a_whole_program_is_still_accepted_as_a_revision():
    answer = "A new program.\n\n```python\nprint('hi')\n```"
    parsed = parse_response(answer, "stop", parent=PARENT)
    assert (parsed.status, parsed.code) == (ParseStatus.OK, "print('hi')\n")


def test_truncation_and_block_count_are_checked_before_the_edits():
    edit = "```python\n" + _block(("model = Ridge(alpha=1.0)", "model = Ridge()")) + "\n```"
    assert parse_response("Plan.\n" + edit, "length", parent=PARENT).status is ParseStatus.TRUNCATED
    assert (
        parse_response("Plan.\n" + edit + "\n" + edit, "stop", parent=PARENT).status
        is ParseStatus.MULTIPLE_BLOCKS
    )


LOOP = """import pandas as pd
from sklearn.neural_network import MLPRegressor
train = pd.read_csv("./input/train.csv")
for col in cols:
    model = make_pipeline(StandardScaler(), MLPRegressor(hidden_layer_sizes=(32,)))
    model.fit(X, train[col])
"""


def test_a_misquoted_assignment_still_names_the_one_line_that_assigns_it():
    edits = [
        (
            ["    model = HistGradientBoostingRegressor(max_iter=300)"],
            ["    model = Ridge(alpha=1.0)"],
        )
    ]
    assert apply_edits(LOOP, edits) == LOOP.replace(
        "    model = make_pipeline(StandardScaler(), MLPRegressor(hidden_layer_sizes=(32,)))",
        "    model = Ridge(alpha=1.0)",
    )
    with pytest.raises(
        EditError, match="not found"
    ):  # the same name at another indentation is another line
        apply_edits(LOOP, [(["model = Foo()"], ["model = Ridge()"])])
    with pytest.raises(EditError, match="not found"):  # exact matching only
        apply_edits(LOOP, edits, anchored=False)
    twice = "x = 1\nprint(x)\nx = 2\n"
    with pytest.raises(EditError, match="not found"):  # a name assigned twice is ambiguous
        apply_edits(twice, [(["x = 3"], ["x = 4"])])
    with pytest.raises(EditError, match="not found"):  # several misquoted lines name no place
        apply_edits(LOOP, [(["    model = A()", "    model.fit(X, y)"], ["    model.fit(X)"])])


def test_a_misquoted_search_lands_on_the_setting_its_replacement_assigns():
    """Seen in RL (docs/experiments/edit-applier.md): the small policy quotes a parent's settings line wrongly in about
    half of its edits (``PARAMS = {"n_estimators": 100}`` for a parent whose PARAMS differ) while
    its replacement is a well-formed setting (``PRODUCTS = ["a*b"]``). The replacement names the
    place: the program's one ``PRODUCTS = ...`` line. (The single-assignment anchor used to put
    it on the PARAMS line, and the program died with a NameError on PARAMS.)"""
    block = 'ONE_HOT = ["spacegroup"]\nPRODUCTS = []\nPARAMS = {"alpha": 1.0}\nprint(PARAMS)\n'
    other = [(['PARAMS = {"n_estimators": 100}'], ['PRODUCTS = ["a*b"]'])]
    assert apply_edits(block, other) == block.replace("PRODUCTS = []", 'PRODUCTS = ["a*b"]')
    two = [(["MODEL = 'knn'"], ["# both", "ONE_HOT = []", 'PARAMS = {"alpha": 9.0}'])]
    assert apply_edits(block, two) == (
        '# both\nONE_HOT = []\nPRODUCTS = []\nPARAMS = {"alpha": 9.0}\nprint(PARAMS)\n'
    )
    with pytest.raises(EditError, match="edit 1: the search text is not found"):
        apply_edits(block, [(['ONE_HOT = ["sg"]'], [])])  # a deletion names no place
    with pytest.raises(EditError, match="not found"):  # a name the program never assigns
        apply_edits(block, [(["MODEL = 'knn'"], ["MODEL = 'ridge'"])])
    with pytest.raises(EditError, match="not found"):  # not only assignments
        apply_edits(block, [(["MODEL = 'knn'"], ["PRODUCTS = []", "print(1)"])])
    with pytest.raises(EditError, match="not found"):  # the same name twice
        apply_edits(block, [(["MODEL = 'knn'"], ["PRODUCTS = []", "PRODUCTS = ['a*b']"])])
    with pytest.raises(EditError, match="not found"):  # a replacement that does not parse
        apply_edits(block, [(["MODEL = 'knn'"], ["PRODUCTS = ['a*b'"])])
    twice = "x = 1\nprint(x)\nx = 2\n"
    with pytest.raises(EditError, match="not found"):  # a name assigned twice is ambiguous
        apply_edits(twice, [(["y = 3"], ["x = 4"])])
    with pytest.raises(EditError, match="not found"):  # exact matching only
        apply_edits(block, other, anchored=False)


def test_an_edit_that_swaps_one_setting_for_another_sets_the_new_one_and_keeps_the_old():
    """Seen in RL (docs/experiments/edit-applier.md): the search quotes a real settings line (``PRODUCTS = []``, common
    in parents) and the replacement sets another (``ONE_HOT = []``). Read literally the edit
    deletes PRODUCTS and the program dies on it; it is read as setting ONE_HOT."""
    block = 'ONE_HOT = ["spacegroup"]\nPRODUCTS = []\nPARAMS = {"alpha": 1.0}\nprint(PARAMS)\n'
    swap = [(["PRODUCTS = []"], ["ONE_HOT = []"])]
    assert apply_edits(block, swap) == block.replace('ONE_HOT = ["spacegroup"]', "ONE_HOT = []")
    assert apply_edits(block, swap, anchored=False) == block.replace(  # literal: a deletion
        'ONE_HOT = ["spacegroup"]\nPRODUCTS = []\n', 'ONE_HOT = ["spacegroup"]\nONE_HOT = []\n'
    )
    same_name = [(["PRODUCTS = []"], ["PRODUCTS = ['a*b']"])]  # the ordinary edit, literal
    assert apply_edits(block, same_name) == block.replace("PRODUCTS = []", "PRODUCTS = ['a*b']")
    both = [(["PRODUCTS = []", 'PARAMS = {"alpha": 1.0}'], ['PARAMS = {"alpha": 2.0}'])]
    assert apply_edits(block, both) == block.replace(  # shares a name: literal, PRODUCTS goes
        'PRODUCTS = []\nPARAMS = {"alpha": 1.0}', 'PARAMS = {"alpha": 2.0}'
    )
    rename = "model = Ridge()\nmodel.fit(X, y)\n"  # a new name: literal
    assert apply_edits(rename, [(["model = Ridge()"], ["clf = Ridge()"])]) == (
        "clf = Ridge()\nmodel.fit(X, y)\n"
    )
    code_too = [(["PRODUCTS = []"], ["ONE_HOT = []", "print(1)"])]  # not only assignments
    assert apply_edits(block, code_too) == block.replace("PRODUCTS = []", "ONE_HOT = []\nprint(1)")


def test_a_misquoted_search_replaces_a_whole_multiline_assignment_at_its_indentation():
    prog = 'PARAMS = {\n    "alpha": 1.0,\n}\nfor c in cols:\n    model = Ridge(**PARAMS)\n'
    edits = [(["PARAMS = {'alpha': 5}"], ['PARAMS = {"alpha": 10.0}'])]
    assert apply_edits(prog, edits) == (
        'PARAMS = {"alpha": 10.0}\nfor c in cols:\n    model = Ridge(**PARAMS)\n'
    )
    inner = [(["    model = Lasso()", "x = 1"], ["    model = Ridge(alpha=3.0)", "    other = 1"])]
    with pytest.raises(EditError, match="not found"):  # `other` is assigned nowhere
        apply_edits(prog, inner)
    with pytest.raises(EditError, match="not found"):  # `model` at indentation 0: no such line
        apply_edits(prog, [(["model = Lasso()", "x = 1"], ["model = Ridge()"])])
    moved = apply_edits(prog, [(["model = Lasso()", "x = 1"], ["    model = Ridge()"])])
    assert moved == prog.replace("Ridge(**PARAMS)", "Ridge()")


def test_an_improve_answer_with_a_misquoted_setting_runs_the_revised_program():
    parent = 'MODEL = "ridge"\nPARAMS = {"alpha": 1.0}\nprint(MODEL, PARAMS)\n'
    answer = (
        "To improve the validation score I will change MODEL.\n\n```python\n"
        + _block(('MODEL = "grad_boost"', 'MODEL = "knn"'))
        + "\n```\n"
    )
    parsed = parse_response(answer, parent=parent)
    assert parsed.status is ParseStatus.OK
    assert parsed.code == parent.replace('"ridge"', '"knn"')
    same = answer.replace('MODEL = "knn"', 'MODEL = "ridge"')
    assert parse_response(same, parent=parent).status is ParseStatus.UNCHANGED


def test_a_misquoted_import_adds_the_new_import_after_the_last_one():
    edits = [
        (
            ["from sklearn.linear_model import SGDRegressor"],
            ["from sklearn.linear_model import Ridge"],
        )
    ]
    assert apply_edits(LOOP, edits) == LOOP.replace(
        "import MLPRegressor\n", "import MLPRegressor\nfrom sklearn.linear_model import Ridge\n"
    )
    already = [(["import numpy as np"], ["import pandas as pd"])]
    assert apply_edits(LOOP, already) == LOOP  # nothing to add
    with pytest.raises(EditError, match="not found"):  # an import replaced by code names no place
        apply_edits(LOOP, [(["import numpy as np"], ['print(pd.read_csv("x"))'])])


def test_a_revision_that_changes_nothing_is_not_run_again():
    # RL found that an edit replacing a line with itself earns the parent's reward
    same = (
        "Plan.\n\n```python\n"
        + _block(("model = Ridge(alpha=1.0)", "model = Ridge(alpha=1.0)"))
        + "\n```"
    )
    parsed = parse_response(same, "stop", parent=PARENT)
    assert (parsed.status, parsed.code) == (ParseStatus.UNCHANGED, "")
    assert "unchanged" in parsed.detail
    # a comment or spacing is no revision either; the whole program written out again neither
    comment = (
        "Plan.\n\n```python\n"
        + _block(("model = Ridge(alpha=1.0)", "model = Ridge( alpha=1.0 )  # tuned"))
        + "\n```"
    )
    assert parse_response(comment, "stop", parent=PARENT).status is ParseStatus.UNCHANGED
    assert (
        parse_response(f"Plan.\n```python\n{PARENT}```", "stop", parent=PARENT).status
        is ParseStatus.UNCHANGED
    )
    # a real change runs; without a parent (a scratch prompt) the same program is just a program
    changed = (
        "Plan.\n\n```python\n"
        + _block(("model = Ridge(alpha=1.0)", "model = Ridge(alpha=2.0)"))
        + "\n```"
    )
    assert parse_response(changed, "stop", parent=PARENT).status is ParseStatus.OK
    assert parse_response(f"Plan.\n```python\n{PARENT}```", "stop").status is ParseStatus.OK
