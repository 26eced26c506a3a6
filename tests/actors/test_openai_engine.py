import json

import httpx
import pytest

from mlerl.actors import OpenAIEngine
from mlerl.actors._openai import EngineError, parse_chat_response
from mlerl.protocol import ChatMessage, SamplingParams

CONV = [ChatMessage(role="system", content="sys"), ChatMessage(role="user", content="hi")]


def _answer(
    text="plan\n```python\nprint(1)\n```", ids=(5, 6, 2), lps=(-0.5, -1.0, -0.1), reason="stop"
):
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "finish_reason": reason,
    }
    if ids is not None:
        choice["token_ids"] = list(ids)
    if lps is not None:
        choice["logprobs"] = {"content": [{"token": "x", "logprob": lp} for lp in lps]}
    return {"choices": [choice], "prompt_token_ids": [1, 2, 3] if ids is not None else None}


def _engine(handler, **kw):
    return OpenAIEngine("http://test/v1", "m", transport=httpx.MockTransport(handler), **kw)


async def test_request_and_response_round_trip():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/chat/completions"
        seen.append(json.loads(request.content))
        return httpx.Response(200, json=_answer())

    engine = _engine(handler, api_key="k")
    out = await engine.generate(
        [CONV, CONV], SamplingParams(max_new_tokens=7, temperature=0.5, top_k=4, seed=9)
    )
    await engine.close()
    assert [b["seed"] for b in seen] == [9, 10]  # conversation i gets seed + i
    body = seen[0]
    assert body["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
    ]
    assert (body["max_tokens"], body["temperature"], body["top_k"], body["logprobs"]) == (
        7,
        0.5,
        4,
        True,
    )
    assert body["return_token_ids"] is True
    c = out[0]
    assert (c.prompt_ids, c.token_ids, c.logprobs) == ([1, 2, 3], [5, 6, 2], [-0.5, -1.0, -0.1])
    assert c.finish_reason == "stop" and c.text.startswith("plan")


def test_missing_ids_or_mismatched_logprobs_leave_them_empty():
    no_ids = parse_chat_response(_answer(ids=None))
    assert (no_ids.token_ids, no_ids.logprobs, no_ids.prompt_ids) == ([], [], [])
    assert no_ids.text.startswith("plan")
    mismatch = parse_chat_response(_answer(lps=(-0.5,)))
    assert mismatch.token_ids == [5, 6, 2] and mismatch.logprobs == []
    assert parse_chat_response(_answer(reason="length")).finish_reason == "length"
    assert parse_chat_response(_answer(text=None)).text == ""


@pytest.mark.parametrize("data", [{}, {"choices": []}, {"choices": [{"no": 1}]}, {"choices": "x"}])
def test_malformed_response_raises(data):
    with pytest.raises(EngineError, match="malformed"):
        parse_chat_response(data)


async def test_retries_server_errors_then_succeeds():
    calls = []

    def handler(request):
        calls.append(1)
        return (
            httpx.Response(503, text="busy")
            if len(calls) == 1
            else httpx.Response(200, json=_answer())
        )

    engine = _engine(handler, max_retries=2)
    (c,) = await engine.generate([CONV], SamplingParams())
    assert len(calls) == 2 and c.token_ids == [5, 6, 2]


async def test_client_error_is_reported_with_status():
    engine = _engine(lambda r: httpx.Response(400, text="bad model"), max_retries=2)
    with pytest.raises(EngineError) as info:
        await engine.generate([CONV], SamplingParams())
    assert "HTTP 400" in str(info.value) and "bad model" in str(info.value)


async def test_connection_errors_exhaust_retries():
    def handler(request):
        raise httpx.ConnectError("refused")

    engine = _engine(handler, max_retries=1)
    with pytest.raises(EngineError, match="request failed"):
        await engine.generate([CONV], SamplingParams())


async def test_weights_are_fixed():
    from mlerl.protocol import announce, encode_weights

    import torch

    engine = _engine(lambda r: httpx.Response(200, json=_answer()))
    with pytest.raises(EngineError, match="fixed"):
        await engine.update_weights(announce(encode_weights({"w": torch.zeros(1)}), version=1))
    assert engine.policy_version == 0
