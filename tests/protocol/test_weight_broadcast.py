"""WeightBroadcaster / WeightSubscriber: late joiners catch up; versions never go backwards."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import zmq
import zmq.asyncio

from mlerl.protocol import WeightBroadcaster, WeightSubscriber, WeightUpdate, encode
from mlerl.protocol._messages import Ack


def _update(version: int) -> WeightUpdate:
    return WeightUpdate(
        version=version, uri=f"/ckpt/v{version}.safetensors", size_bytes=10, sha256="0" * 64
    )


@pytest.mark.parametrize("transport", ["tcp", "ipc"])
async def test_late_joiner_receives_latest(transport: str, short_dir: Path) -> None:
    bind = "tcp://127.0.0.1:*" if transport == "tcp" else f"ipc://{short_dir}/w.sock"
    async with WeightBroadcaster(bind, republish_s=0.05) as pub:
        for version in range(4):
            pub.publish(_update(version))  # nobody subscribed yet: all of these are lost
        async with WeightSubscriber(pub.endpoint) as sub:
            async with asyncio.timeout(20):
                got = await sub.latest()
    assert got.version == 3 and sub.version == 3


async def test_versions_never_go_backwards(short_dir: Path) -> None:
    async with WeightBroadcaster(f"ipc://{short_dir}/w.sock", republish_s=0.05) as pub:
        async with WeightSubscriber(pub.endpoint) as sub:
            pub.publish(_update(1))
            seen = []
            async with asyncio.timeout(20):
                async for update in sub:
                    seen.append(update.version)
                    if update.version == 1:
                        pub.publish(_update(5))
                    if update.version == 5:
                        break
            # stale and repeated announcements (republished v5, a rogue v2) are never yielded
            rogue = zmq.asyncio.Context.instance().socket(zmq.PUB)
            rogue.setsockopt(zmq.LINGER, 0)
            rogue.bind(f"ipc://{short_dir}/rogue.sock")
            sub._sock.connect(f"ipc://{short_dir}/rogue.sock")
            try:
                async with asyncio.timeout(20):
                    while sub.malformed < 2:  # until the rogue's messages have arrived
                        rogue.send(encode(_update(2)))
                        rogue.send(b"\xc1 not a message")
                        rogue.send(encode(Ack(actor_id="x", seq=1)))
                        assert await sub.poll() is None
                        await asyncio.sleep(0.02)
            finally:
                rogue.close()
            pub.publish(_update(6))
            async with asyncio.timeout(20):
                seen.append((await sub.latest()).version)
    assert seen == [1, 5, 6]


async def test_publish_rejects_old_version(short_dir: Path) -> None:
    pub = WeightBroadcaster(f"ipc://{short_dir}/w.sock")
    try:
        pub.publish(_update(3))
        with pytest.raises(ValueError, match="version"):
            pub.publish(_update(3))
        assert pub.latest.version == 3
    finally:
        pub.close()
