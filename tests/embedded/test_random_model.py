"""Random real-size models: the published Qwen2.5 configs, and a tiny build that loads everywhere."""

import json

import pytest
import torch

from mlerl.embedded import ARCHITECTURES, architecture_config, build_random_model
from mlerl.embedded.__main__ import main as embedded_main

# From the published config.json of Qwen/Qwen2.5-0.5B-Instruct and Qwen/Qwen2.5-3B-Instruct.
PUBLISHED = {
    "qwen2.5-0.5b": dict(
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        vocab_size=151936,
        tie_word_embeddings=True,
    ),
    "qwen2.5-3b": dict(
        hidden_size=2048,
        intermediate_size=11008,
        num_hidden_layers=36,
        num_attention_heads=16,
        num_key_value_heads=2,
        vocab_size=151936,
        tie_word_embeddings=True,
    ),
}
# The model cards' parameter counts (0.49 B and 3.09 B), exactly: embeddings tied, q/k/v biases.
PARAMS = {"qwen2.5-0.5b": 494_032_768, "qwen2.5-3b": 3_085_938_688}


@pytest.mark.parametrize("arch", sorted(PUBLISHED))
def test_architecture_is_the_published_one(arch):
    config = architecture_config(arch)
    for key, value in PUBLISHED[arch].items():
        assert getattr(config, key) == value, key
    assert (
        config.hidden_size // config.num_attention_heads
        == {"qwen2.5-0.5b": 64, "qwen2.5-3b": 128}[arch]
    )
    assert config.rms_norm_eps == 1e-6 and config.max_position_embeddings == 32768
    rope = getattr(config, "rope_parameters", None) or {"rope_theta": config.rope_theta}
    assert rope["rope_theta"] == 1_000_000.0
    from transformers import Qwen2ForCausalLM

    with torch.device("meta"):  # counts the parameters without allocating them
        model = Qwen2ForCausalLM(config)
    assert model.num_parameters() == PARAMS[arch]


def test_unknown_architecture_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown architecture 'qwen9'"):
        build_random_model("qwen9", tmp_path / "m")
    assert not (tmp_path / "m").exists()


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("random") / "tiny"
    assert embedded_main(["random", "tiny", "--out", str(out), "--seed", "3"]) == 0
    return out


def test_tiny_build_loads_with_a_tokenizer_of_the_model_vocabulary(tiny_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    vocab = ARCHITECTURES["tiny"]["vocab_size"]
    assert model.config.vocab_size == vocab == len(tok)
    assert model.dtype == torch.bfloat16 and model.config.tie_word_embeddings
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    # every id the model can sample decodes; the padding entries are never produced by encoding
    assert tok.decode([vocab - 1]) == f"<|unused_{vocab - 1 - vocab // 2}|>"
    text = "def f(x):\n    return x + 1\n"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert max(ids) < vocab // 2 and tok.decode(ids) == text
    chat = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False
    )
    assert chat == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert (
        tok.eos_token == "<|im_end|>" and model.generation_config.eos_token_id == tok.eos_token_id
    )
    out = model.generate(
        torch.tensor([tok(chat)["input_ids"]]),
        max_new_tokens=4,
        do_sample=True,
        pad_token_id=tok.pad_token_id,
    )
    assert out.shape[1] > len(tok(chat)["input_ids"])
    manifest = json.loads((tiny_dir / "random_model.json").read_text())
    assert (
        manifest["arch"] == "tiny"
        and manifest["seed"] == 3
        and manifest["params"] == model.num_parameters()
    )


def test_same_request_reuses_the_directory_and_another_seed_rebuilds_it(tiny_dir):
    from safetensors.torch import load_file

    before = load_file(tiny_dir / "model.safetensors")
    stamp = (tiny_dir / "random_model.json").read_text()
    logs: list[str] = []
    assert build_random_model("tiny", tiny_dir, seed=3, log=logs.append) == tiny_dir
    assert (
        logs == [f"random model: reusing {tiny_dir}"]
        and (tiny_dir / "random_model.json").read_text() == stamp
    )
    build_random_model("tiny", tiny_dir, seed=4, log=logs.append)
    after = load_file(tiny_dir / "model.safetensors")
    assert before.keys() == after.keys()
    assert not torch.equal(
        before["model.layers.0.mlp.up_proj.weight"], after["model.layers.0.mlp.up_proj.weight"]
    )
    assert json.loads((tiny_dir / "random_model.json").read_text())["seed"] == 4
    assert [p.name for p in tiny_dir.parent.iterdir()] == [
        "tiny"
    ]  # no temporary directory left behind
