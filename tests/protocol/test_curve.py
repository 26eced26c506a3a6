"""CURVE on both streams: only the run's actors send samples / read weights, only its learner serves.

Each refusal is checked next to the accepted case on the same receiver, so a test passes only
when the keys make the difference (not because nothing ever arrives).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat

import pytest

from mlerl.protocol import (
    CurveError,
    CurveKeys,
    SampleReceiver,
    SampleSender,
    TransportConfig,
    WeightBroadcaster,
    WeightSubscriber,
    WeightUpdate,
    generate_keys,
)
from mlerl.protocol import _curve

from .conftest import make_sample


def _update(version: int) -> WeightUpdate:
    return WeightUpdate(version=version, uri="inline", size_bytes=3, sha256="x", payload=b"abc")


def test_keys_are_private_files_and_generation_is_idempotent(tmp_path):
    keys = generate_keys(tmp_path / "keys")
    assert stat.S_IMODE(os.stat(tmp_path / "keys").st_mode) == 0o700
    names = sorted(os.listdir(tmp_path / "keys"))
    assert names == ["actors.key", "actors.key_secret", "learner.key", "learner.key_secret"]
    assert all(stat.S_IMODE(os.stat(tmp_path / "keys" / n).st_mode) == 0o600 for n in names)
    server_pub, client_pub = keys.server_public(), keys.client_public()
    assert server_pub != client_pub and len(server_pub) == 40  # z85 of 32 bytes
    again = generate_keys(tmp_path / "keys")  # keeps the existing pair
    assert again.server_public() == server_pub and again.client_keypair()[0] == client_pub
    assert [p.name for p in tmp_path.iterdir()] == ["keys"]  # no temp dir left behind


def test_incomplete_or_missing_keys_are_a_clear_error(tmp_path):
    generate_keys(tmp_path / "keys")
    (tmp_path / "keys" / "actors.key").unlink()
    with pytest.raises(CurveError, match="incomplete"):
        generate_keys(tmp_path / "keys")
    with pytest.raises(CurveError, match="copy the run's keys"):
        CurveKeys(tmp_path / "nowhere").client_keypair()


async def _delivered(address: str, actor_id: str, curve: CurveKeys | None, timeout: float) -> bool:
    async with SampleSender(address, actor_id, curve=curve, resend_after_s=0.5) as sender:
        await sender.send(make_sample(actor_id=actor_id, seq=0))
        try:
            await sender.flush(timeout=timeout)
        except TimeoutError:
            return False
        return True


async def test_only_the_runs_actor_key_gets_samples_in(tmp_path):
    keys = generate_keys(tmp_path / "run")
    # an intruder that knows the learner's public key (it is not secret) but has its own key pair
    generate_keys(tmp_path / "intruder")
    shutil.copy(tmp_path / "run" / "learner.key", tmp_path / "intruder" / "learner.key")
    stored: list[str] = []
    denied_before = _curve.DENIED["connections"]
    async with SampleReceiver(
        "tcp://127.0.0.1:*", lambda s: stored.append(s.actor_id), curve=keys
    ) as receiver:
        assert not await _delivered(receiver.endpoint, "plain", None, 2.0)  # no CURVE at all
        assert not await _delivered(
            receiver.endpoint, "intruder", CurveKeys(tmp_path / "intruder"), 2.0
        )
        assert await _delivered(receiver.endpoint, "actor", keys, 20.0)
    assert stored == ["actor"]
    assert _curve.DENIED["connections"] > denied_before  # the intruder reached ZAP and was refused
    assert _curve._authenticators == {}  # the ZAP thread stops with its last socket


async def test_an_actor_does_not_talk_to_a_server_without_the_learners_secret(tmp_path):
    keys = generate_keys(tmp_path / "run")
    impostor = generate_keys(tmp_path / "impostor")  # binds where the learner would be
    # the impostor even admits the run's actor key, yet cannot complete the handshake
    shutil.copy(tmp_path / "run" / "actors.key", tmp_path / "impostor" / "actors.key")
    stored: list[str] = []
    async with SampleReceiver(
        "tcp://127.0.0.1:*", lambda s: stored.append(s.actor_id), curve=impostor
    ) as receiver:
        assert not await _delivered(receiver.endpoint, "actor", keys, 2.0)
    assert stored == []


async def _first_update(sub: WeightSubscriber, timeout: float) -> WeightUpdate | None:
    try:
        async with asyncio.timeout(timeout):
            return await sub.latest()
    except TimeoutError:
        return None


async def test_weights_reach_only_the_runs_actors_and_come_only_from_its_learner(tmp_path):
    keys = generate_keys(tmp_path / "run")
    other = generate_keys(tmp_path / "other")
    async with WeightBroadcaster("tcp://127.0.0.1:*", republish_s=0.1, curve=keys) as pub:
        pub.publish(_update(1))
        plain = WeightSubscriber(pub.endpoint)
        stranger = WeightSubscriber(pub.endpoint, curve=other)
        actor = WeightSubscriber(pub.endpoint, curve=keys)
        try:
            assert (await _first_update(actor, 20.0)).version == 1
            assert await _first_update(plain, 1.5) is None
            assert await _first_update(stranger, 0.5) is None
        finally:
            for sub in (plain, stranger, actor):
                sub.close()
    # a publisher with another server key: the run's actor never takes its announcements
    async with WeightBroadcaster("tcp://127.0.0.1:*", republish_s=0.1, curve=other) as rogue:
        rogue.publish(_update(99))
        async with WeightSubscriber(rogue.endpoint, curve=keys) as sub:
            assert await _first_update(sub, 1.5) is None
        async with WeightSubscriber(rogue.endpoint, curve=other) as own:  # it does publish
            assert (await _first_update(own, 20.0)).version == 99


async def test_transport_config_keys_dir_secures_every_endpoint(tmp_path):
    keys = generate_keys(tmp_path / "keys")
    config = TransportConfig(
        samples_address="tcp://127.0.0.1:*",
        weights_address="tcp://127.0.0.1:*",
        keys_dir=str(keys.directory),
    )
    stored: list[int] = []
    async with SampleReceiver.from_config(config, lambda s: stored.append(s.seq)) as receiver:
        assert not await _delivered(receiver.endpoint, "plain", None, 1.5)
        sender_config = TransportConfig(
            samples_address=receiver.endpoint, keys_dir=str(keys.directory)
        )
        async with SampleSender.from_config(sender_config, "a0") as sender:
            await sender.send(make_sample(seq=0))
            await sender.flush(timeout=20)
    assert stored == [0]


async def test_a_failed_bind_holds_no_zap_handler(tmp_path):
    """Binding a secured socket to an address in use fails cleanly: the socket is closed and
    the context's ZAP handler is released (the next server starts its own)."""
    import zmq

    from mlerl.protocol._curve import _authenticators

    keys = generate_keys(tmp_path / "run")
    async with WeightBroadcaster("tcp://127.0.0.1:*", republish_s=0.1, curve=keys) as pub:
        held = {k: v[1] for k, v in _authenticators.items()}
        with pytest.raises(zmq.ZMQError):
            WeightBroadcaster(pub.endpoint, republish_s=0.1, curve=keys)
        assert {k: v[1] for k, v in _authenticators.items()} == held
