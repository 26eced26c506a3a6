"""Code that runs inside vLLM's worker process (loaded by ``worker_extension_cls``).

This is the ONE place that knows vLLM internals for weight sync, including the CPU quirk: on
CPU, vLLM prepacks the weights of unquantized linear layers for its GEMM kernels. With tied
embeddings, ``reload_weights`` refreshes the embedding (and so the lm_head's ``weight``) in place
but not the lm_head's prepacked copy, so sampling uses stale logits while the first greedy
tokens can still look right. ``_refresh_cpu_lm_head`` re-dispatches the lm_head's GEMM after
every reload; the vLLM tests compare log-probs after a sync with a freshly loaded engine.
"""

from __future__ import annotations


def _refresh_cpu_lm_head(model) -> None:  # model: torch.nn.Module
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm
    from vllm.platforms import current_platform

    lm_head = getattr(model, "lm_head", None)
    if current_platform.is_cpu() and lm_head is not None and hasattr(lm_head, "weight"):
        dispatch_cpu_unquantized_gemm(lm_head, remove_weight=False)


class WeightSyncExtension:
    """Mixed into vLLM's worker class; called through ``collective_rpc("mlerl_load_weights")``."""

    def mlerl_load_weights(self, blob: bytes) -> int:
        """Load safetensors ``blob`` (checkpoint names) in place; return the tensor count."""
        from safetensors.torch import load

        state = load(blob)
        self.model_runner.reload_weights(weights_iterator=iter(state.items()))  # type: ignore[attr-defined]  # vLLM's worker extension: model_runner is the worker's
        _refresh_cpu_lm_head(self.model_runner.get_model())  # type: ignore[attr-defined]  # vLLM's worker extension: model_runner is the worker's
        return len(state)
