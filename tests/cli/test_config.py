"""Every shipped YAML composes into a valid TrainConfig; bad values fail naming the key."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

import mlerl.cli
from mlerl.cli._config import VERSION_BASE, TrainConfig, register, validate
from mlerl.protocol import ConfigError

CONF = Path(mlerl.cli.__file__).parent / "conf"
# A config group is a folder of YAML files, as Hydra reads it (`make install` writes __pycache__
# beside conf/__init__.py).
GROUPS = sorted(
    p.name
    for p in CONF.iterdir()
    if p.is_dir() and p.name != "experiment" and any(p.glob("*.yaml"))
)


def _compose(overrides: list[str]):
    register()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), **VERSION_BASE):
        return compose(config_name="train", overrides=overrides)


def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def test_every_group_has_options():
    assert set(GROUPS) == {
        "actors",
        "instrument",
        "learner",
        "logging",
        "model",
        "sandbox",
        "tasks",
    }
    for group in GROUPS:
        assert _options(group), group


@pytest.mark.parametrize(
    "group,option", [(g, o) for g in GROUPS for o in _options(g)], ids=lambda v: str(v)
)
def test_each_group_option_composes_and_validates(group: str, option: str):
    cfg = validate(_compose([f"{group}={option}"]))
    assert isinstance(cfg, TrainConfig)


@pytest.mark.parametrize("experiment", sorted(p.stem for p in (CONF / "experiment").glob("*.yaml")))
def test_each_experiment_composes(experiment: str):
    cfg = validate(_compose([f"+experiment={experiment}"]))
    assert isinstance(cfg, TrainConfig)


def test_default_is_the_embedded_cpu_run():
    cfg = validate(_compose([]))
    assert cfg.model.path == ""  # the embedded policy
    assert cfg.sandbox.backend == "local"
    assert cfg.actors.engine == "hf"
    assert all(t.endswith("-tiny") for t in cfg.tasks.ids)


def test_paper_scale_matches_the_paper():
    cfg = validate(_compose(["+experiment=paper_scale"]))
    assert cfg.learner.batch_size == 128 and cfg.learner.lr == pytest.approx(1e-5)
    assert cfg.learner.clip_ratio == pytest.approx(0.2) and cfg.learner.kl_coef == pytest.approx(
        1e-3
    )
    assert cfg.learner.entropy_coef == pytest.approx(1e-3) and cfg.learner.grad_clip == 1.0
    assert (
        cfg.learner.advantage.value == "gae" and cfg.learner.gamma == 1.0 and cfg.learner.lam == 1.0
    )
    assert cfg.learner.duration_weighting.value == "paper"
    assert cfg.learner_procs == 8 and cfg.sandbox.backend == "docker"
    assert cfg.actors.engine == "vllm" and cfg.actors.temperature == pytest.approx(0.7)
    assert cfg.actors.max_new_tokens == 1024
    assert len(cfg.tasks.ids) == 12 and cfg.instrument.mode == "lm"


def test_the_edit_revisions_experiment_and_the_improve_formats_of_the_presets():
    default = validate(_compose([]))
    # the embedded default revises with edits (settings-block programs); the paper's
    # full rewrite is the paper preset's and the legacy bootstrap's
    assert (
        default.actors.prompts.improve_format == "edit"
        and default.actors.improvement.revisions == 1
    )
    assert validate(_compose(["actors=paper"])).actors.prompts.improve_format == "rewrite"
    legacy = validate(_compose(["+experiment=legacy_bootstrap"]))
    assert legacy.actors.prompts.improve_format == "rewrite"
    assert legacy.model.bootstrap.shape == "legacy"
    cfg = validate(_compose(["+experiment=edit_revisions"]))
    assert cfg.actors.prompts.improve_format == "edit" and cfg.actors.improvement.revisions == 4
    assert (
        cfg.model.bootstrap.improves_per_task == 48
        and cfg.model.bootstrap.fix_share == pytest.approx(0.25)
    )
    # the revisions of one parent form the group; nothing else changes
    assert (
        default.learner.advantage.value == "grpo" and default.learner.improve_group.value == "task"
    )
    assert cfg.learner.improve_group.value == "prompt"
    assert (
        dataclasses.replace(cfg.learner, improve_group=default.learner.improve_group)
        == default.learner
    )
    assert cfg.tasks == default.tasks


def test_the_default_bootstrap_writes_settings_programs_and_the_legacy_one_stays_reachable():
    default = validate(_compose([]))
    assert (
        default.model.bootstrap.shape == "settings"
        and default.model.bootstrap.drafts_per_task == 3000
    )
    legacy = validate(_compose(["+experiment=legacy_bootstrap"]))
    boot = legacy.model.bootstrap
    assert (
        boot.shape,
        boot.drafts_per_task,
        boot.improves_per_task,
        boot.instruments_per_task,
    ) == ("legacy", 32, 12, 6)
    # the legacy bootstrap answered improve prompts with rewrites; nothing else of the actors
    # or the tasks differs
    assert legacy.tasks == default.tasks and legacy.actors.prompts.improve_format == "rewrite"
    legacy.actors.prompts.improve_format = "edit"
    assert legacy.actors == default.actors


def test_admission_may_not_count_more_executions_than_the_sandbox_runs():
    """One owner for "programs at once": sandbox.max_concurrency; the admission may use fewer."""
    assert (
        validate(_compose(["actors.admission.max_in_flight=1"])).actors.admission.max_in_flight == 1
    )
    with pytest.raises(
        ConfigError, match=r"actors.admission.max_in_flight: 3 exceeds sandbox.max_concurrency=2"
    ):
        validate(_compose(["actors.admission.max_in_flight=3"]))
    cfg = validate(_compose(["actors.admission.max_in_flight=3", "sandbox.max_concurrency=3"]))
    assert cfg.sandbox.max_concurrency == cfg.actors.admission.max_in_flight == 3
    paper = validate(_compose(["+experiment=paper_scale"]))
    assert paper.sandbox.max_concurrency == paper.actors.admission.max_in_flight == 32


def test_wrong_type_names_the_key():
    with pytest.raises(Exception) as info:
        validate(_compose(["learner.batch_size=lots"]))
    assert "learner.batch_size" in str(info.value)


def test_out_of_range_names_the_key():
    with pytest.raises(ConfigError) as info:
        validate(_compose(["learner.clip_ratio=1.5"]))
    assert info.value.key == "learner.clip_ratio"


def test_nested_out_of_range_names_the_full_key():
    with pytest.raises(ConfigError) as info:
        validate(_compose(["actors.admission.oversample=0.5"]))
    assert info.value.key == "actors.admission.oversample"


def test_unknown_enum_value_names_the_key_and_the_choices():
    with pytest.raises(Exception) as info:
        validate(_compose(["learner.duration_weighting=fastest"]))
    assert "learner.duration_weighting" in str(info.value)
    assert "paper" in str(info.value.__cause__)  # the cause lists the valid choices


def test_unknown_task_fails_at_start_naming_the_key(tmp_path):
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mlerl.cli",
            "train",
            f"hydra.run.dir={tmp_path}",
            "tasks.ids=[no-such-task]",
            f"tasks.data_dir={tmp_path / 'data'}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    assert "tasks.ids" in done.stderr and "no-such-task" in done.stderr


def test_sampling_parameters_have_one_owner_the_actors_section(tmp_path):
    """`actors.temperature` is the only temperature: the learner has none to disagree with (it
    scores each sample at the temperature the sample carries), so `learner.temperature=...` is
    refused instead of silently lost, and an `actors.temperature` override reaches the actors."""
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException, match="temperature"):
        _compose(["learner.temperature=0.5"])
    cfg = validate(_compose(["actors.temperature=0.5"]))
    assert cfg.actors.temperature == pytest.approx(0.5)
    assert cfg.actors.sampling(seed=0).temperature == pytest.approx(0.5)
    assert not hasattr(cfg.learner, "temperature")


def test_embedded_default_is_a_floored_group_baseline_and_embedded_gae_the_previous_default():
    """`learner=embedded` (the default) scores each program against its siblings (GRPO, std
    floored at 0.01, no batch whitening, no critic, lr 2.5e-4); `learner=embedded_gae` is the
    previous default (GAE critic, whitened, lr 5e-5) and differs from it only in those keys."""
    base, gae = validate(_compose([])).learner, validate(_compose(["learner=embedded_gae"])).learner
    assert (
        base.advantage.value == "grpo"
        and base.grpo_std
        and base.grpo_std_floor == pytest.approx(0.01)
    )
    assert base.critic.value == "none" and not base.normalize_advantages
    assert base.lr == pytest.approx(2.5e-4)
    changed = {
        f.name for f in dataclasses.fields(base) if getattr(base, f.name) != getattr(gae, f.name)
    }
    assert changed == {
        "advantage",
        "grpo_std",
        "grpo_std_floor",
        "critic",
        "normalize_advantages",
        "lr",
        "critic_lr",
    }
    assert gae.advantage.value == "gae" and gae.critic.value == "copy" and gae.normalize_advantages
    assert (
        gae.grpo_std_floor == 0.0
        and gae.lr == pytest.approx(5e-5)
        and gae.critic_lr == pytest.approx(1e-4)
    )
