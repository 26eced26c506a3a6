"""`collate` + `token_logprobs`: the learner's scores equal a plain full-logits computation."""

from __future__ import annotations

import torch

from mlerl.learner._batch import collate, token_logprobs


def _reference(model, batch, temperature):
    """log-probs and entropies from the model's logits at every position (no shortcuts)."""
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, :-1] / temperature
    logp = torch.log_softmax(logits.float(), dim=-1)
    chosen = logp.gather(-1, batch.input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    entropy = -(logp.exp() * logp).sum(-1)
    return chosen, entropy


def test_logprobs_on_response_positions_match_the_full_computation(tiny_model, make_sample):
    model = tiny_model().eval()
    # rows with different prompt lengths: the LM head starts at the earliest response position
    samples = [make_sample(prompt_len=9, response_len=3), make_sample(prompt_len=5, response_len=6),
               make_sample(prompt_len=12, response_len=2)]
    batch = collate(samples)
    with torch.no_grad():
        logprobs, entropy = token_logprobs(model, batch, with_entropy=True, temperature=0.7)
        want_lp, want_ent = _reference(model, batch, 0.7)
    mask = batch.mask.bool()
    assert logprobs.shape == entropy.shape == batch.mask.shape
    assert int(mask.sum()) == 3 + 6 + 2
    torch.testing.assert_close(logprobs[mask], want_lp[mask], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(entropy[mask], want_ent[mask], rtol=1e-5, atol=1e-5)
    assert torch.all(logprobs[:, :4] == 0)  # before the first response position (5 - 1): not computed


def test_gradients_flow_only_through_response_positions(tiny_model, make_sample):
    model = tiny_model()
    batch = collate([make_sample(prompt_len=6, response_len=4)])
    logprobs, _ = token_logprobs(model, batch)
    (logprobs * batch.mask).sum().backward()
    assert model.model.embed_tokens.weight.grad.abs().sum() > 0
