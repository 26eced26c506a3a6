import asyncio
import hashlib

import pytest
import torch

from mlerl.actors import HFEngine
from mlerl.protocol import WeightUpdateError, announce, encode_weights
from mlerl.actors._sampling import process_logits
from mlerl.protocol import ChatMessage, InferenceEngine, SamplingParams, WeightUpdate

CONVS = [[ChatMessage(role="user", content=f"Write a script number {i}")] for i in range(3)]


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    return HFEngine(tiny_model_dir)


def test_is_an_inference_engine(engine):
    assert isinstance(engine, InferenceEngine)


async def test_logprobs_match_tokens_and_reproducible(engine):
    params = SamplingParams(max_new_tokens=12, temperature=0.7, seed=3)
    first = await engine.generate(CONVS, params)
    second = await engine.generate(CONVS, params)
    for a, b in zip(first, second):
        assert len(a.logprobs) == len(a.token_ids) > 0
        assert all(lp <= 0.0 for lp in a.logprobs)
        assert a.token_ids == b.token_ids
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
        assert a.finish_reason in ("stop", "length")
        if a.finish_reason == "length":
            assert len(a.token_ids) == 12
    other = await engine.generate(CONVS, SamplingParams(max_new_tokens=12, temperature=0.7, seed=4))
    assert [c.token_ids for c in other] != [c.token_ids for c in first]


async def test_logprobs_are_those_of_the_temperature_scaled_distribution(engine):
    # Re-score the sampled tokens with a plain forward pass: log_softmax(logits / T) at each
    # position must equal the engine's behaviour log-probs.
    params = SamplingParams(max_new_tokens=8, temperature=0.5, seed=0)
    (c,) = await engine.generate(CONVS[:1], params)
    ids = torch.tensor([c.prompt_ids + c.token_ids])
    with torch.no_grad():
        logits = engine.model(input_ids=ids).logits[0]  # (T, V)
    start = len(c.prompt_ids) - 1
    logp = torch.log_softmax(logits[start : start + len(c.token_ids)] / 0.5, dim=-1)
    expected = logp.gather(-1, torch.tensor(c.token_ids)[:, None])[:, 0]
    assert c.logprobs == pytest.approx(expected.tolist(), abs=1e-4)


async def test_row_is_independent_of_batching(engine):
    params = SamplingParams(max_new_tokens=10, temperature=1.0, seed=7)
    together = await engine.generate(CONVS, params)
    # conversation 1 alone with the seed it had in the batch (7 + 1)
    (alone,) = await engine.generate(
        CONVS[1:2], SamplingParams(max_new_tokens=10, temperature=1.0, seed=8)
    )
    assert alone.token_ids == together[1].token_ids


async def test_concurrent_calls_are_served(engine):
    params = SamplingParams(max_new_tokens=6, temperature=0.7, seed=1)
    results = await asyncio.gather(*(engine.generate([conv], params) for conv in CONVS))
    assert [len(r) for r in results] == [1, 1, 1]
    assert all(len(r[0].token_ids) == len(r[0].logprobs) for r in results)


async def test_greedy_stops_at_stop_token(tiny_model_dir):
    engine = HFEngine(tiny_model_dir)
    greedy = SamplingParams(max_new_tokens=5, temperature=0.0)
    (c,) = await engine.generate(CONVS[:1], greedy)
    assert c.finish_reason == "length" and len(c.token_ids) == 5
    # Declare the second greedy token a stop token: generation must end right after it, with
    # the stop token included in the response (the policy learns to stop).
    stop_token = engine.tokenizer.convert_ids_to_tokens(c.token_ids[1])
    stopping = HFEngine(tiny_model_dir, stop_tokens=("<|im_end|>", stop_token))
    (s,) = await stopping.generate(CONVS[:1], greedy)
    first_stop = next(i for i, t in enumerate(c.token_ids) if t in stopping.stop_ids)
    assert s.token_ids == c.token_ids[: first_stop + 1]
    assert s.finish_reason == "stop" and len(s.logprobs) == len(s.token_ids)


async def test_weight_update_changes_outputs_and_version(tiny_model_dir, tmp_path):
    engine = HFEngine(tiny_model_dir)
    params = SamplingParams(max_new_tokens=8, temperature=0.7, seed=5)
    before = await engine.generate(CONVS[:1], params)
    assert engine.policy_version == 0
    state = {k: v + 0.05 * torch.randn_like(v) for k, v in engine.model.state_dict().items()}
    await engine.update_weights(announce(encode_weights(state), 3, tmp_path, inline_max_bytes=0))
    assert engine.policy_version == 3
    after = await engine.generate(CONVS[:1], params)
    assert after[0].logprobs != pytest.approx(before[0].logprobs, abs=1e-3)
    # an old or repeated broadcast is ignored
    await engine.update_weights(announce(encode_weights(engine.model.state_dict()), version=2))
    assert engine.policy_version == 3


