"""One rank of a 2-rank gloo group that computes the split metrics of its share of a fixed
batch; writes them as JSON. Not a test module: test_split_ranks.py launches two of these.

Usage: ``python split_worker.py RENDEZVOUS_FILE RANK OUT_JSON``.
"""

import json
import sys

import torch

from mlerl.learner._diagnostics import gather_rows, split_metrics


def rows() -> list[dict]:
    """Six samples: rank 0 takes the even ones (all scratch), rank 1 the odd ones."""
    out = []
    for i in range(6):
        out.append(
            {
                "kind": "improve" if i % 2 else "scratch",
                "task": f"t{i % 3}",
                "valid": i != 4,
                "reward": float(i),
                "score": 0.1 * i,
                "status": "ok" if i != 4 else "timeout",
                "exec_s": 1.0 + i,
                "pg_mass": 1.0 + i,
                "adv": i - 2.5,
            }
        )
    return out


def main(rendezvous: str, rank: int, out: str) -> None:
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=2
    )
    try:
        metrics = split_metrics(gather_rows(rows()[rank::2]))
    finally:
        torch.distributed.destroy_process_group()
    with open(out, "w") as f:
        json.dump(metrics, f)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
