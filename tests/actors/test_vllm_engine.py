"""VLLMEngine against vLLM's CPU build. Run in the vLLM venv:
``.venv-vllm/bin/python -m pytest -m vllm tests/actors`` (``scripts/ci/setup_vllm.sh`` makes it)."""

import pytest
import torch

pytest.importorskip("vllm", reason="vLLM runs in .venv-vllm: make test-vllm")

from mlerl.protocol import announce, encode_weights, tied_names  # noqa: E402
from mlerl.protocol import ChatMessage, SamplingParams  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

CONVS = [[ChatMessage(role="user", content=f"Train a model, attempt {i}")] for i in range(3)]
PARAMS = SamplingParams(max_new_tokens=16, temperature=0.7, seed=11)


def _engine(model_dir):
    from mlerl.actors import VLLMEngine

    return VLLMEngine(model_dir, dtype="float32", max_model_len=512)


def _rescore(model, prompt_ids, token_ids, temperature):
    ids = torch.tensor([prompt_ids + token_ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0]
    start = len(prompt_ids) - 1
    logp = torch.log_softmax(logits[start : start + len(token_ids)] / temperature, dim=-1)
    return logp.gather(-1, torch.tensor(token_ids)[:, None])[:, 0].tolist()


@pytest.fixture(scope="module")
def perturbed(tiny_model_dir, tmp_path_factory):
    """A second model directory: the tiny model with perturbed weights, and its state dict."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=gen))
    out = tmp_path_factory.mktemp("perturbed")
    model.save_pretrained(out)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        if (tiny_model_dir / name).exists():
            (out / name).write_bytes((tiny_model_dir / name).read_bytes())
    return out, model


async def test_generate_then_reload_matches_fresh_engine(tiny_model_dir, perturbed):
    new_dir, new_model = perturbed
    engine = _engine(tiny_model_dir)
    try:
        before = await engine.generate(CONVS, PARAMS)
        for c in before:
            assert len(c.token_ids) == len(c.logprobs) > 0
            assert c.finish_reason in ("stop", "length")
        # the behaviour log-probs are those of log_softmax(logits / T) (same as HFEngine)
        from transformers import AutoModelForCausalLM

        old_model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
        assert before[0].logprobs == pytest.approx(
            _rescore(old_model, before[0].prompt_ids, before[0].token_ids, 0.7), abs=2e-3
        )
        await engine.update_weights(
            announce(
                encode_weights(new_model.state_dict(), tied_names(new_model.config)), version=4
            )
        )
        assert engine.policy_version == 4
        reloaded = await engine.generate(CONVS, PARAMS)
    finally:
        await engine.close()
    # With a stale lm_head (the CPU quirk), these log-probs would be those of the old weights.
    assert reloaded[0].logprobs == pytest.approx(
        _rescore(new_model, reloaded[0].prompt_ids, reloaded[0].token_ids, 0.7), abs=2e-3
    )
    fresh = _engine(new_dir)
    try:
        expected = await fresh.generate(CONVS, PARAMS)
    finally:
        await fresh.close()
    for got, want in zip(reloaded, expected):
        assert got.token_ids == want.token_ids
        assert got.logprobs == pytest.approx(want.logprobs, abs=1e-4)
