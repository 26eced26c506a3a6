"""benchmarks/throughput/protocol_throughput.py runs and writes its report (the figures themselves are not asserted)."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "throughput"))
bench = importlib.import_module("protocol_throughput")


def test_bench_writes_report(tmp_path: Path) -> None:
    out = tmp_path / "results" / "protocol.json"
    bench.main(
        [
            "--samples",
            "20",
            "--repeat",
            "1",
            "--prompt-tokens",
            "8",
            "--response-tokens",
            "8",
            "--out",
            str(out),
        ]
    )
    report = json.loads(out.read_text())
    cases = {(r["profile"], r["transport"], r["storage"], r["security"]) for r in report["results"]}
    assert cases == {
        (p, t, s, c)
        for p in ("realistic", "tiny")
        for t in ("tcp", "ipc")
        for s in ("memory", "journal")
        for c in ("none", "curve")
    }
    assert all(r["samples"] == 20 and r["samples_per_s"] > 0 for r in report["results"])
