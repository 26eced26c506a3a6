import pytest
import yaml

import dataclasses

from mlerl.actors import ActorsConfig
from mlerl.actors.__main__ import _optional_section
from mlerl.actors._admission import AdmissionConfig
from mlerl.actors._pipeline import Graded, RealPipeline
from mlerl.instrument import (
    InstrumentConfig,
    InstrumentMode,
    LMInstrumenter,
    MarkerMode,
    MarkerScanner,
)
from mlerl.protocol import Completion, ConfigError, ExecStatus

CODE = "import pandas as pd\ndf = pd.read_csv('x.csv')\n"


class FrozenLM:
    """Answers the C.3 prompt with the program plus two marker prints."""

    policy_version = 0

    def __init__(self):
        self.calls = 0

    async def generate(self, conversations, params):
        self.calls += 1
        text = (
            '```python\nimport pandas as pd\nprint("imported packages")\n'
            "df = pd.read_csv('x.csv')\nprint(\"loaded data\")\n```"
        )
        return [
            Completion(prompt_ids=[], token_ids=[], logprobs=[], text=text, finish_reason="stop")
            for _ in conversations
        ]

    async def update_weights(self, update):
        raise NotImplementedError

    async def close(self):
        pass


def _markers(prepared, printed_lines):
    # simulate the program's stdout: the secure channel's handshake (run-time key), then markers
    key = "a" * 32
    scanner = MarkerScanner(prepared.nonce)
    scanner.feed(f"\n{prepared.nonce}:key {key} {'b' * 32}\n".encode())
    for name in printed_lines:
        scanner.feed(f"\n{key}:{name}\n".encode())
    return scanner.close()


async def test_ast_mode_uses_a_nonce_channel():
    prepared = await RealPipeline().prepare(CODE)
    assert prepared.nonce and prepared.nonce in prepared.program
    compile(prepared.program, "main.py", "exec")


async def test_lm_mode_uses_the_frozen_lm():
    lm = FrozenLM()
    pipeline = RealPipeline(lm_instrumenter=LMInstrumenter(lm))
    prepared = await pipeline.prepare(CODE)
    assert lm.calls == 1 and prepared.nonce in prepared.program
    assert _markers(prepared, ["imported packages", "loaded data"]) == [
        "imported packages",
        "loaded data",
    ]
    # a plain print of a marker by the policy does not count in secure mode
    scanner = MarkerScanner(prepared.nonce)
    scanner.feed(b"loaded data\n")
    assert scanner.close() == []


async def test_paper_markers_are_plain_prints():
    prepared = await RealPipeline(instrument=InstrumentConfig(markers=MarkerMode.paper)).prepare(
        CODE
    )
    assert prepared.nonce is None and 'print("imported packages")' in prepared.program


async def test_uninstrumentable_code_runs_as_is():
    prepared = await RealPipeline().prepare("def f(:\n")
    assert prepared == type(prepared)("def f(:\n", None)


def test_reward_adapter_gives_none_for_infra_errors():
    from mlerl.bench import Registry  # here: the vLLM venv collects this module without pandas

    pipeline = RealPipeline()
    task = Registry.load().get("standin-cancer-auc-tiny")
    nothing = Graded(None, False)
    assert pipeline.reward([], ExecStatus.INFRA_ERROR, nothing, task)[0] is None
    value, parts = pipeline.reward(["loaded data"], ExecStatus.PROGRAM_ERROR, nothing, task)
    assert value == pytest.approx(-10.0 + 0.1)  # -10 plus 0.1 per marker
    # a valid public AUC of 0.75 against the sample submission's 0.5: (0.75 - 0.5) / (1 - 0.5)
    value, parts = pipeline.reward(
        [], ExecStatus.OK, Graded(0.75, True, private_score=0.9, baseline=0.5), task
    )
    assert value == pytest.approx(0.5) and parts["score"] == 0.75
    # no baseline (the sample did not grade): AUC's chance score 0.5 is the reference
    assert pipeline.reward([], ExecStatus.OK, Graded(0.75, True), task)[0] == pytest.approx(0.5)
    pipeline.close()


def test_instrument_section_from_run_config(tmp_path):
    """The actor reads the `instrument` section as mlerl.instrument's typed config; the defaults
    live only in InstrumentConfig."""
    path = tmp_path / "c.yaml"
    path.write_text(
        yaml.safe_dump(
            {"instrument": {"mode": "lm", "markers": "paper", "reward": {"failure": -5.0}}}
        )
    )
    got = _optional_section(InstrumentConfig, path, "instrument")
    assert (got.mode, got.markers, got.reward.failure) == (
        InstrumentMode.lm,
        MarkerMode.paper,
        -5.0,
    )
    path.write_text(yaml.safe_dump({"actors": {}}))
    assert _optional_section(InstrumentConfig, path, "instrument") == InstrumentConfig()
    assert (InstrumentConfig().mode, InstrumentConfig().markers) == (
        InstrumentMode.ast,
        MarkerMode.secure,
    )
    path.write_text(yaml.safe_dump({"instrument": {"mode": "magic"}}))
    with pytest.raises(ConfigError, match="instrument.mode"):
        _optional_section(InstrumentConfig, path, "instrument")


def test_grade_adapter_uses_the_pool_and_close_ends_it(tmp_path):
    import numpy as np
    import pandas as pd

    from mlerl.bench import Registry, grade_submission

    task = Registry.load(data_dir=tmp_path / "data").get("us-patent-phrase-to-phrase-matching")
    task.private_dir.mkdir(parents=True)
    ids = [f"p{i}" for i in range(10)]
    pd.DataFrame({"id": ids, "score": np.linspace(0, 1, 10)}).to_csv(task.answers_path, index=False)
    path = tmp_path / "submission.csv"
    pd.DataFrame({"id": ids, "score": np.linspace(0, 1, 10) ** 2}).to_csv(path, index=False)
    pipeline = RealPipeline(
        dataclasses.replace(ActorsConfig(), admission=AdmissionConfig(max_in_flight=1))
    )
    try:
        graded = [pipeline.grade(task, path) for _ in range(2)]
    finally:
        pipeline.close()
    expected = grade_submission(task, path)
    assert graded[0] == graded[1] and graded[0].valid and graded[0].score == expected.public_score
    assert (
        graded[0].private_score == expected.private_score
    )  # the reward reads public, reports private
    with pytest.raises(RuntimeError, match="closed"):  # close reached the pool
        pipeline.grade(task, path)
