"""build_policy: a loadable HF model directory, cached by corpus + config."""

import json

import pytest

from mlerl.embedded import BootstrapConfig, build_policy, read_manifest
from mlerl.embedded._model import answer_loss, encode_example
from mlerl.protocol import ConfigError

TINY = dict(
    task_ids=["standin-cancer-auc-tiny", "standin-tweets-jaccard-tiny"],
    shape="legacy",
    drafts_per_task=4,
    improves_per_task=2,
    instruments_per_task=1,
    vocab_size=700,
    hidden_size=32,
    num_layers=1,
    num_heads=2,
    num_kv_heads=1,
    intermediate_size=64,
    sft_steps=3,
    sft_seconds=600,
    batch_tokens=8192,
    max_len=4096,
)


@pytest.fixture(scope="module")
def built(tmp_path_factory, data_dir):
    cache = tmp_path_factory.mktemp("cache")
    logs: list[str] = []
    path = build_policy(cache, BootstrapConfig(**TINY), data_dir=data_dir, log=logs.append)
    return cache, path, logs


def test_build_writes_loadable_model_with_manifest(built):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _, path, _ = built
    manifest = read_manifest(path)
    assert manifest["key"] == path.name and manifest["steps"] == 3
    assert len(manifest["loss_curve"]) == 3 and manifest["examples_dropped"] == 0
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    ids = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )["input_ids"]
    out = model.generate(ids, max_new_tokens=5, do_sample=False, pad_token_id=tok.pad_token_id)
    assert out.shape[1] <= ids.shape[1] + 5
    assert tok.eos_token_id == model.generation_config.eos_token_id
    assert isinstance(torch.load, object)


def test_second_build_is_a_cache_hit(built, data_dir):
    cache, path, _ = built
    before = (path / "manifest.json").read_text()
    logs: list[str] = []
    again = build_policy(cache, BootstrapConfig(**TINY), data_dir=data_dir, log=logs.append)
    assert again == path and (path / "manifest.json").read_text() == before
    assert any("cache hit" in line for line in logs)


def test_other_config_gets_another_key(built):
    _, path, _ = built
    manifest = read_manifest(path)
    other = BootstrapConfig(**{**TINY, "sft_steps": 4})
    assert other.key(manifest["corpus_hash"]) != path.name
    assert BootstrapConfig(**TINY).key(manifest["corpus_hash"]) == path.name


def test_a_real_outputs_build_runs_each_improve_parent_in_the_sandbox(built, data_dir, tmp_path):
    """`real_outputs` runs the parents (the default corpus keys the cache) and gets its own key."""
    _, path, _ = built
    logs: list[str] = []
    out = build_policy(
        tmp_path, BootstrapConfig(**TINY, real_outputs=True), data_dir=data_dir, log=logs.append
    )
    assert out.name != path.name and read_manifest(out)["steps"] == 3
    assert any("ran the 4 improve parents for their terminal output" in line for line in logs), logs


def test_a_directory_with_a_foreign_manifest_is_rebuilt(built, data_dir, tmp_path):
    _, path, _ = built
    fake = tmp_path / path.name
    fake.mkdir()
    (fake / "manifest.json").write_text(json.dumps({"key": "something-else"}))
    logs: list[str] = []
    out = build_policy(tmp_path, BootstrapConfig(**TINY), data_dir=data_dir, log=logs.append)
    assert out == fake and read_manifest(out)["key"] == path.name
    assert not any("cache hit" in line for line in logs)


def test_answer_loss_matches_hf_loss_on_answer_tokens():
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=50,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            intermediate_size=32,
            tie_word_embeddings=True,
        )
    )
    ids = torch.randint(0, 50, (2, 9))
    labels = ids.clone()
    labels[:, :4] = -100  # prompt
    labels[1, 7:] = -100  # padding of row 1
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    ours = answer_loss(torch, model, ids, labels, mask)
    ref = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    assert torch.allclose(ours, ref, atol=1e-5)


def test_encode_masks_the_prompt(built, views):
    from transformers import AutoTokenizer

    from mlerl.embedded import generate_corpus

    _, path, _ = built
    tok = AutoTokenizer.from_pretrained(path)
    ex = generate_corpus(views[:1], drafts_per_task=1, improves_per_task=0, instruments_per_task=0)[
        0
    ]
    ids, labels = encode_example(tok, ex)
    answer = [t for t in labels if t != -100]
    assert tok.decode(answer) == ex.answer + "<|im_end|>"
    assert labels[: len(ids) - len(answer)] == [-100] * (len(ids) - len(answer))


def test_config_rejects_bad_values():
    with pytest.raises(ConfigError):
        BootstrapConfig(mistake_rate=2.0)
    with pytest.raises(ConfigError):
        BootstrapConfig(hidden_size=30, num_heads=4)


