"""With 2 learner ranks the split metrics are the whole batch's, on every rank (each rank holds
only its share of the samples: rank 0 the even ones, rank 1 the odd ones)."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("split_worker.py")


def _worker():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("split_worker", WORKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(120)
def test_two_ranks_log_the_split_metrics_of_the_whole_batch(tmp_path):
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                str(tmp_path / "rdv"),
                str(rank),
                str(tmp_path / f"{rank}.json"),
            ]
        )
        for rank in (0, 1)
    ]
    assert [p.wait(timeout=100) for p in procs] == [0, 0]
    got = [json.loads((tmp_path / f"{rank}.json").read_text()) for rank in (0, 1)]
    assert got[0] == got[1]
    m = got[0]
    # the six rows, by hand: pg_mass 1..6 (total 21); improve = rows 1, 3, 5
    assert (
        m["split/all/n"] == 6.0
        and m["split/kind/improve/n"] == 3.0
        and m["split/kind/scratch/n"] == 3.0
    )
    assert m["split/kind/improve/pg_share"] == pytest.approx((2 + 4 + 6) / 21)
    assert m["split/kind/scratch/reward_mean"] == pytest.approx((0 + 2 + 4) / 3)
    assert m["split/all/valid_frac"] == pytest.approx(5 / 6)
    assert m["split/all/pg_share_failed"] == pytest.approx(5 / 21)  # row 4 (pg_mass 5) is invalid
    assert m["split/task/t1/n"] == 2.0 and m["split/task/t1/reward_mean"] == pytest.approx(
        (1 + 4) / 2
    )
    assert m == pytest.approx(_worker().split_metrics(_worker().rows()))
