"""mlerl.protocol: the wire format, transport and small shared interfaces of mlerl."""

from mlerl.protocol._config import ConfigError, check, load_section, to_object
from mlerl.protocol._engine import ChatMessage, Completion, InferenceEngine, SamplingParams
from mlerl.protocol._messages import (
    SCHEMA_VERSION,
    Ack,
    ExecStatus,
    Heartbeat,
    Message,
    ParseStatus,
    PromptKind,
    ProtocolError,
    Sample,
    WeightUpdate,
    decode,
    encode,
)

__version__ = "0.1.0"

__all__ = [
    "SCHEMA_VERSION",
    "Ack",
    "ChatMessage",
    "ConfigError",
    "check",
    "load_section",
    "to_object",
    "Completion",
    "ExecStatus",
    "Heartbeat",
    "InferenceEngine",
    "Message",
    "ParseStatus",
    "PromptKind",
    "ProtocolError",
    "Sample",
    "SamplingParams",
    "WeightUpdate",
    "decode",
    "encode",
]
