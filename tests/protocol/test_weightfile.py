"""The one weight-update contract: the learner's publication loads into the HF engine (tied and
untied models) bit for bit, through the same module; bad files change nothing."""

from __future__ import annotations

import hashlib

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from mlerl.protocol import (  # noqa: E402
    WeightUpdate,
    WeightUpdateError,
    announce,
    encode_weights,
    load_into,
    read_update_bytes,
    tied_names,
)


def tiny(tied: bool, seed: int):
    torch.manual_seed(seed)
    cfg = transformers.Qwen2Config(
        vocab_size=64,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=32,
        tie_word_embeddings=tied,
    )
    return transformers.Qwen2ForCausalLM(cfg).eval()


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("inline", [True, False])
def test_learner_publication_loads_into_the_hf_engine_exactly(tmp_path, tied, inline):
    from mlerl.learner import publish_weights
    from mlerl.learner._publish import load_weight_update

    source, target = tiny(tied, 0), tiny(tied, 1)
    update = publish_weights(
        source, version=7, out_dir=tmp_path, inline_max_bytes=1 << 30 if inline else 0
    )
    assert update is not None and update.version == 7
    assert (update.uri == "inline") == inline
    from safetensors.torch import load

    names = set(load(read_update_bytes(update)))
    assert ("lm_head.weight" in names) == (not tied)  # the tied rule: left out when tied
    load_into(target, update)  # what the HF engine calls
    for (name, a), (_, b) in zip(source.state_dict().items(), target.state_dict().items()):
        assert torch.equal(a, b), name
    if tied:  # the head still follows the embedding after the load
        assert target.lm_head.weight.data_ptr() == target.model.embed_tokens.weight.data_ptr()
    other = tiny(tied, 2)
    load_weight_update(other, update)  # the learner's own loader is the same function
    assert torch.equal(other.model.embed_tokens.weight, source.model.embed_tokens.weight)


def test_bad_updates_change_nothing(tmp_path):
    model = tiny(True, 0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    good = announce(encode_weights(tiny(True, 3).state_dict(), tied_names(model.config)), 1)
    junk = b"not safetensors"
    cases = [
        (
            WeightUpdate(
                version=1,
                uri="inline",
                size_bytes=good.size_bytes,
                sha256="0" * 64,
                payload=good.payload,
            ),
            "sha256",
        ),
        (
            WeightUpdate(
                version=1,
                uri="inline",
                size_bytes=len(junk),
                sha256=hashlib.sha256(junk).hexdigest(),
                payload=junk,
            ),
            "safetensors",
        ),
        (announce(encode_weights({"model.norm.weight": torch.ones(3)}), 1), "missing"),
        (
            announce(encode_weights({**model.state_dict(), "bogus": torch.zeros(1)}), 1),
            "unexpected",
        ),
        (
            WeightUpdate(version=1, uri=str(tmp_path / "nope"), size_bytes=1, sha256="0" * 64),
            "cannot read",
        ),
        (WeightUpdate(version=1, uri="http://x/y", size_bytes=1, sha256="0" * 64), "scheme"),
    ]
    wrong_shape = dict(model.state_dict())
    wrong_shape["model.norm.weight"] = torch.ones(5)
    cases.append((announce(encode_weights(wrong_shape), 1), "shape"))
    for update, fragment in cases:
        with pytest.raises(WeightUpdateError, match=fragment):
            load_into(model, update)
        for k, v in model.state_dict().items():
            assert torch.equal(v, before[k]), (fragment, k)
