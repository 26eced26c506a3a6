"""``ActorsConfig``: everything one actor process needs, one documented field at a time.

The run config's ``actors`` section. Facts the actors share with other processes are read
from the sections that own them, never copied here: ``model.path``, ``seed``, ``tasks.ids``/
``data_dir``/``tasks_dir``, ``transport`` (addresses, CURVE keys), ``sandbox`` and
``instrument`` (see ``python -m mlerl.actors``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlerl.actors._admission import AdmissionConfig
from mlerl.actors._health import InfraConfig
from mlerl.actors._improve import ImprovementConfig
from mlerl.actors._prompts import PromptConfig
from mlerl.protocol import SamplingParams, check


@dataclass
class ActorsConfig:
    engine: str = "hf"
    """Policy engine: ``hf`` (transformers), ``vllm`` (in-process AsyncLLM; its own venv) or
    ``openai`` (an OpenAI-compatible server; fixed weights, for baselines/evaluation)."""
    device: str = "cpu"
    """``hf``: torch device (``cpu``, ``cuda``, ``cuda:1``)."""
    dtype: str = "float32"
    """``hf``/``vllm`` weights dtype: ``float32``, ``bfloat16``, ``float16`` or ``auto``."""
    torch_threads: int = 0
    """CPU threads of the ``hf`` engine (``torch.set_num_threads``); 0 keeps torch's default
    (one per core). On a small CPU host shared with the learner and the sandboxed programs, 1
    avoids the threads of several processes spinning against each other."""
    max_batch_size: int = 16
    """``hf``: most sequences generated together."""
    max_model_len: int = 2048
    """``vllm``: context length (prompt + response)."""
    gpu_memory_utilization: float = 0.3
    """``vllm``: memory fraction for weights + KV cache (on CPU, of NUMA node 0's memory)."""
    base_url: str = ""
    """``openai``: server URL ending in ``/v1``."""
    served_model: str = ""
    """``openai``: the ``model`` field of requests."""
    instrument_model_path: str = ""
    """``instrument.mode=lm|paper``: HF directory of the frozen instrumentation LM (loaded as a
    separate HFEngine that never receives weight updates); empty: the policy's ``model.path``."""
    instrument_base_url: str = ""
    """``instrument.mode=lm|paper``: use an OpenAI-compatible server for the frozen LM instead."""
    instrument_served_model: str = ""
    """The ``model`` field of requests to ``instrument_base_url``."""
    state_dir: str = ""
    """Durable per-actor state (seq, outbox, heartbeat) goes to ``state_dir/<actor id>``;
    empty: ``<run dir>/actors`` where the run dir holds the config file."""
    max_new_tokens: int = 1024
    """Response length limit (paper: 1024)."""
    temperature: float = 0.7
    """Sampling temperature (paper: 0.7); behaviour log-probs are under ``logits / T``."""
    top_p: float = 1.0
    """Nucleus sampling (paper: 1, off)."""
    top_k: int = -1
    """Top-k sampling (paper: -1, off)."""
    admission: AdmissionConfig = field(default_factory=AdmissionConfig)
    """In-flight executions, oversampling m and staleness bounds."""
    improvement: ImprovementConfig = field(default_factory=ImprovementConfig)
    """Self-improvement prompts (paper: 50/50 scratch/improve)."""
    prompts: PromptConfig = field(default_factory=PromptConfig)
    """Prompt sizes."""
    infra_retries: int = 2
    """Re-runs of an execution that failed for the harness's reasons (INFRA_ERROR); after
    that the action is reported in the heartbeat counters and never rewarded."""
    infra: InfraConfig = field(default_factory=InfraConfig)
    """When sampling pauses for INFRA_ERRORs and when the actor gives up (``_health.py``)."""
    grade_timeout_s: float = 120.0
    """Grading runs in a child process killed after this long (the submission is invalid)."""
    output_tail_chars: int = 4000
    """End of the program's output kept in the sample and shown in IMPROVE prompts."""
    max_samples: int = 0
    """Stop after sending this many samples (0: until stopped)."""
    heartbeat_s: float = 5.0
    """How often ``heartbeat.json`` is rewritten and acknowledged outbox entries pruned."""
    max_unacked: int = 32
    """Backpressure when the learner stops answering: with this many samples sent and not yet
    acknowledged the actor starts no new generation until acks come (in-flight work finishes
    and is sent). The learner's own bound (``learner.max_pending_samples``/``_bytes``) pauses
    the actors the same way while it answers (docs/protocol.md "Backpressure")."""

    def __post_init__(self) -> None:
        check(self.engine in ("hf", "vllm", "openai"), "engine", "must be 'hf', 'vllm' or 'openai'")
        check(
            self.engine != "openai" or bool(self.base_url),
            "base_url",
            "required for engine 'openai'",
        )
        check(self.torch_threads >= 0, "torch_threads", "must be >= 0 (0: torch's default)")
        check(
            self.dtype in ("float32", "bfloat16", "float16", "auto"),
            "dtype",
            "must be float32, bfloat16, float16 or auto",
        )
        check(self.max_batch_size >= 1, "max_batch_size", "must be >= 1")
        check(self.max_model_len >= 16, "max_model_len", "must be >= 16")
        check(0 < self.gpu_memory_utilization <= 1, "gpu_memory_utilization", "must be in (0, 1]")
        check(self.max_new_tokens >= 1, "max_new_tokens", "must be >= 1")
        check(self.temperature >= 0, "temperature", "must be >= 0")
        check(0 < self.top_p <= 1, "top_p", "must be in (0, 1]")
        check(self.top_k == -1 or self.top_k >= 1, "top_k", "must be -1 (off) or >= 1")
        check(self.infra_retries >= 0, "infra_retries", "must be >= 0")
        check(self.grade_timeout_s > 0, "grade_timeout_s", "must be > 0")
        check(self.output_tail_chars >= 0, "output_tail_chars", "must be >= 0")
        check(self.max_samples >= 0, "max_samples", "must be >= 0")
        check(self.heartbeat_s > 0, "heartbeat_s", "must be > 0")
        check(self.max_unacked >= 1, "max_unacked", "must be >= 1")

    def sampling(self, seed: int | None = None) -> SamplingParams:
        return SamplingParams(
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            seed=seed,
        )
