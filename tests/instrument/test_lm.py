"""The LM path with a canned-answer engine: acceptance, every fallback reason, cache, batching."""

from __future__ import annotations

import asyncio

import pytest

from mlerl.instrument import LMInstrumentConfig, LMInstrumenter, instrument_ast
from mlerl.instrument._lm import REASONS
from mlerl.instrument._markers import marker_of

from .conftest import FakeEngine

CODE = (
    "import pandas as pd\n"
    "from sklearn.linear_model import LinearRegression\n"
    "df = pd.read_csv('input/train.csv')\n"
    "model = LinearRegression()\n"
    "model.fit(df, df['y'])\n"
)
GOOD = (
    CODE.replace("train.csv')\n", 'train.csv\')\nprint("loaded data")\n')
    + 'print("trained model")\n'
)


def _answer(body: str, finish: str = "stop"):
    return lambda prompt: (f"Here it is:\n```python\n{body}```\n", finish)


def _one(engine, code=CODE, **cfg):
    inst = LMInstrumenter(engine, config=LMInstrumentConfig(**cfg))
    return asyncio.run(inst.instrument(code)), inst


def test_a_verified_answer_is_used() -> None:
    result, inst = _one(FakeEngine(_answer(GOOD)))
    assert (result.path, result.reason, result.code, result.n_markers) == ("lm", "", GOOD, 2)
    assert inst.stats.as_dict()["lm"] == 1


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (_answer(GOOD.replace("df", "data")), "modified_program"),  # renamed variable
        (
            _answer(GOOD.replace("model = LinearRegression()\n", "")),
            "modified_program",
        ),  # dropped line
        (_answer(GOOD + "import os\n"), "modified_program"),  # added code
        (_answer(GOOD + "def (:\n"), "syntax_error"),
        (_answer(GOOD, finish="length"), "truncated"),
        (lambda p: ("I cannot do that.", "stop"), "no_code_block"),
        (_answer(CODE), "no_markers"),
    ],
)
def test_bad_answers_fall_back_to_the_ast_instrumenter(answer, reason) -> None:
    result, inst = _one(FakeEngine(answer))
    assert result.path == "ast" and result.reason == reason
    assert result.code == instrument_ast(CODE)
    stats = inst.stats.as_dict()
    assert stats["ast"] == 1 and stats[f"fallback/{reason}"] == 1
    assert sum(stats[f"fallback/{r}"] for r in REASONS) == 1


def test_engine_error_and_timeout_fall_back_and_are_not_cached() -> None:
    engine = FakeEngine(_answer(GOOD), fail=RuntimeError("boom"))
    inst = LMInstrumenter(engine)
    r1 = asyncio.run(inst.instrument(CODE))
    assert (r1.path, r1.reason) == ("ast", "engine_error") and "boom" in r1.detail
    engine.fail = None
    assert asyncio.run(inst.instrument(CODE)).path == "lm"  # retried, not served from cache
    slow, _ = _one(FakeEngine(_answer(GOOD), delay_s=5.0), timeout_s=0.05)
    assert (slow.path, slow.reason) == ("ast", "engine_timeout")


def test_unparsable_input_never_reaches_the_engine() -> None:
    engine = FakeEngine(_answer(GOOD))
    result, inst = _one(engine, code="def (:\n")
    assert (result.path, result.reason, result.code) == ("none", "unparsable_input", "def (:\n")
    assert engine.calls == []


def test_batching_dedup_and_cache() -> None:
    prompts: list[str] = []

    def answer(prompt: str):
        prompts.append(prompt)
        code = prompt.split("python script: ", 1)[1]
        return f'```\n{code}print("imported packages")\n```', "stop"

    engine = FakeEngine(answer)
    inst = LMInstrumenter(engine, config=LMInstrumentConfig(batch_size=2))
    codes = [f"import os\nx = {i}\n" for i in range(3)] + ["import os\nx = 0\n"]
    out = asyncio.run(inst.instrument_batch(codes))
    assert engine.calls == [2, 1]  # 3 distinct programs, batches of at most 2
    expected = [f'import os\nx = {i}\nprint("imported packages")\n' for i in (0, 1, 2, 0)]
    assert [r.code for r in out] == expected
    again = asyncio.run(inst.instrument_batch(["import os\nx = 1\n"]))
    assert engine.calls == [2, 1] and again[0].cached and again[0].path == "lm"
    assert inst.stats.as_dict()["cache_hits"] == 1 and inst.stats.total == 5
    assert prompts[0].startswith("Please insert print statements in the given python script.")


def test_the_lms_copy_of_the_programs_own_markers_is_neutralised() -> None:
    code = 'import os\nx = 1\nprint("trained model")\n'
    answer = _answer('import os\nprint("imported packages")\nx = 1\nprint("trained model")\n')
    result, _ = _one(FakeEngine(answer), code=code)
    import ast

    body = ast.parse(result.code).body
    assert result.path == "lm"
    assert [marker_of(s) for s in body] == [None, "imported packages", None, None]


def test_cancellation_propagates() -> None:
    async def main() -> None:
        inst = LMInstrumenter(FakeEngine(_answer(GOOD), delay_s=10.0))
        task = asyncio.ensure_future(inst.instrument(CODE))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def test_drop_unjustified_keeps_only_what_judge_accepts():
    """A rule-based program's answer loses the model stages it never ran through a library;
    what is left is accepted as is."""
    from mlerl.instrument import drop_unjustified, judge
    from mlerl.protocol import Completion

    code = (
        "import pandas as pd\n"
        "df = pd.read_csv('input/train.csv')\n"
        "def predict(x):\n"
        "    return x\n"
        "out = [predict(v) for v in df['a']]\n"
    )
    claimed = (
        "import pandas as pd\n"
        'print("imported packages")\n'
        "df = pd.read_csv('input/train.csv')\n"
        'print("loaded data")\n'
        "def predict(x):\n"
        "    return x\n"
        'print("defined model")\n'
        "out = [predict(v) for v in df['a']]\n"
        'print("predicted test labels")\n'
    )

    def verdict(text):
        return judge(
            code,
            Completion(
                prompt_ids=[],
                token_ids=[],
                logprobs=[],
                text=f"```python\n{text}```",
                finish_reason="stop",
            ),
        )

    assert verdict(claimed).reason == "misplaced_marker"
    kept = drop_unjustified(code, claimed)
    assert kept == claimed.replace('print("defined model")\n', "").replace(
        'print("predicted test labels")\n', ""
    )
    done = verdict(kept)
    assert done.path == "lm" and done.n_markers == 2
