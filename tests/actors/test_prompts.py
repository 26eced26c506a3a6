import dataclasses
import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from mlerl.actors import ImprovementConfig, PromptConfig
from mlerl.actors._improve import ImprovementBuffer, Solution, creditable_markers
from mlerl.actors import improve_prompt, scratch_prompt
from mlerl.actors._prompts import SYSTEM, data_snippet
from mlerl.protocol import ConfigError, ExecStatus, ParseStatus, PromptKind


@dataclass
class FakeTask:
    id: str
    description: str
    public_dir: Path
    submission_columns: tuple[str, ...] = ("id", "target")


@pytest.fixture
def task(tmp_path):
    pub = tmp_path / "public"
    pub.mkdir()
    (pub / "train.csv").write_text("id,x,target\n1,0.5,1\n2,0.7,0\n")
    (pub / "test.csv").write_text("id,x\n" + "".join(f"{i},{i / 10}\n" for i in range(500)))
    (pub / "sample_submission.csv").write_text("id,target\n0,0\n1,0\n2,0\n")
    (pub / "images").mkdir()
    return FakeTask("t1", "Predict the target. Metric: AUC.", pub)


def test_scratch_prompt_has_the_papers_parts(task):
    msgs = scratch_prompt(task, PromptConfig(snippet_chars=40))
    assert [m.role for m in msgs] == ["system", "user"]
    assert msgs[0].content == SYSTEM
    user = msgs[1].content
    assert "single markdown code block" in user
    assert (
        "Datasets images/, sample_submission.csv, test.csv, train.csv are available in `./input/`"
        in user
    )
    assert "./submission.csv" in user and "Predict the target. Metric: AUC." in user
    assert "id,target 0,0 1,0 etc." in user
    # the snippet is the head of the test file, cut at 40 chars
    assert "Data snippet: -> ./input/test.csv:\nid,x\n0,0.0\n" in user
    snippet = user.split("Data snippet: ")[1]
    assert len(snippet.split(":\n", 1)[1].rstrip(" .\n")) <= 40


def test_long_description_is_clipped(task):
    task.description = "x" * 100
    user = scratch_prompt(task, PromptConfig(description_chars=10))[1].content
    assert "x" * 10 + "\n[... truncated ...]" in user and "x" * 11 not in user


def test_snippet_without_data():
    assert data_snippet(Path("/nonexistent"), 100) == ""


def test_improve_prompt_shows_solution_and_output_tail(task):
    output = "start\n" + "loss 1\n" * 1000 + "final accuracy 0.9"
    msgs = improve_prompt(task, "Use a forest.", "print(1)", output, PromptConfig(output_chars=50))
    user = msgs[1].content
    assert user.startswith("You have implemented a previous solution.")
    assert "Use a forest.\n\n```python\nprint(1)\n```" in user
    assert "final accuracy 0.9" in user and "start" not in user


def test_prompt_config_validation():
    with pytest.raises(ConfigError, match="snippet_chars"):
        PromptConfig(snippet_chars=-1)
    with pytest.raises(ConfigError, match="improve_prob"):
        ImprovementConfig(improve_prob=1.5)


def sol(i, reward, status=ExecStatus.OK, task="t1", parse=ParseStatus.OK):
    return Solution(f"a:{i}", task, "plan", f"print({i})", "out", reward, status, parse)


def test_buffer_keeps_recent_and_best():
    buf = ImprovementBuffer(ImprovementConfig(recent=2, best=2))
    for i, r in enumerate([5.0, 1.0, 9.0, 2.0, 3.0]):
        assert buf.add(sol(i, r))
    ids = {s.sample_id for s in buf.candidates("t1")}
    # best two: 9.0 (a:2), 5.0 (a:0); most recent two: a:3, a:4
    assert ids == {"a:2", "a:0", "a:3", "a:4"}
    assert buf.best_of("t1").sample_id == "a:2"
    assert buf.candidates("other") == []


def test_buffer_eligibility():
    buf = ImprovementBuffer()
    assert not buf.add(sol(0, -10, ExecStatus.PROGRAM_ERROR))
    assert not buf.add(sol(1, -10, ExecStatus.INFRA_ERROR))
    assert not buf.add(sol(2, -10, ExecStatus.NOT_RUN, parse=ParseStatus.NO_CODE))
    with_failures = ImprovementBuffer(ImprovementConfig(include_failures=True))
    assert with_failures.add(sol(0, -10, ExecStatus.TIMEOUT))
    assert not with_failures.add(sol(1, -10, ExecStatus.INFRA_ERROR))


