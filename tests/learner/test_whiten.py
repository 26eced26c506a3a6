"""Advantage whitening: hand-derived numbers, and rank-global statistics (fake and real 2-rank groups)."""

import json
import math
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from mlerl.learner._advantages import whiten

# Two "ranks": rank 0 holds tokens [1, 3] (and one pad), rank 1 holds [5, 7].
A0, M0 = torch.tensor([[1.0, 3.0, 99.0]]), torch.tensor([[1.0, 1.0, 0.0]])
A1, M1 = torch.tensor([[5.0, 7.0]]), torch.tensor([[1.0, 1.0]])
S5 = math.sqrt(5.0)


def test_whiten_by_hand():
    # [1, 3, 5, 7]: mean 4, population variance (9 + 1 + 1 + 9) / 4 = 5 -> [-3, -1, 1, 3] / sqrt 5
    a = torch.tensor([[1.0, 3.0, 0.0], [5.0, 7.0, 42.0]])
    m = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    out = whiten(a, m)
    assert out.flatten().tolist() == pytest.approx(
        [-3 / S5, -1 / S5, 0.0, 1 / S5, 3 / S5, 0.0], rel=1e-6
    )
    assert out.dtype == a.dtype


class _FakeGroup:
    """A sum all-reduce between threads, one per simulated rank."""

    def __init__(self, world: int) -> None:
        self.barrier, self.slots = threading.Barrier(world), [None] * world

    def reducer(self, rank: int):
        def all_reduce(t: torch.Tensor) -> torch.Tensor:
            self.slots[rank] = t.clone()
            self.barrier.wait()
            total = sum(self.slots)
            self.barrier.wait()  # nobody overwrites a slot before every rank has summed
            t.copy_(total)
            return t

        return all_reduce


def test_whiten_uses_every_ranks_tokens():
    group, out = _FakeGroup(2), {}

    def rank(r, a, m):
        out[r] = whiten(a, m, all_reduce=group.reducer(r))

    threads = [threading.Thread(target=rank, args=args) for args in ((0, A0, M0), (1, A1, M1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    # the same numbers as one process holding all four tokens
    assert out[0].flatten().tolist() == pytest.approx([-3 / S5, -1 / S5, 0.0], rel=1e-6)
    assert out[1].flatten().tolist() == pytest.approx([1 / S5, 3 / S5], rel=1e-6)
    # without the reduce each rank whitens alone: [1, 3] -> [-1, 1], which is what went wrong before
    assert whiten(A0, M0).flatten().tolist() == pytest.approx([-1.0, 1.0, 0.0], rel=1e-6)


WORKER = """
import json, sys, torch, torch.distributed as dist
from pathlib import Path
from mlerl.learner._advantages import whiten
dist.init_process_group("gloo")
r = dist.get_rank()
a, m = ([[1.0, 3.0, 99.0]], [[1.0, 1.0, 0.0]]) if r == 0 else ([[5.0, 7.0]], [[1.0, 1.0]])
def all_reduce(t):
    dist.all_reduce(t)
    return t
out = whiten(torch.tensor(a), torch.tensor(m), all_reduce=all_reduce)
Path(sys.argv[1], f"rank{r}.json").write_text(json.dumps(out.flatten().tolist()))
dist.destroy_process_group()
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_whiten_over_a_real_two_rank_gloo_group(tmp_path):
    script = tmp_path / "whiten_worker.py"
    script.write_text(WORKER)
    torchrun = Path(sys.executable).with_name("torchrun")
    # each rank writes its own file: two ranks printing to one pipe lost a line in CI
    proc = subprocess.run(
        [str(torchrun), "--standalone", "--nproc_per_node=2", str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rank0, rank1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert rank0 == pytest.approx([-3 / S5, -1 / S5, 0.0], rel=1e-6)
    assert rank1 == pytest.approx([1 / S5, 3 / S5], rel=1e-6)


# Mutation survivors (benchmarks/tools/mutation.py): edges the tests above left open.


def test_whiten_one_token_and_no_token():
    # one token: it is its own mean, variance 0 -> 0 (not NaN: divided by sqrt(0 + eps))
    assert whiten(torch.tensor([[3.0, 8.0]]), torch.tensor([[1.0, 0.0]])).tolist() == [[0.0, 0.0]]
    # no token at all: zeros, no 0 / 0
    out = whiten(torch.tensor([[3.0, 8.0]]), torch.zeros(1, 2))
    assert out.tolist() == [[0.0, 0.0]]


def test_whiten_eps_is_added_to_the_variance():
    # [0, 2]: mean 1, variance 1; eps = 3 -> (+-1) / sqrt(1 + 3) = +-0.5
    out = whiten(torch.tensor([[0.0, 2.0]]), torch.ones(1, 2), eps=3.0)
    assert out.flatten().tolist() == pytest.approx([-0.5, 0.5])


def test_whiten_a_fractional_variance():
    # [0, 1]: mean 0.5, population variance 0.25 (not floored to 0) -> [-1, 1]
    out = whiten(torch.tensor([[0.0, 1.0]]), torch.ones(1, 2))
    assert out.flatten().tolist() == pytest.approx([-1.0, 1.0], rel=1e-6)
