"""mlerl.protocol: the wire format, transport and small shared interfaces of mlerl.

- messages (``Sample``, ``WeightUpdate``, ``Ack``, ``Heartbeat``; ``encode``/``decode``),
- the reliable sample stream (``SampleSender`` -> ``SampleReceiver``: acked, resent, deduped,
  in per-actor order) and weight announcements (``WeightBroadcaster`` -> ``WeightSubscriber``),
- CURVE security of both streams (``generate_keys``, ``CurveKeys``) and the learner's content
  checks on samples (``check_sample``, ``SampleLimits``),
- the weight-file contract every engine loads (``encode_weights``, ``announce``,
  ``read_update_bytes``, ``load_into``, ``WeightUpdateError``),
- metrics sinks (``MetricsSink``: W&B, JSON lines, console),
- config helpers and the ``InferenceEngine`` interface.

See ``docs/protocol.md``. Imports no torch (the weight-file functions import it when called).
"""

from mlerl.protocol._config import ConfigError, check, load_section, load_yaml, to_object
from mlerl.protocol._curve import CurveError, CurveKeys, generate_keys
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
from mlerl.protocol._metrics import (
    ConsoleSink,
    JsonlSink,
    MetricsConfig,
    MetricsSink,
    MultiSink,
    WandbSink,
    make_sink,
)
from mlerl.protocol._transport import SampleReceiver, SampleSender
from mlerl.protocol._transport_config import TransportConfig
from mlerl.protocol._validate import SampleLimits, check_sample
from mlerl.protocol._weightfile import (
    WeightUpdateError,
    announce,
    encode_weights,
    load_into,
    read_update_bytes,
    tied_names,
)
from mlerl.protocol._weights import WeightBroadcaster, WeightSubscriber

__version__ = "0.1.0"

__all__ = [
    "SCHEMA_VERSION",
    "Ack",
    "ChatMessage",
    "check",
    "check_sample",
    "Completion",
    "ConfigError",
    "ConsoleSink",
    "CurveError",
    "CurveKeys",
    "decode",
    "encode",
    "generate_keys",
    "ExecStatus",
    "Heartbeat",
    "InferenceEngine",
    "JsonlSink",
    "load_section",
    "load_yaml",
    "Message",
    "MetricsConfig",
    "MetricsSink",
    "make_sink",
    "MultiSink",
    "ParseStatus",
    "PromptKind",
    "ProtocolError",
    "Sample",
    "SampleLimits",
    "SampleReceiver",
    "SampleSender",
    "SamplingParams",
    "to_object",
    "TransportConfig",
    "WandbSink",
    "WeightBroadcaster",
    "WeightSubscriber",
    "WeightUpdate",
    "WeightUpdateError",
    "announce",
    "encode_weights",
    "load_into",
    "read_update_bytes",
    "tied_names",
]
