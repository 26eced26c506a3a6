"""Test helper process: N actors (one SampleSender each) send COUNT samples each, then flush.

Usage: python _sender_proc.py ADDRESS COUNT ACTORS HWM RESEND_AFTER_S
Prints the senders' counters as JSON and exits 0 once every sample is acknowledged.
"""

import asyncio
import json
import sys

from mlerl.protocol import ExecStatus, PromptKind, Sample, SampleSender


def make_sample(actor_id: str, seq: int) -> Sample:
    return Sample(
        sample_id=f"{actor_id}:{seq}",
        actor_id=actor_id,
        seq=seq,
        task_id="t",
        prompt_kind=PromptKind.SCRATCH,
        prompt_ids=[1, 2, 3],
        response_ids=[4, 5, 6],
        behaviour_logprobs=[-0.5, -1.0, -0.25],
        policy_version=0,
        t_sampled=1.0,
        exec_status=ExecStatus.OK,
        reward=float(seq % 7),
    )


async def actor(address: str, actor_id: str, count: int, hwm: int, resend: float) -> dict:
    sender = SampleSender(address, actor_id, hwm=hwm, resend_after_s=resend, heartbeat_s=0.5)
    async with sender:
        for seq in range(count):
            await sender.send(make_sample(actor_id, seq))
        await sender.flush(timeout=120)
    return dict(sender.counters, unacked=sender.unacked, acked_seq=sender.acked_seq)


async def main(address: str, count: int, actors: int, hwm: int, resend: float) -> None:
    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(actor(address, f"a{i}", count, hwm, resend)) for i in range(actors)]
    print(json.dumps([t.result() for t in tasks]))


if __name__ == "__main__":
    a = sys.argv
    asyncio.run(main(a[1], int(a[2]), int(a[3]), int(a[4]), float(a[5])))
