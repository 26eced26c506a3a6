"""``make_engine(ActorsConfig, model_path)``: the one place that maps the ``engine`` field to a
class."""

from __future__ import annotations

from mlerl.actors._config import ActorsConfig
from mlerl.protocol import ConfigError, InferenceEngine


def make_engine(config: ActorsConfig, model_path: str, seed: int = 0) -> InferenceEngine:
    """The policy engine of ``model_path`` (an HF directory; ``hf``/``vllm``)."""
    if config.engine in ("hf", "vllm") and not model_path:
        raise ConfigError("model.path", f"required for engine {config.engine!r}")
    match config.engine:
        case "hf":
            from mlerl.actors._hf import HFEngine

            _set_torch_threads(config.torch_threads)
            return HFEngine(
                model_path,
                device=config.device,
                dtype=config.dtype,
                max_batch_size=config.max_batch_size,
            )
        case "vllm":
            from mlerl.actors._vllm import VLLMEngine

            return VLLMEngine(
                model_path,
                dtype=config.dtype,
                max_model_len=config.max_model_len,
                gpu_memory_utilization=config.gpu_memory_utilization,
                seed=seed,
            )
        case "openai":
            from mlerl.actors._openai import OpenAIEngine

            return OpenAIEngine(config.base_url, config.served_model)
    raise ConfigError("actors.engine", f"unknown engine {config.engine!r}")


def make_frozen_engine(config: ActorsConfig, model_path: str) -> InferenceEngine:
    """The frozen LM that inserts progress markers (paper section 3.2): never updated."""
    if config.instrument_base_url:
        from mlerl.actors._openai import OpenAIEngine

        return OpenAIEngine(config.instrument_base_url, config.instrument_served_model)
    path = config.instrument_model_path or model_path
    if not path:
        raise ConfigError("actors.instrument_model_path", "required for LM instrumentation")
    from mlerl.actors._hf import HFEngine

    _set_torch_threads(config.torch_threads)
    return HFEngine(
        path, device=config.device, dtype=config.dtype, max_batch_size=config.max_batch_size
    )


def _set_torch_threads(threads: int) -> None:
    if threads > 0:
        import torch

        torch.set_num_threads(threads)
