"""``TransportConfig``: the addresses and reliability knobs of the sample and weight streams.

The learner binds (``*_bind``, defaulting to the address), actors connect (``*_address``). On
one host use ``ipc://`` or ``tcp://127.0.0.1``; across hosts bind ``tcp://0.0.0.0:PORT`` and
connect to ``tcp://LEARNER_HOST:PORT`` (see docs/protocol.md). ``RunTransportConfig`` is
the ``transport`` section of a run config, the few of these facts a user sets.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from mlerl.protocol._config import check
from mlerl.protocol._curve import CurveKeys


@dataclass
class TransportConfig:
    samples_address: str = "tcp://127.0.0.1:5555"
    """Where actors send samples (DEALER connect)."""
    samples_bind: str | None = None
    """Where the learner receives samples (ROUTER bind); None: ``samples_address``."""
    weights_address: str = "tcp://127.0.0.1:5556"
    """Where actors subscribe to weight announcements (SUB connect)."""
    weights_bind: str | None = None
    """Where the learner publishes them (PUB bind); None: ``weights_address``."""
    resend_after_s: float = 5.0
    """Retransmit unacked samples (go-back-N) when the oldest was sent this long ago."""
    heartbeat_s: float = 5.0
    """Actor heartbeat period."""
    sender_hwm: int = 1000
    """ZeroMQ send queue of each actor; overflow waits in the outbox, never lost."""
    receiver_hwm: int = 10000
    """ZeroMQ receive queue of the learner; overflow is resent by the actors."""
    max_unacked: int = 4096
    """An actor's ``send`` waits while this many samples are unacknowledged."""
    max_batch: int = 256
    """Samples the learner stores per ``commit`` (one fsync)."""
    reconnect_ivl_ms: int = 100
    """ZeroMQ reconnect interval (backs off to 2 s)."""
    republish_s: float = 1.0
    """The latest weight announcement is re-published this often for late joiners."""
    keys_dir: str | None = None
    """CURVE keys of the run (``mlerl.protocol.generate_keys``): both streams encrypted, the
    learner admits only the actors' key and actors talk only to the learner's. None: plain."""

    def curve_keys(self) -> CurveKeys | None:
        return CurveKeys(self.keys_dir) if self.keys_dir else None

    def __post_init__(self) -> None:
        for key in ("samples_address", "weights_address"):
            value = getattr(self, key)
            check(
                value.startswith(("tcp://", "ipc://", "inproc://")),
                key,
                f"must be a tcp://, ipc:// or inproc:// address, got {value!r}",
            )
        for key in ("resend_after_s", "heartbeat_s", "republish_s"):
            check(getattr(self, key) > 0, key, "must be > 0")
        for key in ("sender_hwm", "receiver_hwm", "max_unacked", "max_batch", "reconnect_ivl_ms"):
            check(getattr(self, key) >= 1, key, "must be >= 1")


@dataclass
class RunTransportConfig:
    """The ``transport`` section of a run config (``RUN_DIR/config.yaml``): where the run's two
    streams meet and whether CURVE secures them. The one owner of these facts: the learner binds
    both addresses, every actor connects to them, both read them here.

    Across hosts each host composes its own run config, so each names the addresses as it sees
    them: ``tcp://0.0.0.0:PORT`` on the learner host, ``tcp://LEARNER_HOST:PORT`` on actor hosts
    (``mlerl slurm`` writes both). :meth:`resolve` gives the :class:`TransportConfig` that opens
    the sockets."""

    samples_address: str = ""
    """The sample stream (actors -> learner). Empty: ``mlerl train role=all`` picks a free
    loopback port; ``role=learner``/``actors`` must set it."""
    weights_address: str = ""
    """The weight announcements (learner -> actors). Empty: as for ``samples_address``."""
    curve: bool = True
    """Encrypt and authenticate both streams with ZeroMQ CURVE: only holders of the run's actor
    key can send samples or read weights (docs/protocol.md)."""
    keys_dir: str = ""
    """The run's CURVE keys (the learner side creates them when missing); empty:
    ``RUN_DIR/keys``. On an actor host, point it at a copy of the learner host's keys."""

    def __post_init__(self) -> None:
        for key in ("samples_address", "weights_address"):
            value = getattr(self, key)
            check(
                not value or value.startswith(("tcp://", "ipc://", "inproc://")),
                key,
                f"must be empty or a tcp://, ipc:// or inproc:// address, got {value!r}",
            )

    def resolve(self, run_dir: str | os.PathLike[str]) -> TransportConfig:
        """The sockets' config for a process of the run in ``run_dir``."""
        for key in ("samples_address", "weights_address"):
            check(
                bool(getattr(self, key)),
                f"transport.{key}",
                "required (only `mlerl train role=all` picks a free port for it)",
            )
        keys_dir = (self.keys_dir or os.path.join(run_dir, "keys")) if self.curve else None
        return TransportConfig(
            samples_address=self.samples_address,
            weights_address=self.weights_address,
            keys_dir=keys_dir,
        )
