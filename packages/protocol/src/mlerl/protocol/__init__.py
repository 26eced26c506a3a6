"""mlerl.protocol: the wire format, transport and small shared interfaces of mlerl.

The contract package: everything here is imported by at least one other package (actors,
learner, instrument, sandbox, the CLI), so it holds more names than the others' tables of
contents; they are grouped as in ``__all__``:

- messages (``Sample``, ``WeightUpdate``; ``encode``/``decode``; ``ProtocolError``) and the enums
  they carry (``ExecStatus``, ``ParseStatus``, ``PromptKind``),
- the reliable sample stream (``SampleSender`` -> ``SampleReceiver``: acked, resent, deduped,
  in per-actor order) and weight announcements (``WeightBroadcaster`` -> ``WeightSubscriber``),
  configured by ``TransportConfig``,
- CURVE security of both streams (``generate_keys``, ``CurveKeys``, ``CurveError``) and the
  learner's content checks on samples (``check_sample``, ``SampleLimits``),
- the weight-file contract every engine loads (``encode_weights``, ``announce``,
  ``read_update_bytes``, ``load_into``, ``tied_names``, ``WeightUpdateError``),
- metrics (``MetricsConfig``, ``make_sink``: W&B, JSON lines, console; ``MetricsSink``, their
protocol,
  and ``MediaSink``, one that also keeps tables and images),
- process lifetime (``die_with_parent``: a child ends with its parent, SIGKILL included),
- the run contract (``RunContract`` with ``RunModel`` and ``RunTasks``; ``load_run``): the facts
  every process of a run reads (policy, seed, tasks, transport), typed and loaded once,
- config helpers (``ConfigError``, ``check``, ``load_yaml``, ``load_section``, ``to_object``) and
  the ``InferenceEngine`` interface (``ChatMessage``, ``SamplingParams``, ``Completion``).

Acks, heartbeats, the schema version and the individual sinks are private (``_messages.py``,
``_metrics.py``). See ``docs/protocol.md``. Imports no torch (the weight-file functions import
it when called).
"""

from mlerl.protocol._config import ConfigError, check, load_section, load_yaml, to_object
from mlerl.protocol._curve import CurveError, CurveKeys, generate_keys
from mlerl.protocol._engine import ChatMessage, Completion, InferenceEngine, SamplingParams
from mlerl.protocol._lifetime import die_with_parent
from mlerl.protocol._messages import (
    ExecStatus,
    ParseStatus,
    PromptKind,
    ProtocolError,
    Sample,
    WeightUpdate,
    decode,
    encode,
)
from mlerl.protocol._metrics import MediaSink, MetricsConfig, MetricsSink, make_sink
from mlerl.protocol._receiver import SampleReceiver
from mlerl.protocol._run_contract import RunContract, RunModel, RunTasks, load_run
from mlerl.protocol._sender import SampleSender
from mlerl.protocol._transport_config import RunTransportConfig, TransportConfig
from mlerl.protocol._validate import SampleLimits, check_sample
from mlerl.protocol._weight_broadcast import WeightBroadcaster, WeightSubscriber
from mlerl.protocol._weightfile import (
    WeightUpdateError,
    announce,
    encode_weights,
    load_into,
    read_update_bytes,
    tied_names,
)

__version__ = "0.1.0"

__all__ = [
    # messages
    "Sample",
    "WeightUpdate",
    "ExecStatus",
    "ParseStatus",
    "PromptKind",
    "ProtocolError",
    "encode",
    "decode",
    # transport
    "SampleSender",
    "SampleReceiver",
    "WeightBroadcaster",
    "WeightSubscriber",
    "RunTransportConfig",
    "TransportConfig",
    "CurveKeys",
    "CurveError",
    "generate_keys",
    "SampleLimits",
    "check_sample",
    # weight files
    "encode_weights",
    "announce",
    "read_update_bytes",
    "load_into",
    "tied_names",
    "WeightUpdateError",
    # metrics
    "MediaSink",
    "MetricsConfig",
    "make_sink",
    "MetricsSink",
    # process lifetime
    "die_with_parent",
    # the run contract
    "RunContract",
    "RunModel",
    "RunTasks",
    "load_run",
    # config helpers
    "ConfigError",
    "check",
    "load_section",
    "load_yaml",
    "to_object",
    # engine interface
    "InferenceEngine",
    "ChatMessage",
    "SamplingParams",
    "Completion",
]
