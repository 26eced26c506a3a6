"""The actor with the real sandbox (local backend), instrumentation, grader and reward."""

import asyncio

import pytest

from mlerl.actors import ActorsConfig, AdmissionConfig, HFEngine, ImprovementConfig
from mlerl.actors._actor import Actor
from mlerl.actors._fakes import FakeEngine, FakeSender
from mlerl.actors._pipeline import RealPipeline
from mlerl.actors._state import ActorState
from mlerl.protocol import ExecStatus, ParseStatus
from mlerl.sandbox import Limits

PROGRAM = """Fit a logistic regression on the scaled features.
```python
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
train = pd.read_csv("./input/train.csv")
test = pd.read_csv("./input/test.csv")
X = train.drop(columns=["id", "target"])
y = train["target"]
model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=500))
model.fit(X, y)
pred = model.predict_proba(test[X.columns])[:, 1]
pd.DataFrame({"id": test["id"], "target": pred}).to_csv("submission.csv", index=False)
```"""
CRASH = "Plan.\n```python\nimport pandas as pd\ntrain = pd.read_csv('./input/train.csv')\nraise SystemExit(3)\n```"

TASK = "standin-cancer-auc-tiny"


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    from mlerl.bench import Registry, prepare

    data = tmp_path_factory.mktemp("data")
    prepare(TASK, data)
    return Registry.load(None, data).get(TASK)


@pytest.fixture
async def sandbox(tmp_path):
    from mlerl.sandbox import SandboxConfig, make_sandbox

    box = make_sandbox(
        SandboxConfig(
            backend="local",
            max_concurrency=2,
            work_root=str(tmp_path / "work"),
            limits=Limits(wall_time_s=120, memory_mb=2048),
        )
    )
    try:
        yield box
    finally:
        await box.close()


def _actor(tmp_path, task, engine, sandbox, sender, **cfg):
    config = ActorsConfig(improvement=ImprovementConfig(improve_prob=0.0), **cfg)
    return Actor(
        "r0",
        config,
        engine=engine,
        sandbox=sandbox,
        sender=sender,
        tasks={TASK: task},
        pipeline=RealPipeline(),
        state=ActorState(tmp_path / "state"),
    )


@pytest.mark.slow
async def test_real_sandbox_grader_and_reward(tmp_path, task, sandbox):
    sender = FakeSender()
    actor = _actor(
        tmp_path,
        task,
        FakeEngine([PROGRAM, CRASH]),
        sandbox,
        sender,
        max_samples=2,
        admission=AdmissionConfig(max_in_flight=2, oversample=1.0),
    )
    async with asyncio.timeout(240):
        await actor.run()
    by_code = {("raise SystemExit" in s.code): s for s in sender.sent}
    good, bad = by_code[False], by_code[True]
    assert good.exec_status is ExecStatus.OK and good.valid_submission
    assert 0.5 < good.score <= 1.0  # AUC of a linear model on breast cancer data
    # all seven markers: imports, data, model, (no loss prints), training, prediction
    assert {
        "imported packages",
        "loaded data",
        "defined model",
        "trained model",
        "predicted test labels",
    } <= set(good.markers)
    # the default reward: the public AUC normalised against the sample submission's (0.5) and 1
    assert good.reward == pytest.approx(
        good.reward_parts["normalised"] + good.reward_parts["markers"]
    )
    assert good.reward == pytest.approx((good.score - 0.5) / 0.5) and good.private_score is not None
    assert good.duration_s > 0 and good.t_exec_started <= good.t_exec_finished <= good.t_graded
    assert "imported packages" in good.output_tail  # nonce lines cleaned for prompts
    assert bad.exec_status is ExecStatus.PROGRAM_ERROR and not bad.valid_submission
    assert bad.reward < -9.0  # -10 plus 0.1 per marker reached before the crash
    assert bad.markers[:2] == ["imported packages", "loaded data"]


@pytest.mark.slow
async def test_real_engine_real_sandbox(tmp_path, task, sandbox, tiny_model_dir):
    # The random tiny model writes noise: samples are unparsable, recorded as NOT_RUN with the
    # failure reward, and still carry the engine's ids and behaviour log-probs.
    sender = FakeSender()
    engine = HFEngine(tiny_model_dir)
    actor = _actor(
        tmp_path,
        task,
        engine,
        sandbox,
        sender,
        max_samples=2,
        max_new_tokens=24,
        admission=AdmissionConfig(max_in_flight=1, oversample=2.0),
    )
    async with asyncio.timeout(240):
        await actor.run()
    assert [s.seq for s in sender.sent] == [0, 1]
    for s in sender.sent:
        assert len(s.response_ids) == len(s.behaviour_logprobs) > 0 and len(s.prompt_ids) > 100
        assert s.parse_status in (ParseStatus.NO_CODE, ParseStatus.TRUNCATED, ParseStatus.EMPTY)
        assert s.exec_status is ExecStatus.NOT_RUN and s.reward == -10.0
