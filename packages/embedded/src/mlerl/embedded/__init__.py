"""mlerl.embedded: the default policy that `mlerl train` uses with no arguments.

No pretrained weights can be downloaded, so the default policy is bootstrapped offline the way
ML-Agent bootstraps its agent (exploration-enriched fine-tuning): a corpus of diverse solution
programs for the stand-in tasks is generated from a seed, a byte-level BPE tokenizer and a tiny
Qwen2 model (4.3 M parameters) are trained on it, and the result is an ordinary Hugging Face
model directory that every engine can load. The same weights serve as the static
instrumentation model (the corpus includes C.3 instrumentation examples): load a second,
frozen copy from the same directory.

The API: build (`BootstrapConfig`, `build_policy`, `REFERENCE`: the shipped builds,
`read_manifest`, `instrumenter_dir`), the
tasks it is built for (`default_task_ids`, `task_views`, `TaskView`), the corpus
(`generate_corpus`, `Example`, `corpus_hash`, `corpus_stats`, `generate_program`, `Program`) and
measuring a policy directory (`evaluate_drafts`, `TaskEval`, `run_program`; `evaluate_improvement`:
can it revise a correct program?; `sample_answers`, `corpus_for`, `draft_messages`,
`extract_code`), the settings-block programs of the testbed (`Settings`, `draw_settings`,
`settings_code`, `held_out`, `setting_decisions`, `change_setting`), and real-size
architectures initialised at random for the GPU path (`ARCHITECTURES`, `build_random_model`,
`architecture_config`, `padded_tokenizer`: Qwen2.5-0.5B and -3B from their published configs,
no download). The prompts,
tokenizer and program templates are private modules.
"""

from pathlib import Path

from mlerl.embedded._config import BootstrapConfig, read_manifest
from mlerl.embedded._corpus import Example, corpus_hash, corpus_stats, generate_corpus
from mlerl.embedded._evaluate import (
    TaskEval,
    evaluate_drafts,
    evaluate_improvement,
    run_program,
    sample_answers,
)
from mlerl.embedded._model import REFERENCE, build_policy, corpus_for
from mlerl.embedded._programs import Program, generate_program
from mlerl.embedded._prompts import draft_messages, extract_code
from mlerl.embedded._random import (
    ARCHITECTURES,
    architecture_config,
    build_random_model,
    padded_tokenizer,
)
from mlerl.embedded._revisions import change_setting
from mlerl.embedded._revisions import decisions as setting_decisions
from mlerl.embedded._settings import Settings, held_out
from mlerl.embedded._settings import code as settings_code
from mlerl.embedded._settings import draw as draw_settings
from mlerl.embedded._tasks import TaskView, default_task_ids, task_views

__version__ = "0.1.0"

__all__ = [
    "ARCHITECTURES",
    "REFERENCE",
    "Settings",
    "change_setting",
    "corpus_for",
    "draft_messages",
    "draw_settings",
    "extract_code",
    "held_out",
    "sample_answers",
    "setting_decisions",
    "settings_code",
    "BootstrapConfig",
    "Example",
    "Program",
    "TaskEval",
    "TaskView",
    "architecture_config",
    "build_policy",
    "build_random_model",
    "corpus_hash",
    "corpus_stats",
    "default_task_ids",
    "evaluate_drafts",
    "evaluate_improvement",
    "generate_corpus",
    "generate_program",
    "instrumenter_dir",
    "padded_tokenizer",
    "read_manifest",
    "run_program",
    "task_views",
]


def instrumenter_dir(policy_dir: str | Path) -> str | Path:
    """The static instrumentation model's directory: the policy's own (same bootstrap weights).

    Load it separately and keep it frozen; RL updates only the policy's copy.
    """
    return policy_dir
