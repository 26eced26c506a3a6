"""Every message type round-trips; every malformed input is rejected naming the field."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from mlerl.protocol import PromptKind, ProtocolError, WeightUpdate, decode, encode
from mlerl.protocol._messages import SCHEMA_VERSION, Ack, Heartbeat

from .conftest import make_sample

MESSAGES = [
    make_sample(),
    make_sample(
        seq=7,
        prompt_kind=PromptKind.IMPROVE,
        parent_id="a0:3",
        score=None,
        t_exec_started=None,
        t_exec_finished=None,
        t_graded=None,
        duration_s=0.0,
    ),
    WeightUpdate(version=4, uri="/ckpt/v4.safetensors", size_bytes=1234, sha256="ab" * 32),
    WeightUpdate(version=5, uri="inline", size_bytes=3, sha256="cd" * 32, payload=b"\x00\x01\x02"),
    Ack(actor_id="a0", seq=41),
    Heartbeat(sender="a1", role="actor", t=5.5, policy_version=2, state={"unacked": 3.0}),
]


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: type(m).__name__)
def test_round_trip(msg: Any) -> None:
    back = decode(encode(msg))
    assert back == msg
    assert type(back) is type(msg)
    assert back.v == SCHEMA_VERSION


def _raw_sample(**changes: Any) -> bytes:
    """Encode a valid sample as a plain dict, then change fields, bypassing __post_init__."""
    raw = msgspec.to_builtins(make_sample())
    raw["type"] = "sample"
    for key, value in changes.items():
        if value is _DELETE:
            del raw[key]
        else:
            raw[key] = value
    return msgspec.msgpack.encode(raw)


_DELETE = object()

MALFORMED = {
    "missing field": (_raw_sample(task_id=_DELETE), "task_id"),
    "wrong type": (_raw_sample(seq="seven"), "seq"),
    "logprob length": (_raw_sample(behaviour_logprobs=[-0.5]), "behaviour_logprobs"),
    "schema version": (_raw_sample(v=SCHEMA_VERSION + 1), "v"),
    "negative seq": (_raw_sample(seq=-1), "seq"),
    "non-finite reward": (_raw_sample(reward=float("nan")), "reward"),
    "infinite reward": (_raw_sample(reward=float("-inf")), "reward"),
    "negative duration": (_raw_sample(duration_s=-1.0), "duration_s"),
    "negative generation time": (_raw_sample(generation_s=-0.5), "generation_s"),
    "non-finite generation time": (_raw_sample(generation_s=float("inf")), "generation_s"),
    "disordered timestamps": (_raw_sample(t_exec_finished=100.5), "t_exec_finished"),
    "improve without parent": (_raw_sample(prompt_kind="improve"), "parent_id"),
    "scratch with parent": (_raw_sample(parent_id="a0:1"), "parent_id"),
    "parent reward without parent": (_raw_sample(parent_reward=0.5), "parent_reward"),
    "non-finite parent reward": (
        _raw_sample(prompt_kind="improve", parent_id="a0:1", parent_reward=float("nan")),
        "parent_reward",
    ),
    "submission of an invalid sample": (
        _raw_sample(valid_submission=False, submission=b"id,y\n"),
        "submission",
    ),
    "submission not bytes": (_raw_sample(valid_submission=True, submission=7), "submission"),
    "bad enum": (_raw_sample(exec_status="exploded"), "exec_status"),
    "unknown type": (msgspec.msgpack.encode({"type": "bogus", "v": 1}), "type"),
    "inline without payload": (
        msgspec.msgpack.encode(
            {"type": "weights", "version": 1, "uri": "inline", "size_bytes": 0, "sha256": ""}
        ),
        "payload",
    ),
    "payload size mismatch": (
        msgspec.msgpack.encode(
            {
                "type": "weights",
                "version": 1,
                "uri": "inline",
                "size_bytes": 9,
                "sha256": "",
                "payload": b"abc",
            }
        ),
        "size_bytes",
    ),
    "negative version": (
        msgspec.msgpack.encode(
            {"type": "weights", "version": -2, "uri": "/x", "size_bytes": 0, "sha256": ""}
        ),
        "version",
    ),
    "garbage bytes": (b"\xc1\xff\x00garbage", "<bytes>"),
    "truncated bytes": (encode(make_sample())[:-5], "<bytes>"),
    "empty": (b"", "<bytes>"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_rejected_naming_field(case: str) -> None:
    data, field = MALFORMED[case]
    with pytest.raises(ProtocolError) as info:
        decode(data)
    assert field in str(info.value)


def test_invariants_checked_on_construction_too() -> None:
    with pytest.raises(ProtocolError, match="behaviour_logprobs"):
        make_sample(behaviour_logprobs=[])
    with pytest.raises(ProtocolError, match="payload"):
        WeightUpdate(version=1, uri="inline", size_bytes=0, sha256="")


def test_private_score_is_optional_on_the_wire() -> None:
    """A sample from a sender that predates the public/private split decodes with no private
    score; a current one carries it through."""
    raw = msgspec.msgpack.decode(encode(make_sample(score=0.8, valid_submission=True)))
    raw.pop("private_score", None)
    old = decode(msgspec.msgpack.encode(raw))
    assert old.score == 0.8 and old.private_score is None
    new = decode(encode(make_sample(score=0.8, private_score=0.75, valid_submission=True)))
    assert (new.score, new.private_score) == (0.8, 0.75)


def test_plan_is_optional_on_the_wire() -> None:
    """A sample from a sender that predates the plan field decodes with an empty plan."""
    raw = msgspec.msgpack.decode(encode(msgspec.structs.replace(make_sample(), plan="fit a model")))
    assert raw.pop("plan") == "fit a model"
    assert decode(msgspec.msgpack.encode(raw)).plan == ""


def test_generation_time_is_optional_on_the_wire_and_dt_adds_it() -> None:
    """A journal written before ``generation_s`` existed still decodes (generation 0, so Δt is
    the execution time); a current sample's Δt is generation + execution: 1.5 + 29.5 = 31."""
    raw = msgspec.msgpack.decode(encode(make_sample(generation_s=1.5)))
    raw.pop("generation_s")
    old = decode(msgspec.msgpack.encode(raw))
    assert old.generation_s == 0.0 and old.dt_s == old.duration_s == 29.5
    new = decode(encode(make_sample(generation_s=1.5)))
    assert new.generation_s == 1.5 and new.dt_s == 31.0
