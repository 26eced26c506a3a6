"""Test helper process: a SampleReceiver that journals samples (fsync per batch, then ack).

Usage: python _receiver_proc.py ADDRESS JOURNAL ENDPOINT_FILE [DIE_AT]

At start it truncates a torn last line and restores the dedupe state from the journal. With
DIE_AT it SIGKILLs itself in the middle of writing the journal's DIE_AT-th line (half a line
written and flushed, not committed, not acked): a crash at the worst moment.
"""

import asyncio
import os
import signal
import sys
from pathlib import Path

from mlerl.protocol import Sample, SampleReceiver


def restore(journal: Path) -> list[tuple[str, int]]:
    data = journal.read_bytes() if journal.exists() else b""
    complete = data[: data.rfind(b"\n") + 1]
    if len(complete) != len(data):
        with journal.open("r+b") as f:
            f.truncate(len(complete))
    pairs = []
    for line in complete.decode().splitlines():
        actor_id, seq = line.split()
        pairs.append((actor_id, int(seq)))
    return pairs


async def main(address: str, journal: Path, endpoint_file: Path, die_at: int | None) -> None:
    stored = restore(journal)
    count = len(stored)
    f = journal.open("ab")

    async def on_sample(sample: Sample) -> None:
        nonlocal count
        line = f"{sample.actor_id} {sample.seq}\n".encode()
        count += 1
        if count == die_at:
            f.write(line[:3])
            f.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        f.write(line)

    async def commit() -> None:
        f.flush()
        os.fsync(f.fileno())

    receiver = SampleReceiver(address, on_sample, stored=stored, commit=commit)
    tmp = endpoint_file.with_suffix(".tmp")
    tmp.write_text(receiver.endpoint)
    tmp.replace(endpoint_file)
    async with receiver:
        await asyncio.Event().wait()


if __name__ == "__main__":
    die = int(sys.argv[4]) if len(sys.argv) > 4 else None
    asyncio.run(main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), die))
