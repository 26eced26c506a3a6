"""mlerl.actors: inference engines, response parsing, prompts and the asyncio actor loop.

Engines (``HFEngine``, ``VLLMEngine``, ``OpenAIEngine``) implement
:class:`mlerl.protocol.InferenceEngine`. Heavy dependencies (torch, transformers, vLLM, httpx)
are imported when an engine is first used, so importing this package stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mlerl.actors._admission import Admission, AdmissionConfig, Verdict
from mlerl.actors._aide import AideConfig, Evaluation, best_node, run_aide
from mlerl.actors._config import ActorsConfig
from mlerl.actors._engines import make_engine
from mlerl.actors._evaluate import evaluate, summarise
from mlerl.actors._health import EXIT_INFRA_DOWN, InfraConfig
from mlerl.actors._improve import ImprovementBuffer, ImprovementConfig, Solution
from mlerl.actors._prompts import PromptConfig, improve_prompt, scratch_prompt
from mlerl.actors._pipeline import real_pipeline
from mlerl.actors._parse import ParsedResponse, parse_response

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
    "evaluate",
    "make_engine",
    "real_pipeline",
    "summarise",
    "AideConfig",
    "Evaluation",
    "Admission",
    "AdmissionConfig",
    "EXIT_INFRA_DOWN",
    "InfraConfig",
    "HFEngine",
    "OpenAIEngine",
    "VLLMEngine",
    "ImprovementBuffer",
    "ImprovementConfig",
    "ParsedResponse",
    "PromptConfig",
    "Solution",
    "improve_prompt",
    "scratch_prompt",
    "Verdict",
    "parse_response",
    "best_node",
    "run_aide",
]
