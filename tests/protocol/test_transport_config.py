"""TransportConfig: validated like every component config, and wires the four endpoints."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mlerl.protocol import (
    ConfigError,
    Sample,
    SampleReceiver,
    SampleSender,
    TransportConfig,
    WeightBroadcaster,
    WeightSubscriber,
    WeightUpdate,
    to_object,
)

from .conftest import make_sample


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"resend_after_s": 0}, "transport.resend_after_s"),
        ({"sender_hwm": 0}, "transport.sender_hwm"),
        ({"samples_address": "http://x:1"}, "transport.samples_address"),
        ({"max_batch": "many"}, "transport.max_batch"),
    ],
)
def test_bad_values_name_the_key(overrides: dict, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        to_object(TransportConfig, overrides, prefix="transport")
    assert info.value.key == key


async def test_from_config_wires_both_streams(short_dir: Path) -> None:
    config = TransportConfig(
        samples_address=f"ipc://{short_dir}/s.sock",
        weights_address=f"ipc://{short_dir}/w.sock",
        resend_after_s=0.5,
        republish_s=0.05,
    )
    stored: list[Sample] = []

    async def on_sample(sample: Sample) -> None:
        stored.append(sample)

    update = WeightUpdate(version=2, uri="/w.safetensors", size_bytes=1, sha256="0" * 64)
    async with (
        SampleReceiver.from_config(config, on_sample),
        WeightBroadcaster.from_config(config) as pub,
        SampleSender.from_config(config, "a0") as sender,
        WeightSubscriber.from_config(config) as sub,
    ):
        pub.publish(update)
        await sender.send(make_sample(seq=0))
        await sender.flush(timeout=30)
        async with asyncio.timeout(30):
            assert await sub.latest() == update
    assert [s.seq for s in stored] == [0]
