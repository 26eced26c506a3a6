"""The embedded policy that `make train` uses ships with mlerl-embedded: its key is the default
run's, and the default configuration still reproduces the corpus and the configuration it was
built from (a change to either needs a new reference build: docs/embedded.md)."""

from __future__ import annotations

import json
from dataclasses import asdict

from mlerl.cli._config import validate
from mlerl.cli._progress import Progress
from mlerl.cli._train import _prepare_tasks, fill_bootstrap
from mlerl.embedded import REFERENCE, corpus_for, corpus_hash, read_manifest

from .test_config import _compose


def test_the_default_run_takes_a_shipped_reference_build_built_from_its_config(tmp_path):
    train = validate(_compose([f"tasks.data_dir={tmp_path}"]))
    data_dir = _prepare_tasks(train, Progress(tmp_path, enabled=False))
    boot = fill_bootstrap(train, data_dir)
    chash = corpus_hash(corpus_for(boot, data_dir))
    key = boot.key(chash)
    manifest = read_manifest(REFERENCE / key)
    assert manifest is not None, f"no reference build for the default key {key} in {REFERENCE}"
    assert manifest["key"] == key and manifest["steps"] >= boot.sft_steps
    assert manifest["corpus_hash"] == chash
    # the build's whole configuration, as JSON, is today's (sft_seconds, a guard, aside)
    built = {k: v for k, v in manifest["config"].items() if k != "sft_seconds"}
    today = {k: v for k, v in json.loads(json.dumps(asdict(boot))).items() if k != "sft_seconds"}
    assert built == today
    # every shipped build is a complete model directory
    for shipped in REFERENCE.iterdir():
        files = {p.name for p in shipped.iterdir()}
        assert {"config.json", "model.safetensors", "tokenizer.json", "manifest.json"} <= files