async def test_bad_weight_updates_are_rejected_and_weights_kept(tiny_model_dir, tmp_path):
    engine = HFEngine(tiny_model_dir)
    params = SamplingParams(max_new_tokens=6, temperature=0.7, seed=5)
    (before,) = await engine.generate(CONVS[:1], params)
    good = announce(encode_weights(engine.model.state_dict()), version=1)
    bad_hash = WeightUpdate(
        version=1, uri="inline", size_bytes=good.size_bytes, sha256="0" * 64, payload=good.payload
    )
    junk = b"not safetensors"
    not_st = WeightUpdate(
        version=1,
        uri="inline",
        size_bytes=len(junk),
        sha256=hashlib.sha256(junk).hexdigest(),
        payload=junk,
    )
    wrong = announce(encode_weights({"model.embed_tokens.weight": torch.zeros(3, 3)}), version=1)
    extra = announce(
        encode_weights({**engine.model.state_dict(), "bogus": torch.zeros(1)}), version=1
    )
    missing_file = WeightUpdate(
        version=1, uri=str(tmp_path / "nope"), size_bytes=1, sha256="0" * 64
    )
    for bad, fragment in [
        (bad_hash, "sha256"),
        (not_st, "safetensors"),
        (wrong, "missing"),
        (extra, "unexpected"),
        (missing_file, "cannot read"),
    ]:
        with pytest.raises(WeightUpdateError, match=fragment):
            await engine.update_weights(bad)
        assert engine.policy_version == 0
    (after,) = await engine.generate(CONVS[:1], params)
    assert after.token_ids == before.token_ids


def test_process_logits_top_k_and_top_p():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    # top_k=2 keeps the two largest
    k = process_logits(logits, 1.0, 2, 1.0)
    assert torch.isinf(k[0, 2:]).all() and torch.isfinite(k[0, :2]).all()
    # top_p=0.7: mass before token0=0, token1=0.5, token2=0.8 -> keep tokens 0 and 1
    p = process_logits(logits, 1.0, -1, 0.7)
    assert torch.isfinite(p[0, :2]).all() and torch.isinf(p[0, 2:]).all()
    # temperature 2 halves the logits
    assert torch.allclose(process_logits(logits, 2.0, -1, 1.0), logits / 2)


async def test_cancelled_caller_does_not_lose_other_requests(tiny_model_dir):
    engine = HFEngine(tiny_model_dir)
    # long enough that the batch is surely still generating when `first` is cancelled (a
    # fixed sleep before cancelling made this depend on the machine's speed)
    params = SamplingParams(max_new_tokens=200, temperature=0.7, seed=2)
    first = asyncio.create_task(engine.generate(CONVS[:1], params))
    await asyncio.sleep(0)  # first becomes the leader of the batch
    second = asyncio.create_task(engine.generate(CONVS[1:2], params))
    await asyncio.sleep(0)
    first.cancel()
    (c,) = await asyncio.wait_for(second, 120)
    assert len(c.token_ids) == len(c.logprobs) > 0
    with pytest.raises(asyncio.CancelledError):
        await first
    assert engine._pending == []


async def test_generation_is_silent(engine, monkeypatch):
    """No deprecation warning and no transformers log line per generation (they reached the
    console of every `mlerl train`): the KV cache is passed under the name the installed
    transformers uses (``cache`` since 5.24, ``past_key_values`` before)."""
    import logging
    import warnings

    said: list[tuple] = []
    # transformers' `logger.warning_once` is memoised process-wide: record every call instead
    monkeypatch.setattr(
        logging.Logger, "warning_once", lambda self, *args, **kw: said.append(args), raising=False
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (out,) = await engine.generate(CONVS[:1], SamplingParams(max_new_tokens=4, temperature=0.0))
    assert (
        len(out.token_ids) >= 2 or out.finish_reason == "stop"
    )  # the cached step ran (or stopped)
    assert not [str(w.message) for w in caught]
    assert not said


def test_engines_built_in_several_threads_at_once_all_load_their_weights(tiny_model_dir):
    """Engines built in several threads at once each get the model's weights (transformers'
    loading alone is not thread-safe: without the engine's lock one of four came up empty)."""
    from concurrent.futures import ThreadPoolExecutor

    alone = HFEngine(tiny_model_dir).model.state_dict()
    for _ in range(3):
        with ThreadPoolExecutor(max_workers=4) as pool:
            engines = list(pool.map(lambda _: HFEngine(tiny_model_dir), range(4)))
        for e in engines:
            state = e.model.state_dict()
            assert state.keys() == alone.keys()
            assert all(torch.equal(state[k], alone[k]) for k in alone)
