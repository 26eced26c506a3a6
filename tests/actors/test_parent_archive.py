"""Parent choice for IMPROVE prompts: the PUCT archive (best-descendant value, rank prior)."""

import random

import pytest

from mlerl.actors import ImprovementConfig
from mlerl.actors._improve import ImprovementBuffer, Solution, puct_scores
from mlerl.protocol import ConfigError, ExecStatus, PromptKind


def _sol(sid, reward, parent=None, status=ExecStatus.OK):
    return Solution(sid, "t", "plan", f"code {sid}", "out", reward, status, parent_id=parent)


def test_puct_scores_by_hand():
    # Q = own rewards (0.2, 0.5, 0.8) normalised to (0, 0.5, 1); ranks 1, 2, 3 over 6 give
    # P = (1/6, 2/6, 3/6); T = 0, so the bonus is c * sqrt(1) * P
    assert puct_scores([0.2, 0.5, 0.8], [None] * 3, [0, 0, 0], 1.0) == pytest.approx(
        [1 / 6, 0.5 + 2 / 6, 1.5]
    )
    # the best was chosen once and its revisions reached 0.3: Q = (0.2, 0.5, 0.3) normalised to
    # (0, 1, 1/3); T = 1: bonus sqrt 2 * P / (1 + n)
    r2 = 2**0.5
    assert puct_scores([0.2, 0.5, 0.8], [None, None, 0.3], [0, 0, 1], 1.0) == pytest.approx(
        [r2 / 6, 1 + r2 * 2 / 6, 1 / 3 + r2 * 3 / 6 / 2]
    )
    # tied rewards share the mean rank: ranks (2.5, 2.5, 1) over 6; equal values: Q = 0
    assert puct_scores([0.5, 0.5, 0.1], [0.4, 0.4, 0.4], [0, 0, 0], 2.0) == pytest.approx(
        [2 * 2.5 / 6, 2 * 2.5 / 6, 2 * 1 / 6]
    )


def _buffer(**kw):
    events = []
    config = ImprovementConfig(improve_prob=1.0, parent_choice="puct", **kw)
    return ImprovementBuffer(config, record=events.append), events


def test_puct_revisits_what_its_revisions_improve_and_leaves_what_they_break():
    buf, events = _buffer()
    rng = random.Random(0)
    for s in (_sol("a", 0.2), _sol("b", 0.5), _sol("c", 0.8)):
        buf.add(s)
    kind, parent = buf.choose("t", rng)
    assert kind is PromptKind.IMPROVE and parent.sample_id == "c"  # the best, unvisited
    buf.add(_sol("d", 0.3, parent="c"))  # c's revision scored worse than c
    # rewards (.2, .5, .8, .3), values (.2, .5, .3, .3) -> Q (0, 1, 1/3, 1/3); ranks 1, 3, 4, 2
    # over 10; T = 1: a 0.14, b 1.42, c 0.62, d 0.62
    assert buf.choose("t", rng)[1].sample_id == "b"
    buf.add(_sol("e", -10.0, parent="b", status=ExecStatus.PROGRAM_ERROR))  # not archived
    by_id = {s.sample_id: (n, best) for s, n, best in buf.archived("t")}
    assert by_id == {"a": (0, None), "b": (1, -10.0), "c": (1, 0.3), "d": (0, None)}
    # a grandchild's reward reaches its grandparent: d's revision f at 0.9 lifts c and d
    buf.add(_sol("f", 0.9, parent="d"))
    by_id = {s.sample_id: best for s, _, best in buf.archived("t")}
    assert by_id["c"] == 0.9 and by_id["d"] == 0.9
    assert [e["event"] for e in events] == ["add"] * 3 + ["choose", "add", "choose", "add", "add"]


def test_the_archive_is_rebuilt_from_its_events():
    buf, events = _buffer(archive=3)
    rng = random.Random(0)
    for i, r in enumerate((0.1, 0.4, 0.3, 0.2)):  # archive 3: the lowest own reward leaves
        buf.add(_sol(f"s{i}", r))
    buf.choose("t", rng)
    buf.add(_sol("x", 0.6, parent="s1"))
    again = ImprovementBuffer(ImprovementConfig(improve_prob=1.0, parent_choice="puct"))
    again.config.archive = 3
    again.replay(events)
    key = lambda b: sorted((s.sample_id, n, best) for s, n, best in b.archived("t"))  # noqa: E731
    assert key(again) == key(buf)
    assert {s.sample_id for s, _, _ in buf.archived("t")} == {"s1", "s2", "x"}
    assert again.choose("t", random.Random(1))[1] == buf.choose("t", random.Random(2))[1]
    # malformed events (a hand-edited file) are skipped and counted, never fatal
    fresh = ImprovementBuffer(ImprovementConfig(improve_prob=1.0, parent_choice="puct"))
    bad = [{"event": "add", "sample_id": "z"}, {"event": "?"}, "not a dict", events[0]]
    assert fresh.replay(bad) == 3 and [s.sample_id for s, _, _ in fresh.archived("t")] == ["s0"]


def test_parent_choice_config_is_checked():
    with pytest.raises(ConfigError, match="parent_choice"):
        ImprovementConfig(parent_choice="best")
    with pytest.raises(ConfigError, match="puct_c"):
        ImprovementConfig(puct_c=-1.0)
    with pytest.raises(ConfigError, match="archive"):
        ImprovementConfig(archive=0)
