import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlerl.actors._parse import ParsedResponse, parse_response
from mlerl.protocol import ParseStatus

GOOD = "I will fit a linear model.\n\n```python\nimport pandas as pd\nprint('hi')\n```\n"


def test_ok_plan_and_code():
    r = parse_response(GOOD)
    assert r.status is ParseStatus.OK
    assert r.plan == "I will fit a linear model."
    assert r.code == "import pandas as pd\nprint('hi')\n"


@pytest.mark.parametrize("tag", ["python", "py", "Python3", "", "python  "])
def test_accepted_fence_tags(tag):
    r = parse_response(f"plan\n```{tag}\nx = 1\n```")
    assert r.status is ParseStatus.OK and r.code == "x = 1\n"


@pytest.mark.parametrize("text", ["", "   \n\t  "])
def test_empty(text):
    assert parse_response(text).status is ParseStatus.EMPTY


def test_no_code():
    assert parse_response("Just a plan, no code.").status is ParseStatus.NO_CODE
    # a block in another language is not a program
    assert parse_response("plan\n```bash\nls\n```").status is ParseStatus.NO_CODE
    # a python block with nothing in it
    assert parse_response("plan\n```python\n\n```").status is ParseStatus.NO_CODE


def test_multiple_blocks_is_an_error_not_a_choice():
    text = "plan\n```python\nx = 1\n```\nand\n```python\ny = 2\nz = 3\n```"
    r = parse_response(text)
    assert r.status is ParseStatus.MULTIPLE_BLOCKS and r.code == "" and "2 python" in r.detail
    # a bash block beside one python block is fine
    r = parse_response("plan\n```bash\npip list\n```\n```python\nx = 1\n```")
    assert r.status is ParseStatus.OK and r.code == "x = 1\n"


def test_truncated_by_length_even_if_block_closed():
    assert parse_response(GOOD, finish_reason="length").status is ParseStatus.TRUNCATED


def test_truncated_by_unclosed_fence():
    r = parse_response("plan\n```python\nimport os\nfor i in range(")
    assert r.status is ParseStatus.TRUNCATED and "never closed" in r.detail
    assert r.plan == "plan"


def test_syntax_error_keeps_code_and_line():
    r = parse_response("plan\n```python\nx = 1\ndef f(:\n    pass\n```")
    assert r.status is ParseStatus.SYNTAX_ERROR
    assert r.code.startswith("x = 1") and "line 2" in r.detail


def test_null_byte_and_deep_nesting_are_syntax_errors():
    assert parse_response("p\n```python\nx = '\x00'\n```").status is ParseStatus.SYNTAX_ERROR
    deep = "x = " + "(" * 5000 + "1" + ")" * 5000
    assert parse_response(f"p\n```python\n{deep}\n```").status is ParseStatus.SYNTAX_ERROR


def test_fence_rules():
    # inline triple backticks inside the plan do not open a block
    r = parse_response("Use the ``` marker? no.\n```python\nx = 1\n```")
    assert r.status is ParseStatus.OK
    # four-space indented fence is code, not a fence (CommonMark)
    assert parse_response("p\n    ```python\n    x = 1\n    ```").status is ParseStatus.NO_CODE
    # a longer closing fence closes
    assert parse_response("p\n```python\nx = 1\n`````").status is ParseStatus.OK
    # CRLF line endings
    assert parse_response("p\r\n```python\r\nx = 1\r\n```\r\n").status is ParseStatus.OK


def test_plan_without_fence_is_whole_text():
    assert parse_response("  only words  ").plan == "only words"


@given(st.text(max_size=300), st.sampled_from(["stop", "length"]))
def test_total_on_any_input(text, reason):
    r = parse_response(text, reason)
    assert isinstance(r, ParsedResponse) and isinstance(r.status, ParseStatus)
    assert (r.code != "") == (r.status in (ParseStatus.OK, ParseStatus.SYNTAX_ERROR))
