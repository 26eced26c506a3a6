"""evaluate_aide: AIDE at K executions per task through the actor's execution path (fakes), and
the best-so-far curves of both evaluations."""

import pytest

from mlerl.actors import ActorsConfig, ImprovementConfig, evaluate, evaluate_aide
from mlerl.actors._aide import AideConfig
from mlerl.actors._evaluate import best_so_far
from mlerl.actors._fakes import FakeEngine, FakeSandbox, FakeTask, FakePipeline
from mlerl.actors._pipeline import Graded, Prepared
from mlerl.protocol import Completion


class ScriptedEngine:
    """Answers the i-th call with the i-th response; records prompts and sampling settings."""

    policy_version = 0

    def __init__(self, responses):
        self.responses = list(responses)
        self.prompts, self.params = [], []

    async def generate(self, conversations, params):
        self.prompts.append(conversations[0][-1].content)
        self.params.append(params)
        text = self.responses.pop(0)
        return [
            Completion(
                prompt_ids=[1], token_ids=[2], logprobs=[-0.1], text=text, finish_reason="stop"
            )
        ]

    async def close(self):
        pass


def good(tag):
    return f"Plan {tag}.\n```python\nprint('{tag}')\nopen('submission.csv','w')\n```"


BUG = "Plan.\n```python\nprint('Traceback: NameError BUGMARK')\n```"  # runs, writes no submission
NO_CODE = "I would fit a model."


class ScriptedPipeline(FakePipeline):
    """The fake pipeline with scripted scores; records what ``prepare`` saw; ``clean`` marks
    its output, so the prompts can be checked to show the cleaned terminal output."""

    def __init__(self, scores, prepared):
        super().__init__()
        self.scores, self.prepared = list(scores), prepared

    async def prepare(self, code):
        self.prepared.append(code)
        return Prepared(code + "\nprint('instrumented')", None)

    def grade(self, task, path):
        return Graded(self.scores.pop(0), path.is_file())

    def clean(self, text, nonce):
        return text.replace("BUGMARK", "CLEANED")


def pipeline(scores, prepared):
    return ScriptedPipeline(scores, prepared)


async def test_evaluate_aide_k_executions_best_mean_and_real_output(tmp_path):
    task = FakeTask("t", tmp_path)
    # drafts: valid 0.5, buggy, no program, valid 0.7, valid 0.6; then (debug_prob 1) debug
    # both buggy leaves (valid 0.65 and 0.8), then improve the best (0.8) -> 0.55
    responses = [
        good("d0"),
        BUG,
        NO_CODE,
        good("d3"),
        good("d4"),
        good("s5"),
        good("s6"),
        good("s7"),
    ]
    engine, sandbox, prepared = ScriptedEngine(responses), FakeSandbox(duration=2.0), []
    config = ActorsConfig(temperature=0.9, max_new_tokens=77)
    out = await evaluate_aide(
        config,
        {"t": task},
        k=8,
        engine=engine,
        sandbox=sandbox,
        pipeline=pipeline([0.5, 0.7, 0.6, 0.65, 0.8, 0.55], prepared),
        seed=3,
        aide=AideConfig(num_drafts=5, debug_prob=1.0, parse_attempts=1),
    )
    s = out["t"]
    # K = 8 steps: 8 LLM calls, 7 programs run (the response with no program ran nothing)
    assert s["k"] == 8 and len(engine.prompts) == 8 and sandbox.runs == 7 and len(prepared) == 7
    assert s["llm_calls"] == 8
    assert s["best_score"] == 0.8 and s["mean_score"] == pytest.approx(3.8 / 6)
    assert s["valid_frac"] == 6 / 8 and s["lower_is_better"] is False
    assert s["mean_duration_s"] == pytest.approx(7 * 2.0 / 8)
    assert s["best_vs_executions"] == [0.5, 0.5, 0.5, 0.7, 0.7, 0.7, 0.8, 0.8]
    assert len(s["wall_s"]) == 8 and all(w >= 0 for w in s["wall_s"])
    assert s["elapsed_s"] == pytest.approx([sum(s["wall_s"][: i + 1]) for i in range(8)])
    assert s["actions"] == {"debug": 2, "draft": 5, "improve": 1}
    assert s["statuses"] == {"not_run": 1, "ok": 7}
    # debug prompts show the real (fake) terminal output, instrumented and cleaned
    debug = engine.prompts[5:7]
    assert all("had a bug" in p for p in debug)
    assert any(
        "Terminal output:\n```\nTraceback: NameError CLEANED\ninstrumented" in p for p in debug
    )
    assert any("not runnable" in p for p in debug)
    # the improve prompt shows the best node (step 6, 0.8) with its output
    assert (
        "You have implemented a previous solution" in engine.prompts[7]
        and "s6" in engine.prompts[7]
    )
    # same sampling settings as the RL evaluation; a fresh seed per step
    assert {(p.temperature, p.max_new_tokens) for p in engine.params} == {(0.9, 77)}
    assert len({p.seed for p in engine.params}) == 8


