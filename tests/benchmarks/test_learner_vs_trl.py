"""benchmarks/throughput/learner_vs_trl.py on a tiny model: the JSON it writes counts the batch's tokens.

The mlerl half always runs; the TRL half only where TRL is installed (``pip install -e '.[bench]'``).
With ``--length-jitter 0`` every sample has exactly ``prompt-len`` + ``response-len`` tokens, so
the expected counts are products of the command-line sizes.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "throughput" / "learner_vs_trl.py"
B, GROUP, MICRO, P, R, WARMUP, REPS, ROUNDS = 4, 2, 2, 5, 3, 1, 2, 2
TINY = [
    "--vocab-size",
    "64",
    "--hidden-size",
    "32",
    "--num-layers",
    "1",
    "--num-heads",
    "2",
    "--num-kv-heads",
    "1",
    "--intermediate-size",
    "64",
    "--batch-size",
    str(B),
    "--group-size",
    str(GROUP),
    "--micro-batch-size",
    str(MICRO),
    "--prompt-len",
    str(P),
    "--response-len",
    str(R),
    "--length-jitter",
    "0",
    "--warmup",
    str(WARMUP),
    "--reps",
    str(REPS),
    "--rounds",
    str(ROUNDS),
    "--threads",
    "1",
]


def _run(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path / "result.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *TINY, "--out", str(out), *extra],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc, out


def _check_timing(result: dict, tokens: int, response_tokens: int) -> None:
    assert len(result["update_s"]) == REPS * ROUNDS  # pooled over rounds
    assert len(result["load_avg"]) == ROUNDS
    assert all(t > 0 for t in result["update_s"])
    assert result["min_s"] <= result["median_s"] <= result["max_s"]
    assert result["tokens_per_s"] == pytest.approx(tokens / result["median_s"])
    assert result["response_tokens_per_s"] == pytest.approx(response_tokens / result["median_s"])
    assert (
        result["updates_applied"] == WARMUP + REPS
    )  # per round, each with a fresh learner/trainer
    assert result["torch_threads"] == 1


def test_mlerl_half_writes_token_counts_and_throughput(tmp_path):
    proc, out = _run(tmp_path, "--skip-trl")
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["batch"] == {
        "samples": B,
        "prompt_tokens": B * P,
        "response_tokens": B * R,
        "tokens": B * (P + R),
    }
    assert set(report["results"]) == {"mlerl"}
    _check_timing(report["results"]["mlerl"], B * (P + R), B * R)
    assert "--skip-trl" in report["command"]
    assert report["machine"]["cpus"] == os.cpu_count()
    assert (
        len(report["machine"]["load_avg_before"]) == len(report["machine"]["load_avg_after"]) == 3
    )
    assert report["versions"]["torch"] and report["versions"]["transformers"]
    assert "mlerl Learner.update" in proc.stdout


def test_trl_half_processes_the_same_tokens_and_the_same_update(tmp_path):
    pytest.importorskip("trl")
    proc, out = _run(tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    trl = report["results"]["trl"]
    _check_timing(trl, B * (P + R), B * R)
    # TRL's own count of the tokens it was handed (prompt + completion, no padding)
    assert trl["tokens_seen_per_update"] == B * (P + R)
    # from the same weights and batch, both frameworks move the parameters the same way
    assert report["first_update_agreement"]["cosine"] > 0.99
    assert report["mlerl_over_trl_tokens_per_s"] == pytest.approx(
        report["results"]["mlerl"]["tokens_per_s"] / trl["tokens_per_s"]
    )
    assert report["versions"]["trl"]


def test_group_size_that_does_not_divide_the_batch_is_refused(tmp_path):
    proc, out = _run(tmp_path, "--skip-trl", "--group-size", "3")
    assert proc.returncode != 0
    assert "--group-size" in proc.stderr
    assert not out.exists()
