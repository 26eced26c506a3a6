"""The LM instrumentation path through a real engine (transformers, a tiny Qwen2 on CPU).

A 5 M-parameter model (random here; the embedded policy in a real run) cannot yet instrument
programs faithfully, so its answers are refused by the verifier and every program falls back
to the AST instrumenter: what this test checks is the path itself (the paper's C.3 prompt is
sent to a real engine, the answer is judged, every refusal is recorded with its reason, the
fallback program is a verified instrumentation, and results are cached by code hash).
"""

from __future__ import annotations

import ast

import pytest

from mlerl.actors import HFEngine
from mlerl.actors._testing import build_tiny_model_dir
from mlerl.instrument import LMInstrumentConfig, LMInstrumenter, instrument_ast

PROGRAMS = [
    "import pandas as pd\nfrom sklearn.linear_model import LogisticRegression\n"
    "train = pd.read_csv('input/train.csv')\nmodel = LogisticRegression()\n"
    "model.fit(train[['a']], train['y'])\npred = model.predict(train[['a']])\n"
    "pd.DataFrame({'p': pred}).to_csv('submission.csv', index=False)\n",
    "import numpy as np\nx = np.loadtxt('input/x.txt')\nprint(x.mean())\n",
]


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    return HFEngine(str(build_tiny_model_dir(tmp_path_factory.mktemp("instr-model"))))


async def test_real_engine_answers_are_judged_and_fallbacks_recorded(engine):
    instrumenter = LMInstrumenter(
        engine, config=LMInstrumentConfig(max_new_tokens=64, batch_size=2)
    )
    results = await instrumenter.instrument_batch(PROGRAMS)
    stats = instrumenter.stats.as_dict()
    assert stats["total"] == len(PROGRAMS) == stats["lm"] + stats["ast"] + stats["none"]
    refused = sum(v for k, v in stats.items() if k.startswith("fallback/"))
    assert refused == stats["ast"] + stats["none"]
    for code, result in zip(PROGRAMS, results):
        ast.parse(result.code)
        if result.path == "ast":  # refused LM answer: the verified deterministic instrumentation
            assert result.reason and result.code == instrument_ast(code)
    # the same programs again: answered from the cache by code hash, no new generation
    again = await instrumenter.instrument_batch(PROGRAMS)
    assert [r.code for r in again] == [r.code for r in results]
    assert instrumenter.stats.as_dict()["cache_hits"] == len(PROGRAMS)
    await engine.close()
