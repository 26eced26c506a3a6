"""mlerl.sandbox: run untrusted generated programs with limits, in Docker or locally.

``make_sandbox(SandboxConfig(backend="local" | "docker"))`` gives a :class:`Sandbox`;
``await sandbox.run(ExecutionRequest(program=...))`` gives an :class:`ExecutionResult`.
What each backend isolates is stated in ``_local.py`` / ``_docker.py`` and docs/sandbox.md.
``reap`` removes what dead executors left behind; ``leftovers`` counts what this process's
sandboxes hold (0 after every run ended: the leak check).
"""

from mlerl.sandbox._factory import leftovers, make_sandbox, reap
from mlerl.sandbox._types import (
    CapturedOutput,
    ExecutionRequest,
    ExecutionResult,
    Limits,
    OutputCallback,
    Sandbox,
    SandboxConfig,
    SandboxUnavailable,
)

__version__ = "0.1.0"

__all__ = [
    "CapturedOutput",
    "ExecutionRequest",
    "ExecutionResult",
    "Limits",
    "OutputCallback",
    "Sandbox",
    "SandboxConfig",
    "SandboxUnavailable",
    "make_sandbox",
    "reap",
    "leftovers",
]