async def test_evaluate_aide_lower_is_better_and_all_invalid(tmp_path):
    lower = FakeTask("loss", tmp_path, lower_is_better=True)
    bad = FakeTask("bad", tmp_path)
    # AIDE's default resamples a response with no program: "bad"'s first step takes two calls
    engine = ScriptedEngine([good("a"), good("b"), good("c")] + [NO_CODE, BUG, BUG, BUG])
    sandbox = FakeSandbox()
    out = await evaluate_aide(
        ActorsConfig(),
        {"loss": lower, "bad": bad},
        k=3,
        engine=engine,
        sandbox=sandbox,
        pipeline=pipeline([0.4, 0.2, 0.3], []),
        seed=0,
    )
    assert out["loss"]["llm_calls"] == 3 and out["bad"]["llm_calls"] == 4
    assert sandbox.runs == 6 and out["bad"]["statuses"] == {"ok": 3} and not engine.responses
    assert out["loss"]["best_score"] == 0.2 and out["loss"]["best_vs_executions"] == [0.4, 0.2, 0.2]
    assert (
        out["bad"]["k"] == 3
        and out["bad"]["best_score"] is None
        and out["bad"]["valid_frac"] == 0.0
    )


async def test_evaluate_reports_best_so_far_in_finish_order(tmp_path):
    task = FakeTask("t", tmp_path)
    config = ActorsConfig(improvement=ImprovementConfig(improve_prob=0.0))
    out = await evaluate(
        config,
        {"t": task},
        k=4,
        engine=FakeEngine([good("x")]),
        sandbox=FakeSandbox(),
        pipeline=FakePipeline(0.8),
        state_dir=tmp_path / "state",
    )
    s = out["t"]
    assert s["k"] == 4 and s["best_vs_executions"] == [0.8] * 4
    assert len(s["elapsed_s"]) == 4 and s["elapsed_s"] == sorted(s["elapsed_s"])


def test_best_so_far():
    assert best_so_far([None, 0.3, 0.1, None, 0.5], False) == [None, 0.3, 0.3, 0.3, 0.5]
    assert best_so_far([None, 0.3, 0.1, None, 0.5], True) == [None, 0.3, 0.1, 0.1, 0.1]
    # chosen on the public scores, shown on the private ones: 0.3 (private 0.2) stays the best
    # public until 0.5 (private 0.4); the private 0.9 of public 0.1 is never selected
    assert best_so_far([None, 0.3, 0.1, None, 0.5], False, [None, 0.2, 0.9, None, 0.4]) == [
        None,
        0.2,
        0.2,
        0.2,
        0.4,
    ]


def test_summaries_select_on_public_and_report_private():
    from mlerl.actors._aide import Evaluation, Node
    from mlerl.actors._evaluate import summarise_aide

    def node(i, metric, private):
        return Node(
            i,
            "improve" if i else "draft",
            None,
            f"plan {i}",
            f"code = {i}\n",
            Evaluation(metric is None, metric, f"out {i}", private=private),
        )

    nodes = [node(0, 0.3, 0.2), node(1, 0.1, 0.9), node(2, None, None), node(3, 0.5, 0.4)]
    s = summarise_aide(nodes, lower_is_better=False)
    # the best node itself: the fourth step, its plan, program and output, both scores
    assert s["best_solution"] == {
        "execution": 4,
        "public_score": 0.5,
        "private_score": 0.4,
        "plan": "plan 3",
        "program": "code = 3\n",
        "output_tail": "out 3",
        "action": "improve",
    }
    assert summarise_aide(nodes[2:3], lower_is_better=False)["best_solution"] is None
    # best public 0.5 -> private 0.4, gap 0.4 - 0.5; means over the three valid nodes
    assert (
        s["best_public"] == 0.5 and s["best_score"] == 0.4 and s["best_gap"] == pytest.approx(-0.1)
    )
    assert s["mean_public"] == pytest.approx(0.3) and s["mean_score"] == pytest.approx(0.5)
    assert s["best_vs_executions"] == [0.2, 0.2, 0.2, 0.4]


def test_the_best_of_both_kinds_says_which_kind_won():
    from mlerl.actors._evaluate import summarise
    from mlerl.protocol import ExecStatus, PromptKind, Sample

    def sample(i, kind, score):
        return Sample(
            plan=f"plan {i}",
            code=f"code = {i}\n",
            output_tail=f"out {i}",
            sample_id=f"a:{i}",
            actor_id="a",
            seq=i,
            task_id="t",
            prompt_kind=kind,
            parent_id="a:0" if kind is PromptKind.IMPROVE else None,
            prompt_ids=[1],
            response_ids=[2],
            behaviour_logprobs=[-0.1],
            policy_version=0,
            t_sampled=float(i),
            exec_status=ExecStatus.OK if score is not None else ExecStatus.PROGRAM_ERROR,
            score=score,
            valid_submission=score is not None,
            reward=0.0 if score is not None else -10.0,
        )

    S, I = PromptKind.SCRATCH, PromptKind.IMPROVE
    samples = [
        sample(0, S, 0.05),
        sample(1, I, 0.04),
        sample(2, I, None),
        sample(3, S, 0.04),
        sample(4, S, None),
    ]
    low = summarise(samples, lower_is_better=True)
    # 0.04 first reached by the improve sample (the later scratch tie does not displace it)
    assert low["best_kind"] == "improve" and low["best_score"] == 0.04
    # the selected sample itself, at its position in finishing order (the second)
    assert {k: low["best_solution"][k] for k in ("execution", "kind", "plan", "program")} == {
        "execution": 2,
        "kind": "improve",
        "plan": "plan 1",
        "program": "code = 1\n",
    }
    assert low["best_solution"]["output_tail"] == "out 1"
    assert low["valid_frac_by_kind"] == {"scratch": pytest.approx(2 / 3), "improve": 0.5}
    assert summarise(samples, lower_is_better=False)["best_kind"] == "scratch"  # 0.05 is best
    assert summarise([sample(0, S, None)], lower_is_better=True)["best_kind"] is None
    assert summarise([sample(0, S, None)], lower_is_better=True)["best_solution"] is None
