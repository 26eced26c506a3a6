"""VLLMEngine on CUDA with the random Qwen2.5-0.5B (bf16, the paper-scale engine settings):
generate, take an in-place weight update, then sample exactly like a freshly loaded engine.

Mirrors test_vllm_engine.py (vLLM's CPU build) on a GPU. Skipped without CUDA
(tests/conftest.py); on a GPU machine vLLM must be installed in this venv
(``pip install -e 'packages/actors[vllm]'``), else the test fails saying so."""

import pytest
import torch

from mlerl.protocol import ChatMessage, SamplingParams, announce, encode_weights, tied_names

pytestmark = [pytest.mark.gpu, pytest.mark.vllm, pytest.mark.slow]

CONVS = [[ChatMessage(role="user", content=f"Train a model, attempt {i}")] for i in range(4)]
PARAMS = SamplingParams(max_new_tokens=32, temperature=0.7, seed=11)
_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "generation_config.json",
)


def _engine(model_dir):
    try:
        from mlerl.actors import VLLMEngine
        import vllm  # noqa: F401
    except ImportError as exc:
        pytest.fail(
            f"vLLM is not installed in this venv ({exc}): pip install -e 'packages/actors[vllm]'"
        )
    return VLLMEngine(model_dir, dtype="bfloat16", max_model_len=1024, gpu_memory_utilization=0.3)


def _rescore(model, prompt_ids, token_ids, temperature):
    ids = torch.tensor([prompt_ids + token_ids], device=model.device)
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()
    start = len(prompt_ids) - 1
    logp = torch.log_softmax(logits[start : start + len(token_ids)] / temperature, dim=-1)
    return logp.gather(-1, torch.tensor(token_ids, device=model.device)[:, None])[:, 0].tolist()


@pytest.fixture(scope="module")
def perturbed(random_qwen25_05b, tmp_path_factory):
    """The random 0.5B with every weight perturbed by noise of its init scale, saved next to its
    tokenizer, and the perturbed model (fp32, CPU)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(random_qwen25_05b, dtype=torch.float32)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=gen))
    out = tmp_path_factory.mktemp("perturbed")
    model.save_pretrained(out)
    for name in _FILES:
        if (random_qwen25_05b / name).exists():
            (out / name).write_bytes((random_qwen25_05b / name).read_bytes())
    return out, model


async def test_generate_then_reload_on_cuda_matches_fresh_engine(random_qwen25_05b, perturbed):
    new_dir, new_model = perturbed
    engine = _engine(random_qwen25_05b)
    try:
        before = await engine.generate(CONVS, PARAMS)
        for c in before:
            assert len(c.token_ids) == len(c.logprobs) > 0 and all(lp <= 0 for lp in c.logprobs)
            assert c.finish_reason in ("stop", "length")
        await engine.update_weights(
            announce(
                encode_weights(new_model.state_dict(), tied_names(new_model.config)), version=4
            )
        )
        assert engine.policy_version == 4
        reloaded = await engine.generate(CONVS, PARAMS)
    finally:
        await engine.close()
    assert [c.token_ids for c in reloaded] != [
        c.token_ids for c in before
    ]  # the update changed the policy
    fresh = _engine(new_dir)
    try:
        expected = await fresh.generate(CONVS, PARAMS)
    finally:
        await fresh.close()
    for got, want in zip(reloaded, expected):
        assert got.token_ids == want.token_ids
        assert got.logprobs == pytest.approx(want.logprobs, abs=1e-3)
    # the behaviour log-probs are log_softmax(logits / T) of the new weights (what the learner
    # scores): bf16 in vLLM against fp32 here, so compared on average; stale weights miss by ~0.5
    scorer = new_model.to("cuda")
    diffs = [
        abs(a - b)
        for c in reloaded
        for a, b in zip(c.logprobs, _rescore(scorer, c.prompt_ids, c.token_ids, PARAMS.temperature))
    ]
    assert sum(diffs) / len(diffs) < 0.05, max(diffs)
