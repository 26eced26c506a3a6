"""The wire format: every message that crosses a process boundary in mlerl.

All messages are msgspec Structs encoded as MessagePack with a type tag, so one decoder reads
any of them. Each carries ``v``, the schema version; a receiver rejects versions it does not
know instead of guessing. Invariants are checked in ``__post_init__``, which msgspec also runs
on decode, so a malformed message never reaches application code: decoding raises
:class:`ProtocolError` whose text names the offending field.

Invariants (checked):

- ``Sample.response_ids`` and ``Sample.behaviour_logprobs`` have equal length (one log-prob per
  generated token, under the behaviour policy at ``policy_version``).
- ``Sample.seq`` >= 0; it increases by one per sample produced by ``actor_id``, which makes
  ``(actor_id, seq)`` the exactly-once key of the sample stream.
- Timestamps are Unix seconds; those present are ordered sampled <= exec_started <=
  exec_finished <= graded.
- ``Sample.duration_s`` >= 0 is the execution duration (0 when nothing was executed) and
  ``Sample.generation_s`` >= 0 the generation time of the sample (0 from senders that predate
  the field); both are measured on monotonic clocks, so neither is clamped anywhere. The Δt of
  the duration-aware gradient is their sum (:attr:`Sample.dt_s`).
- ``Sample.prompt_kind == IMPROVE`` iff ``parent_id`` is set.
- ``Sample.reward`` is finite.
"""

from __future__ import annotations

import enum
import itertools
import math

import msgspec

SCHEMA_VERSION = 1
"""The only schema version this build reads and writes."""


class ProtocolError(ValueError):
    """A message could not be decoded or violates an invariant; the text names the field."""


class PromptKind(str, enum.Enum):
    SCRATCH = "scratch"
    """Solve the task from the task description alone."""
    IMPROVE = "improve"
    """Improve an earlier solution, shown with its terminal output (paper section 3.3)."""


class ExecStatus(str, enum.Enum):
    """How a program's execution ended. Only ``INFRA_ERROR`` is the harness's fault."""

    OK = "ok"
    PROGRAM_ERROR = "program_error"
    TIMEOUT = "timeout"
    OOM = "oom"
    OUTPUT_LIMIT = "output_limit"
    INFRA_ERROR = "infra_error"
    NOT_RUN = "not_run"
    """Nothing was executed (the model's output held no runnable program)."""


class ParseStatus(str, enum.Enum):
    """What the actor found in the model's response."""

    OK = "ok"
    NO_CODE = "no_code"
    MULTIPLE_BLOCKS = "multiple_blocks"
    TRUNCATED = "truncated"
    SYNTAX_ERROR = "syntax_error"
    EMPTY = "empty"
    EDIT_MISMATCH = "edit_mismatch"
    """An IMPROVE answer's search/replace edits do not apply to the program it revises."""
    UNCHANGED = "unchanged"
    """An IMPROVE answer whose revised program is the program it revises (not run again)."""


class _Message(msgspec.Struct, frozen=True, tag_field="type", kw_only=True):
    v: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.v != SCHEMA_VERSION:
            raise ProtocolError(
                f"v: unknown schema version {self.v} (this build reads {SCHEMA_VERSION})"
            )


