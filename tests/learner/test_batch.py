"""`collate` + `token_logprobs`: the learner's scores equal a plain full-logits computation."""

from __future__ import annotations

import pytest
import torch

from mlerl.learner._batch import VARLEN_ATTENTION, collate, token_logprobs, use_varlen_attention


def _reference(model, batch, temperature):
    """log-probs and entropies from the model's logits at every position (no shortcuts)."""
    logits = (
        model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, :-1]
        / temperature
    )
    logp = torch.log_softmax(logits.float(), dim=-1)
    chosen = logp.gather(-1, batch.input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    entropy = -(logp.exp() * logp).sum(-1)
    return chosen, entropy


def test_logprobs_on_response_positions_match_the_full_computation(tiny_model, make_sample):
    model = tiny_model().eval()
    # rows with different prompt lengths: the LM head starts at the earliest response position
    samples = [
        make_sample(prompt_len=9, response_len=3),
        make_sample(prompt_len=5, response_len=6),
        make_sample(prompt_len=12, response_len=2),
    ]
    batch = collate(samples)
    with torch.no_grad():
        logprobs, entropy = token_logprobs(model, batch, with_entropy=True, temperature=0.7)
        want_lp, want_ent = _reference(model, batch, 0.7)
    mask = batch.mask.bool()
    assert logprobs.shape == entropy.shape == batch.mask.shape
    assert int(mask.sum()) == 3 + 6 + 2
    torch.testing.assert_close(logprobs[mask], want_lp[mask], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(entropy[mask], want_ent[mask], rtol=1e-5, atol=1e-5)
    assert torch.all(
        logprobs[:, :4] == 0
    )  # before the first response position (5 - 1): not computed


def test_gradients_flow_only_through_response_positions(tiny_model, make_sample):
    model = tiny_model()
    batch = collate([make_sample(prompt_len=6, response_len=4)])
    logprobs, _ = token_logprobs(model, batch)
    (logprobs * batch.mask).sum().backward()
    assert model.model.embed_tokens.weight.grad.abs().sum() > 0


def _grads(model):
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("chunk", [None, 3])
def test_packed_chunked_head_equals_padded_full_logits(tiny_model, make_sample, chunk):
    """Packed rows (varlen attention) + the chunked response-only head give the log-probs,
    entropies and parameter gradients of the padded full-logits computation."""
    samples = [
        make_sample(prompt_len=9, response_len=3),
        make_sample(prompt_len=5, response_len=6),
        make_sample(prompt_len=12, response_len=2),
    ]
    batch = collate(samples)
    mask = batch.mask.bool()
    g = torch.randn(batch.mask.shape, generator=torch.Generator().manual_seed(0))
    plain = tiny_model()
    want_lp, want_ent = _reference(plain, batch, 0.7)
    ((want_lp * g + want_ent * g.flip(0)) * batch.mask).sum().backward()
    packed = tiny_model()
    assert use_varlen_attention(packed) and packed.config._attn_implementation == VARLEN_ATTENTION
    lp, ent = token_logprobs(packed, batch, with_entropy=True, temperature=0.7, chunk=chunk)
    ((lp * g + ent * g.flip(0)) * batch.mask).sum().backward()
    torch.testing.assert_close(lp[mask], want_lp[mask], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ent[mask], want_ent[mask], rtol=1e-5, atol=1e-5)
    assert torch.all(lp[~mask] == 0) and torch.all(ent[~mask] == 0)
    want, got = _grads(plain), _grads(packed)
    assert want.keys() == got.keys()
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=1e-4, atol=1e-6, msg=name)


def test_varlen_attention_without_packing_is_sdpa(tiny_model, make_sample):
    batch = collate(
        [make_sample(prompt_len=4, response_len=5), make_sample(prompt_len=7, response_len=2)]
    )
    plain, varlen = tiny_model().eval(), tiny_model().eval()
    use_varlen_attention(varlen)
    with torch.no_grad():
        a = plain(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
        b = varlen(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    assert torch.equal(a, b)


@pytest.mark.parametrize("pack", [False, True])
def test_each_sample_is_scored_at_the_temperature_it_was_sampled_with(
    tiny_model, make_sample, pack
):
    """The sampling temperature travels on the Sample: a batch mixing 0.5, 1.0 and 0.5 gives
    each row the log-probs of its own logits / T, not of a learner-wide setting."""
    import msgspec

    rows = [
        make_sample(prompt_len=9, response_len=3),
        make_sample(prompt_len=5, response_len=6),
        make_sample(prompt_len=7, response_len=4),
    ]
    rows = [msgspec.structs.replace(s, temperature=t) for s, t in zip(rows, (0.5, 1.0, 0.5))]
    batch = collate(rows)
    assert batch.temperature.tolist() == [0.5, 1.0, 0.5]
    model = tiny_model().eval()
    if pack:
        use_varlen_attention(model)
    with torch.no_grad():
        lp, ent = token_logprobs(model, batch, with_entropy=True)
        want = {t: _reference(model, batch, t) for t in (0.5, 1.0)}
    mask = batch.mask.bool()
    for i, t in enumerate((0.5, 1.0, 0.5)):
        torch.testing.assert_close(lp[i][mask[i]], want[t][0][i][mask[i]], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(ent[i][mask[i]], want[t][1][i][mask[i]], rtol=1e-5, atol=1e-5)
    # and they differ from scoring everything at one temperature
    assert not torch.allclose(lp[0][mask[0]], want[1.0][0][0][mask[0]], atol=1e-3)
    one = collate(rows[1:2])
    with torch.no_grad():
        alone, _ = token_logprobs(model, one)
    torch.testing.assert_close(alone[0][one.mask[0].bool()], lp[1][mask[1]], rtol=1e-5, atol=1e-5)


def test_gradients_flow_through_a_mixed_temperature_batch(tiny_model, make_sample):
    import msgspec

    rows = [
        msgspec.structs.replace(make_sample(prompt_len=4, response_len=3), temperature=t)
        for t in (0.7, 1.3)
    ]
    model = tiny_model()
    batch = collate(rows)
    lp, _ = token_logprobs(model, batch)
    (lp * batch.mask).sum().backward()
    assert model.model.embed_tokens.weight.grad.abs().sum() > 0
