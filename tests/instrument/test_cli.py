"""mlerl-instrument: instrument a file, score a log."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from mlerl.instrument._markers import marker_of
from mlerl.instrument._cli import main

PROG = "import pandas as pd\ndf = pd.read_csv('input/x.csv')\n"


def test_instrument_modes(tmp_path: Path, capsys) -> None:
    f = tmp_path / "p.py"
    f.write_text(PROG)
    assert main([str(f), "--mode", "paper"]) == 0
    out = capsys.readouterr().out
    assert [marker_of(s) for s in ast.parse(out).body] == [
        None,
        "imported packages",
        None,
        "loaded data",
    ]
    assert main([str(f)]) == 0
    cap = capsys.readouterr()
    nonce = cap.err.split("nonce: ", 1)[1].strip()
    assert nonce in cap.out and 'print("loaded data")' not in cap.out
    assert main([str(f), "--mode", "lm"]) == 2
    assert "needs an engine" in capsys.readouterr().err
    assert main([str(tmp_path / "missing.py")]) == 1


def test_credit(tmp_path: Path, capsys) -> None:
    log = tmp_path / "out.log"
    key, vkey = b"a" * 32, b"b" * 32
    log.write_bytes(
        b"\nNONCE1234:key "
        + key
        + b" "
        + vkey
        + b"\nloaded data\n\n"
        + key
        + b":imported packages\n"
        + key
        + b":testing loss:\n"
        + vkey
        + b":testing loss: 0.5\n"
    )
    assert main(["credit", "--stdout", str(log), "--nonce", "NONCE1234"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["markers"] == ["imported packages", "testing loss:"]
    assert abs(got["partial_credit"] - (-9.8)) < 1e-9  # -10 + 0.1*2
    assert (
        main(["credit", "--stdout", str(log), "--status", "ok", "--valid", "--score", "0.7"]) == 0
    )
    got = json.loads(capsys.readouterr().out)
    assert got["mode"] == "paper" and got["n_markers"] == 3 and got["reward"] == 0.7
    assert main(["credit", "--stdout", str(log), "--status", "ok", "--valid"]) == 2
    assert main(["credit"]) == 2
