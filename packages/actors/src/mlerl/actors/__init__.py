"""mlerl.actors: inference engines, prompts and the asyncio actor process.

- configuration: ``ActorsConfig`` (one actor process) and the sections it nests
  (``AdmissionConfig``, ``ImprovementConfig``, ``PromptConfig``, ``InfraConfig``);
- engines: ``make_engine`` builds the configured one; ``HFEngine``, ``VLLMEngine`` and
  ``OpenAIEngine`` implement :class:`mlerl.protocol.InferenceEngine`. Heavy dependencies (torch,
  transformers, vLLM, httpx) are imported when an engine is first used, so importing this
  package stays light;
- the paper's prompts: ``scratch_prompt``, ``improve_prompt``; ``chat_prompt_ids`` (a
  conversation as prompt token ids, the way every engine tokenizes it); ``edit_answer`` writes
  the search/replace edits of the ``edit`` improve format (``PromptConfig.improve_format``);
- the actor loop, for harnesses that bring their own engine, sandbox or sender: ``Actor``, with
  its durable sequence numbers and outbox ``ActorState``;
- one program's path generate -> parse -> instrument -> execute -> grade -> reward:
  ``RealPipeline``; best-of-K evaluation of a policy: ``evaluate``; the AIDE baseline driven
  by a policy at the same number of executions: ``evaluate_aide``, its search settings
  ``AideConfig``;
- ``EXIT_INFRA_DOWN``: the actor process's exit status when its execution backend stays down;
- ``build_tiny_model_dir``: a random tiny Qwen2 with a trained BPE tokenizer, built offline, for
  tests and benchmarks.

The process entry point is ``python -m mlerl.actors``. Everything else (admission, response
parsing, the AIDE search itself) is private; see docs/actors.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mlerl.actors._actor import Actor
from mlerl.actors._admission import AdmissionConfig
from mlerl.actors._aide import AideConfig
from mlerl.actors._config import ActorsConfig
from mlerl.actors._edits import edit_answer
from mlerl.actors._engines import make_engine
from mlerl.actors._evaluate import evaluate, evaluate_aide
from mlerl.actors._health import EXIT_INFRA_DOWN, InfraConfig
from mlerl.actors._improve import ImprovementConfig
from mlerl.actors._parse import parse_response
from mlerl.actors._pipeline import RealPipeline
from mlerl.actors._prompts import PromptConfig, chat_prompt_ids, improve_prompt, scratch_prompt
from mlerl.actors._state import ActorState
from mlerl.actors._testing import build_tiny_model_dir

if TYPE_CHECKING:
    from mlerl.actors._hf import HFEngine
    from mlerl.actors._openai import OpenAIEngine
    from mlerl.actors._vllm import VLLMEngine

__version__ = "0.1.0"

_LAZY = {
    "HFEngine": "mlerl.actors._hf",
    "VLLMEngine": "mlerl.actors._vllm",
    "OpenAIEngine": "mlerl.actors._openai",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'mlerl.actors' has no attribute {name!r}")


__all__ = [
    "ActorsConfig",
    "edit_answer",
    "parse_response",
    "AdmissionConfig",
    "ImprovementConfig",
    "InfraConfig",
    "PromptConfig",
    "make_engine",
    "HFEngine",
    "OpenAIEngine",
    "VLLMEngine",
    "scratch_prompt",
    "improve_prompt",
    "chat_prompt_ids",
    "Actor",
    "ActorState",
    "RealPipeline",
    "evaluate",
    "evaluate_aide",
    "AideConfig",
    "EXIT_INFRA_DOWN",
    "build_tiny_model_dir",
]