class Sample(_Message, tag="sample", kw_only=True, frozen=True):
    """One completed action: a generated solution, its execution, grade and reward."""

    sample_id: str
    """Globally unique, ``f"{actor_id}:{seq}"`` by convention."""
    actor_id: str
    seq: int
    """Per-actor sequence number, from 0, no gaps."""
    task_id: str
    prompt_kind: PromptKind
    parent_id: str | None = None
    """The sample whose solution an IMPROVE prompt revises."""
    parent_reward: float | None = None
    """That sample's reward, as the actor recorded it when it chose the parent (the learner's
    ``improve_baseline: parent`` reads it); None for SCRATCH and from senders that predate
    the field."""
    prompt_ids: list[int]
    response_ids: list[int]
    behaviour_logprobs: list[float]
    """Log-prob of each response token under the policy that generated it."""
    policy_version: int
    temperature: float = 1.0
    """Sampling parameters the response was drawn with: the learner scores the behaviour
    log-probs' distribution (logits / temperature) from these, never from its own config."""
    top_p: float = 1.0
    top_k: int = -1
    t_sampled: float
    t_exec_started: float | None = None
    t_exec_finished: float | None = None
    t_graded: float | None = None
    duration_s: float = 0.0
    """Seconds the program ran (the sandbox's monotonic measure); 0 when nothing ran."""
    generation_s: float = 0.0
    """Seconds the engine took to generate this sample (its batch's ``generate`` call, measured
    by the actor on its monotonic clock). 0 in journals written before the field existed."""
    parse_status: ParseStatus = ParseStatus.OK
    exec_status: ExecStatus
    markers: list[str] = []
    """Progress markers reached, in the order they were first printed."""
    score: float | None = None
    """Grader score of the submission on the public leaderboard (raw metric, not sign-flipped):
    what the reward reads; None when invalid."""
    private_score: float | None = None
    """The same submission's score on the private leaderboard (reports only; never trained on).
    None when invalid or from a sender that predates the split."""
    valid_submission: bool = False
    reward: float
    reward_parts: dict[str, float] = {}
    plan: str = ""
    """The response's text before its program (the plan the prompts ask for); "" from senders
    that predate the field."""
    code: str = ""
    """The program as generated (before instrumentation)."""
    output_tail: str = ""
    """The end of the program's terminal output, bounded by the actor."""
    submission: bytes | None = None
    """The submission file of a valid sample that is its actor's best so far on the task (by
    public score), so the learner can keep the run's best solution whole
    (``RUN_DIR/best/<task>/``); None for every other sample, for one over the actor's size cap
    and from senders that predate the field."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.seq < 0:
            raise ProtocolError(f"seq: must be >= 0, got {self.seq}")
        if len(self.response_ids) != len(self.behaviour_logprobs):
            raise ProtocolError(
                f"behaviour_logprobs: length {len(self.behaviour_logprobs)} != "
                f"response_ids length {len(self.response_ids)}"
            )
        if not (math.isfinite(self.temperature) and self.temperature > 0):
            raise ProtocolError(f"temperature: must be finite and > 0, got {self.temperature}")
        if self.duration_s < 0 or not math.isfinite(self.duration_s):
            raise ProtocolError(f"duration_s: must be finite and >= 0, got {self.duration_s}")
        if self.generation_s < 0 or not math.isfinite(self.generation_s):
            raise ProtocolError(f"generation_s: must be finite and >= 0, got {self.generation_s}")
        if not math.isfinite(self.reward):
            raise ProtocolError(f"reward: must be finite, got {self.reward}")
        if self.submission is not None and not self.valid_submission:
            raise ProtocolError("submission: only a valid submission's file may be sent")
        if (self.prompt_kind is PromptKind.IMPROVE) != (self.parent_id is not None):
            raise ProtocolError("parent_id: must be set exactly when prompt_kind is 'improve'")
        if self.parent_reward is not None and (
            self.parent_id is None or not math.isfinite(self.parent_reward)
        ):
            raise ProtocolError(
                f"parent_reward: must be finite and only set with parent_id, got "
                f"{self.parent_reward}"
            )
        stamps = [
            ("t_sampled", self.t_sampled),
            ("t_exec_started", self.t_exec_started),
            ("t_exec_finished", self.t_exec_finished),
            ("t_graded", self.t_graded),
        ]
        present = [(name, t) for name, t in stamps if t is not None]
        for (_, earlier), (name, later) in itertools.pairwise(present):
            if later < earlier:
                raise ProtocolError(
                    f"{name}: timestamp {later} precedes the previous one {earlier}"
                )

    @property
    def dt_s(self) -> float:
        """Δt of the duration-aware gradient: the seconds this action held its slot, generation
        plus execution (both measured; see the module docstring)."""
        return self.generation_s + self.duration_s


class WeightUpdate(_Message, tag="weights", kw_only=True, frozen=True):
    """The learner announces policy ``version``; weights are inline or at ``uri``."""

    version: int
    uri: str
    """``inline`` when ``payload`` holds the safetensors bytes, else a file path or URL."""
    size_bytes: int
    sha256: str
    payload: bytes | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.version < 0:
            raise ProtocolError(f"version: must be >= 0, got {self.version}")
        if (self.uri == "inline") != (self.payload is not None):
            raise ProtocolError("payload: must be present exactly when uri is 'inline'")
        if self.payload is not None and len(self.payload) != self.size_bytes:
            raise ProtocolError(
                f"size_bytes: {self.size_bytes} != payload length {len(self.payload)}"
            )


class Ack(_Message, tag="ack", kw_only=True, frozen=True):
    """The receiver has durably stored ``(actor_id, seq)`` and every earlier seq of that actor.

    Acks are cumulative: the receiver stores each actor's samples in seq order, so one ack
    covers all seqs <= ``seq`` and a lost ack is made good by any later one.
    """

    actor_id: str
    seq: int


class Heartbeat(_Message, tag="heartbeat", kw_only=True, frozen=True):
    """Liveness, both directions. ``state`` carries small role-specific facts."""

    sender: str
    role: str
    t: float
    policy_version: int = -1
    state: dict[str, float] = {}


Message = Sample | WeightUpdate | Ack | Heartbeat

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Message)


def encode(msg: Message) -> bytes:
    """MessagePack bytes of any message."""
    return _encoder.encode(msg)


def decode(data: bytes) -> Message:
    """Decode and validate one message; raise :class:`ProtocolError` naming the field."""
    try:
        return _decoder.decode(data)
    except ProtocolError:
        raise
    except msgspec.ValidationError as exc:
        # msgspec reports invariant failures raised in __post_init__ as ValidationError too;
        # its text already names the path (``at `$.seq```) or carries our field-first message.
        raise ProtocolError(str(exc)) from exc
    except msgspec.DecodeError as exc:
        raise ProtocolError(f"<bytes>: malformed message: {exc}") from exc