def test_choose_is_scratch_without_parents_and_about_half_with():
    rng = random.Random(0)
    buf = ImprovementBuffer()
    assert buf.choose("t1", rng) == (PromptKind.SCRATCH, None)
    buf.add(sol(0, 1.0))
    kinds = [buf.choose("t1", rng)[0] for _ in range(2000)]
    frac = kinds.count(PromptKind.IMPROVE) / len(kinds)
    # Binomial(2000, 0.5): sd = sqrt(2000 * 0.25) ~ 22.4 draws = 1.1%; 0.44..0.56 is > 5 sd
    assert 0.44 < frac < 0.56
    kind, parent = next(
        (k, p) for k, p in (buf.choose("t1", rng) for _ in range(100)) if k is PromptKind.IMPROVE
    )
    assert parent.sample_id == "a:0"
    never = ImprovementBuffer(ImprovementConfig(improve_prob=0.0))
    never.add(sol(0, 1.0))
    assert all(never.choose("t1", rng)[0] is PromptKind.SCRATCH for _ in range(50))


def test_the_edit_format_asks_for_search_replace_edits_and_the_paper_format_for_a_program(task):
    paper = improve_prompt(task, "Use a forest.", "print(1)", "out", PromptConfig())[1].content
    edit = improve_prompt(
        task, "Use a forest.", "print(1)", "out", PromptConfig(improve_format="edit")
    )[1].content
    assert (
        "include those sections again in your final solution" in paper
        and "<<<<<<< SEARCH" not in paper
    )
    assert "<<<<<<< SEARCH\n(lines copied exactly from the previous solution)\n=======" in edit
    assert "include those sections again" not in edit
    assert "Use a forest.\n\n```python\nprint(1)\n```" in edit  # the parent is shown the same way
    with pytest.raises(ConfigError, match="improve_format"):
        PromptConfig(improve_format="diff")


def test_a_parent_is_revised_revisions_times_in_a_row_then_another_is_drawn():
    rng = random.Random(1)
    buf = ImprovementBuffer(ImprovementConfig(improve_prob=1.0, revisions=3))
    for i in range(6):
        buf.add(sol(i, float(i)))
    parents = [buf.choose("t1", rng)[1].sample_id for _ in range(30)]
    runs = [parents[i : i + 3] for i in range(0, 30, 3)]
    assert all(len(set(run)) == 1 for run in runs)  # each run of 3 revises one parent
    assert len({run[0] for run in runs}) > 1  # and a new parent is drawn after it
    # scratch draws in between do not use up a parent's revisions
    half = ImprovementBuffer(ImprovementConfig(improve_prob=0.5, revisions=2))
    half.add(sol(0, 0.0))
    half.add(sol(1, 1.0))
    improve = [
        p.sample_id
        for k, p in (half.choose("t1", rng) for _ in range(400))
        if k is PromptKind.IMPROVE
    ]
    assert all(improve[i] == improve[i + 1] for i in range(0, len(improve) - 1, 2))
    # the paper: a new parent every time (so two in a row differ about half the time here)
    paper = ImprovementBuffer(ImprovementConfig(improve_prob=1.0))
    paper.add(sol(0, 0.0))
    paper.add(sol(1, 1.0))
    draws = [paper.choose("t1", rng)[1].sample_id for _ in range(400)]
    changes = sum(a != b for a, b in zip(draws, draws[1:]))
    assert 150 < changes < 250  # Binomial(399, 0.5): sd 10
    with pytest.raises(ConfigError, match="revisions"):
        ImprovementConfig(revisions=0)


def test_a_revision_is_credited_for_all_its_markers_or_only_for_those_its_parent_missed():
    parent = dataclasses.replace(sol(0, 0.5), markers=frozenset({"loaded data", "trained model"}))
    reached = ["loaded data", "trained model", "validated"]
    assert creditable_markers(reached, parent, True) == reached  # the paper: every marker counts
    assert creditable_markers(reached, parent, False) == ["validated"]
    assert creditable_markers(reached[:2], parent, False) == []  # broke a parent that ran on
    assert creditable_markers(reached, None, False) == reached  # a scratch sample has no parent
