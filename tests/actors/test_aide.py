import random
import re

import pytest

from mlerl.actors._aide import AideConfig, Evaluation, Node, best_node, next_step, run_aide
from mlerl.actors._fakes import FakeTask
from mlerl.protocol import Completion, ConfigError


class ScriptedEngine:
    """Answers with code that prints a number; 'BUG' programs fail. Records the prompts."""

    def __init__(self, programs):
        self.programs = list(programs)
        self.prompts = []

    policy_version = 0

    async def generate(self, conversations, params):
        self.prompts.append(conversations[0][1].content)
        code = self.programs.pop(0)
        text = f"Plan.\n```python\n{code}\n```" if code is not None else "no code here"
        return [
            Completion(prompt_ids=[], token_ids=[], logprobs=[], text=text, finish_reason="stop")
        ]

    async def update_weights(self, update):
        raise NotImplementedError

    async def close(self):
        pass


async def evaluate(code):
    if "BUG" in code:
        return Evaluation(True, None, "Traceback: NameError BUG")
    value = float(re.search(r"print\(([\d.]+)\)", code).group(1))
    return Evaluation(False, value, f"metric {value}")


def node(i, buggy, metric=None, action="draft", depth=0, children=()):
    return Node(i, action, None, "p", "c", Evaluation(buggy, metric, ""), depth, list(children))


def test_policy_drafts_first_then_debugs_or_improves():
    cfg = AideConfig(num_drafts=2, debug_prob=0.5, max_debug_depth=3)
    rng = random.Random(0)
    assert next_step([], cfg, False, rng) == ("draft", None)
    nodes = [node(0, True), node(1, False, 0.7)]
    actions = [next_step(nodes, cfg, False, random.Random(s))[0] for s in range(400)]
    # debug with probability 0.5, else improve the best: 400 draws, sd 10; 150..250 is 5 sd
    assert set(actions) == {"debug", "improve"} and 150 < actions.count("debug") < 250
    assert next_step(nodes, AideConfig(num_drafts=2, debug_prob=0.0), False, rng) == (
        "improve",
        nodes[1],
    )
    # debug depth limit: a node at depth 3 is not debugged again; no good node -> draft
    deep = [node(0, True, children=[1]), node(1, True, action="debug", depth=3)]
    assert next_step(deep, AideConfig(num_drafts=1, debug_prob=1.0), False, rng) == ("draft", None)
    # a buggy node that already has a child is not a leaf
    assert (
        next_step(
            [node(0, True, children=[1]), node(1, False, 0.2)],
            AideConfig(num_drafts=1, debug_prob=1.0),
            False,
            rng,
        )[0]
        == "improve"
    )


def test_best_node_respects_direction():
    nodes = [node(0, False, 0.3), node(1, False, 0.9), node(2, True)]
    assert best_node(nodes, lower_is_better=False).id == 1
    assert best_node(nodes, lower_is_better=True).id == 0
    assert best_node([node(0, True)], False) is None


async def test_run_aide_end_to_end(tmp_path):
    task = FakeTask("t", tmp_path)
    programs = [
        "print(0.5)",
        "BUG",
        "print(0.6)",
        None,
        "print(0.55)",
        "print(0.9)",
        "print(0.95)",
        "print(0.1)",
    ]
    engine = ScriptedEngine(programs)
    cfg = AideConfig(steps=8, num_drafts=5, debug_prob=0.5, parse_attempts=1)
    nodes = await run_aide(engine, task, evaluate, cfg, seed=1)
    assert [n.action for n in nodes[:5]] == ["draft"] * 5
    assert nodes[3].evaluation.buggy and "not runnable" in nodes[3].evaluation.output
    later = nodes[5:]
    for n in later:
        parent = nodes[n.parent]
        assert n.id in parent.children
        if n.action == "debug":
            assert parent.evaluation.buggy and "had a bug" in engine.prompts[n.id]
            assert "Traceback" in engine.prompts[n.id] or "not runnable" in engine.prompts[n.id]
        else:
            assert n.action == "improve" and not parent.evaluation.buggy
            assert "You have implemented a previous solution" in engine.prompts[n.id]
    assert best_node(nodes, False).evaluation.metric == max(
        n.evaluation.metric for n in nodes if not n.evaluation.buggy
    )


class SeedRecorder(ScriptedEngine):
    def __init__(self, programs):
        super().__init__(programs)
        self.seeds = []

    async def generate(self, conversations, params):
        self.seeds.append(params.seed)
        return await super().generate(conversations, params)


async def test_a_response_with_no_program_is_sampled_again_up_to_parse_attempts(tmp_path):
    task = FakeTask("t", tmp_path)
    # step 0: two answers without code, the third parses; step 1: three without code, given up
    engine = SeedRecorder([None, None, "print(0.5)", None, None, None, "print(0.7)"])
    cfg = AideConfig(steps=3, num_drafts=3, parse_attempts=3)
    nodes = await run_aide(engine, task, evaluate, cfg, seed=4)
    assert [n.attempts for n in nodes] == [3, 3, 1]
    assert [n.evaluation.metric for n in nodes] == [0.5, None, 0.7]
    assert nodes[1].evaluation.status == "not_run" and nodes[1].code == ""
    # the retries ask the same prompt again, each with a fresh seed
    assert engine.prompts[0] == engine.prompts[1] == engine.prompts[2]
    assert len(set(engine.seeds)) == 7 and not engine.programs
    # when every answer parses, each step takes one call and the search draws the same seeds
    # as with no resampling: runs before the option repeat
    one = SeedRecorder(["print(0.1)", "print(0.2)", "print(0.3)"])
    three = SeedRecorder(["print(0.1)", "print(0.2)", "print(0.3)"])
    await run_aide(one, task, evaluate, AideConfig(steps=3, num_drafts=3, parse_attempts=1), seed=4)
    await run_aide(three, task, evaluate, AideConfig(steps=3, num_drafts=3), seed=4)
    assert one.seeds == three.seeds


def test_config_validation():
    with pytest.raises(ConfigError, match="parse_attempts"):
        AideConfig(parse_attempts=0)
    with pytest.raises(ConfigError, match="debug_prob"):
        AideConfig(debug_prob=2.0)
