"""In-process fakes of the actor's I/O boundaries (engine, sandbox, sender, pipeline), for tests.

They behave like the real ones where the actor can tell: the sandbox returns real
``ExecutionResult``s, the sender dedupes by seq like the learner's receiver.
"""

from __future__ import annotations

import asyncio
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from mlerl.actors._pipeline import Graded, Prepared
from mlerl.protocol import Completion, ExecStatus, Sample, WeightUpdate
from mlerl.sandbox import CapturedOutput, ExecutionResult

OK_RESPONSE = (
    "Fit a model.\n```python\nprint('loaded data')\nprint('trained model')\n"
    "open('submission.csv','w')\n```"
)
NO_CODE = "I would fit a model."
SYNTAX = "Plan.\n```python\ndef f(:\n```"


class FakeEngine:
    """Answers each conversation with the next response of ``responses`` (cycling)."""

    def __init__(self, responses: list[str], fail_first: int = 0, delay: float = 0.0) -> None:
        self.responses = responses
        self.delay = delay  # seconds each generate call takes
        self.calls: list[list] = []
        self._version = 0
        self.fail_first = fail_first

    @property
    def policy_version(self) -> int:
        return self._version

    async def generate(self, conversations, params):
        self.calls.append([list(c) for c in conversations])
        await asyncio.sleep(self.delay)
        if self.fail_first > 0:
            self.fail_first -= 1
            raise RuntimeError("engine down")
        out = []
        for _ in conversations:
            text = self.responses[(sum(len(c) for c in self.calls) - 1) % len(self.responses)]
            self.responses = self.responses[1:] + self.responses[:1]
            n = 3 + len(text) % 5
            out.append(
                Completion(
                    prompt_ids=[1, 2],
                    token_ids=list(range(10, 10 + n)),
                    logprobs=[-0.5] * n,
                    text=text,
                    finish_reason="stop",
                )
            )
        return out

    async def update_weights(self, update: WeightUpdate) -> None:
        self._version = max(self._version, update.version)

    async def close(self) -> None:
        pass


class FakeSandbox:
    """Runs nothing: prints the program's print() strings, writes a submission if asked.

    ``infra_failures`` executions fail with INFRA_ERROR first; ``duration`` is each run's Δt.
    """

    def __init__(self, infra_failures: int = 0, duration: float = 2.5, delay: float = 0.0) -> None:
        self.infra_failures = infra_failures
        self.duration = duration
        self.delay = delay
        self.runs = 0
        self.requests: list = []

    async def run(self, request, on_output=None):
        self.runs += 1
        self.requests.append(request)
        await asyncio.sleep(self.delay)
        started = time.time()
        if self.infra_failures > 0:
            self.infra_failures -= 1
            empty = CapturedOutput()
            return ExecutionResult(
                ExecStatus.INFRA_ERROR, None, started, started, 0.0, empty, empty, {}, "boom"
            )
        printed = "".join(f"{m}\n" for m in re.findall(r"print\('([^']*)'\)", request.program))
        if on_output:
            on_output("stdout", printed.encode())
        files = {}
        if "submission.csv" in request.program:
            out = Path(tempfile.mkdtemp()) / "submission.csv"
            out.write_text("id,target\n1,0.5\n")
            files["submission.csv"] = out
        return ExecutionResult(
            ExecStatus.OK,
            0,
            started,
            started + self.duration,
            self.duration,
            CapturedOutput(head=printed, total_bytes=len(printed)),
            CapturedOutput(),
            files,
        )

    async def close(self) -> None:
        pass


class FakeSender:
    """Acks everything at once unless ``ack`` is False; stores like the learner (dedupe by seq).

    A test that changes ``acked_seq`` or ``learner_full`` by hand calls :meth:`notify`, as the
    real sender does when an ack or a heartbeat arrives."""

    def __init__(self, ack: bool = True) -> None:
        self.ack = ack
        self.sent: list[Sample] = []
        self.stored: dict[int, Sample] = {}
        self.acked_seq = -1
        self.watermark = -1
        self.learner_full = False
        self._news = asyncio.Event()

    @property
    def unacked(self) -> int:
        return max(0, self.sent[-1].seq - self.acked_seq) if self.sent else 0

    async def send(self, sample: Sample) -> None:
        self.sent.append(sample)
        if sample.seq == self.watermark + 1:
            self.stored[sample.seq] = sample
            self.watermark = sample.seq
        if self.ack:
            self.acked_seq = self.watermark
        self.notify()

    async def changed(self) -> None:
        await self._news.wait()

    def notify(self) -> None:
        self._news.set()
        self._news = asyncio.Event()


class Scanner:
    def __init__(self) -> None:
        self.found: list[str] = []

    def feed(self, chunk) -> None:
        for line in (chunk.decode() if isinstance(chunk, bytes) else chunk).splitlines():
            if line in ("loaded data", "trained model") and line not in self.found:
                self.found.append(line)

    def close(self) -> list[str]:
        return self.found


def fake_reward(markers, status, graded, task):
    # the paper's scheme: -10 + 0.1 per marker on failure, the score when graded
    if status is ExecStatus.INFRA_ERROR:
        return None, {}
    if status is ExecStatus.OK and graded.valid:
        return graded.score, {"score": graded.score}
    return -10.0 + 0.1 * len(markers), {"base": -10.0, "markers": 0.1 * len(markers)}


class FakePipeline:
    """A :class:`Pipeline` with no instrumentation, a fixed score for any submission written,
    :func:`fake_reward` and output shown as is."""

    def __init__(self, score: float = 0.8) -> None:
        self.score = score

    async def prepare(self, code: str) -> Prepared:
        return Prepared(code, None)

    def scanner(self, nonce: str | None) -> Scanner:
        return Scanner()

    def grade(self, task, path: Path) -> Graded:
        return Graded(self.score, path.is_file())

    def reward(self, markers, status, graded, task):
        return fake_reward(markers, status, graded, task)

    def clean(self, text: str, nonce: str | None) -> str:
        return text

    def close(self) -> None:
        pass


@dataclass
class FakeTask:
    id: str
    public_dir: Path
    description: str = "Predict y. Metric: AUC."
    lower_is_better: bool = False
    time_limit_s: float = 30.0
    submission_columns: tuple[str, ...] = ("id", "target")
    extra: dict = field(default_factory=dict)
