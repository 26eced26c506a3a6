"""torchrun's in-place restart across two nodes, with the environment the learner's torchrun gets
in `mlerl slurm`'s job script (``mlerl.cli._slurm.TORCHRUN_ENV``): two real torchrun agents on
this host (c10d rendezvous, gloo), one rank each. Rank 1 dies after the first collective while
rank 0 sits outside any collective, so rank 0's agent restarts it as a "membership change", later
than rank 1's agent restarts rank 1, and the new rank 0 is slower to start: the case in which a
store shared across restart rounds hands the restarted rank 1 rank 0's address of the previous
round (``Connection refused``, a restart spent on each; docs/faults.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from mlerl.cli._ports import PortLease
from mlerl.cli._slurm import TORCHRUN_ENV

WORKER = """
import datetime, json, os, sys, time
from pathlib import Path
import torch, torch.distributed as dist

rank = int(os.environ["RANK"])
log, marker = Path(sys.argv[1]), Path(sys.argv[2])
with log.open("a") as f:
    f.write(json.dumps({"rank": rank, "pid": os.getpid(), "event": "start"}) + "\\n")
if rank == 0 and marker.exists():
    time.sleep(3)  # the restarted rank 0 is slower to start (a busier node): rank 1 must wait
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
t = torch.ones(1)
dist.all_reduce(t)
if not marker.exists():
    if rank == 1:
        marker.touch()
        os._exit(1)
    time.sleep(120)  # healthy and outside any collective: its agent restarts it for the new round
dist.all_reduce(t)
done = {"rank": rank, "pid": os.getpid(), "event": "done", "sum": t.item()}
with log.open("a") as f:
    f.write(json.dumps(done) + "\\n")
dist.destroy_process_group()
"""


def test_a_rank_restarted_across_two_agents_meets_its_peer_of_the_new_round(tmp_path):
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    log, marker = tmp_path / "events.jsonl", tmp_path / "died"
    lease = PortLease(tmp_path / "locks")
    (port,) = lease.take(1)
    env = {**os.environ, **TORCHRUN_ENV, "OMP_NUM_THREADS": "1"}
    agents = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--nnodes=2",
                "--nproc_per_node=1",
                "--rdzv-backend=c10d",
                f"--rdzv-endpoint=127.0.0.1:{port}",
                "--rdzv-id=restart-test",
                "--max-restarts=3",
                str(worker),
                str(log),
                str(marker),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        outs = [a.communicate(timeout=300)[0] for a in agents]
    finally:
        for a in agents:
            a.kill()
        lease.release()
    events = [json.loads(line) for line in log.read_text().splitlines()]
    starts = [e["rank"] for e in events if e["event"] == "start"]
    done = {e["rank"]: e["sum"] for e in events if e["event"] == "done"}
    both = "\n".join(outs)[-6000:]
    assert [a.returncode for a in agents] == [0, 0], both
    assert marker.exists()  # rank 1 did die once
    # one restart round, each rank started exactly twice: no start was spent on a stale address
    assert sorted(starts) == [0, 0, 1, 1], (starts, both)
    assert "connectFullMesh failed" not in both
    # the second round's ranks met each other: 2 after the first all-reduce, 4 after the second
    assert done == {0: 4.0, 1: 4.0}