def test_sft_tokenizer_is_the_one_engines_load(tmp_path):
    """The saved tokenizer encodes the training examples exactly as SFT did (a regression:
    AutoTokenizer picks Qwen2's tokenizer class from config.json, which tokenizes differently
    from the freshly trained wrapper)."""
    from transformers import AutoTokenizer, Qwen2Config

    from mlerl.embedded._model import _as_loaded, encode_example, new_model
    from mlerl.embedded._tokenizer import train_tokenizer
    from mlerl.embedded import BootstrapConfig

    texts = [
        "import pandas as pd\ntrain = pd.read_csv('input/train.csv')\nx = 12345 + 0.678\n    y  =  x\n"
        * 40
    ]
    tok = train_tokenizer(texts, 600)
    model = new_model(
        tok,
        BootstrapConfig(
            vocab_size=600,
            hidden_size=32,
            num_layers=1,
            num_heads=2,
            num_kv_heads=1,
            intermediate_size=32,
        ),
    )
    tok = _as_loaded(tok, model.config)
    tok.save_pretrained(tmp_path)
    model.config.save_pretrained(tmp_path)
    reloaded = AutoTokenizer.from_pretrained(tmp_path)

    class Ex:
        # digits and runs of spaces are where Qwen2's pre-tokenizer differs from plain byte-level
        answer = "I will read the data.\n```python\nx = 12345 + 0.678\n    y  =  x\n```"

        @staticmethod
        def chat():
            return [
                {"role": "system", "content": "You are given a task."},
                {"role": "user", "content": "Solve it.\ntrain = pd.read_csv('input/train.csv')"},
            ]

    assert encode_example(tok, Ex) == encode_example(reloaded, Ex)


def test_sft_seconds_is_not_in_the_key(built):
    _, path, _ = built
    manifest = read_manifest(path)
    assert (
        BootstrapConfig(**{**TINY, "sft_seconds": 5000}).key(manifest["corpus_hash"]) == path.name
    )


def test_a_time_capped_build_is_not_reused(built, data_dir, tmp_path):
    cache, path, _ = built
    capped = BootstrapConfig(**{**TINY, "sft_seconds": 0.0})  # the guard stops SFT before step 1
    logs: list[str] = []
    first = build_policy(tmp_path, capped, data_dir=data_dir, log=logs.append)
    assert first.name == path.name and read_manifest(first)["steps"] == 0
    assert any("WARNING" in line for line in logs)
    logs.clear()
    again = build_policy(tmp_path, BootstrapConfig(**TINY), data_dir=data_dir, log=logs.append)
    assert not any("cache hit" in line for line in logs) and any(
        "rebuilding" in line for line in logs
    )
    assert read_manifest(again)["steps"] == 3


def _reference_of(built, tmp_path, **manifest_changes):
    """A reference directory holding a copy of the built policy (its manifest changed)."""
    import shutil

    _, path, _ = built
    shipped = tmp_path / "reference" / path.name
    shutil.copytree(path, shipped)
    manifest = {**read_manifest(path), **manifest_changes}
    (shipped / "manifest.json").write_text(json.dumps(manifest))
    return shipped


def test_a_cache_miss_takes_the_reference_build_of_its_key(built, data_dir, tmp_path):
    shipped = _reference_of(built, tmp_path)
    logs: list[str] = []
    cache = tmp_path / "cache"
    out = build_policy(
        cache, BootstrapConfig(**TINY), data_dir=data_dir, log=logs.append, reference=shipped.parent
    )
    assert out == cache / shipped.name
    assert (out / "model.safetensors").read_bytes() == (shipped / "model.safetensors").read_bytes()
    assert any("reference build" in line for line in logs)
    assert not any("training up to" in line for line in logs)  # no SFT ran
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # no temporary left
    # now a cache hit, whatever the reference holds
    logs.clear()
    again = build_policy(cache, BootstrapConfig(**TINY), data_dir=data_dir, log=logs.append)
    assert again == out and any("cache hit" in line for line in logs)


@pytest.mark.parametrize("change", [{"steps": 1}, {"key": "0123456789abcdef"}])
def test_an_unfinished_or_foreign_reference_build_is_not_taken(built, data_dir, tmp_path, change):
    shipped = _reference_of(built, tmp_path, **change)
    logs: list[str] = []
    out = build_policy(
        tmp_path / "cache",
        BootstrapConfig(**TINY),
        data_dir=data_dir,
        log=logs.append,
        reference=shipped.parent,
    )
    assert any("training up to" in line for line in logs)
    assert read_manifest(out)["key"] == shipped.name and read_manifest(out)["steps"] == 3


def test_no_reference_builds_here(built, data_dir, tmp_path):
    shipped = _reference_of(built, tmp_path)
    logs: list[str] = []
    build_policy(
        tmp_path / "cache",
        BootstrapConfig(**TINY),
        data_dir=data_dir,
        log=logs.append,
        reference=None,
    )
    assert not any("reference build" in line for line in logs)
    assert any("training up to" in line for line in logs) and shipped.is_dir()
