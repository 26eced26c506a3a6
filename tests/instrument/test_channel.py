"""The secure marker channel and the scanner, running real programs in the local sandbox."""

from __future__ import annotations

import ast
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from mlerl.instrument import (
    MARKERS,
    MarkerScanner,
    clean_output,
    compute_reward,
    instrument_ast,
    prepare_run,
    scan_text,
)
from mlerl.instrument._prelude import EMIT_LIMIT
from mlerl.protocol import ExecStatus

FORGER = "".join(f"print({m!r})\n" for m in MARKERS) + "raise SystemExit(1)\n"


def test_program_printing_all_markers_itself_then_failing_gets_minus_ten(run) -> None:
    prepared = prepare_run(instrument_ast(FORGER), "secure")
    res = run(prepared.program)
    assert res.status is ExecStatus.PROGRAM_ERROR
    for m in MARKERS:
        assert m.encode() in res.stdout  # the prints ran ...
    markers = scan_text(res.stdout, prepared.nonce)
    assert markers == []  # ... and earned nothing
    assert compute_reward(markers, res.status, None, False, False).reward == -10.0
    # The same program in paper mode is credited all seven (the paper's channel is forgeable).
    paper = prepare_run(instrument_ast(FORGER), "paper")
    assert len(scan_text(run(paper.program).stdout, paper.nonce)) == 7


def test_markers_survive_a_timeout(run) -> None:
    code = "import time\nimport numpy as np\nx = np.loadtxt(['1 2'])\ntime.sleep(60)\n"
    prepared = prepare_run(instrument_ast(code))
    res = run(prepared.program, wall_time_s=5.0)
    assert res.status is ExecStatus.TIMEOUT
    markers = scan_text(res.stdout, prepared.nonce)
    assert markers == ["imported packages", "loaded data"]
    assert compute_reward(markers, res.status, None, False, False).reward == -9.8  # -10 + 0.2


def _keys(stdout: bytes, nonce: str) -> tuple[bytes, bytes]:
    m = re.match(rb"\n" + nonce.encode() + rb":key ([0-9a-f]{32}) ([0-9a-f]{32})\n", stdout)
    assert m is not None, stdout[:200]
    return m.group(1), m.group(2)


def test_redirected_stdout_values_and_keys_absent_from_the_source(run) -> None:
    code = (
        "import contextlib, io, sys\n"
        "from sklearn.metrics import accuracy_score\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    val_acc = accuracy_score([1, 0], [1, 1])\n"
        "print('SRC', open(__file__).read().replace(chr(10), ' '))\n"
    )
    prepared = prepare_run(instrument_ast(code), nonce="n0nce" * 4)
    res = run(prepared.program)
    assert res.status is ExecStatus.OK
    key, vkey = _keys(res.stdout, prepared.nonce)
    src = next(ln for ln in res.stdout.splitlines() if ln.startswith(b"SRC "))
    assert b"accuracy_score" in src and key not in src and vkey not in src
    assert scan_text(res.stdout, prepared.nonce) == ["imported packages", "testing loss:"]
    assert "testing loss: 0.5" in clean_output(res.stdout.decode(), prepared.nonce).splitlines()


def test_a_marker_value_that_raises_never_breaks_the_program(run) -> None:
    inst = 'import os\nprint("testing loss:", undefined_name)\nprint("after")\n'
    prepared = prepare_run(inst)
    res = run(prepared.program)
    assert res.status is ExecStatus.OK and b"after" in res.stdout
    assert scan_text(res.stdout, prepared.nonce) == ["testing loss:"]


def test_emit_limit_and_future_import_and_docstring_kept(run) -> None:
    inst = '"""Doc."""\nfrom __future__ import annotations\nfor i in range(500):\n    print("loaded data")\n'
    prepared = prepare_run(inst)
    tree = ast.parse(prepared.program)
    assert isinstance(tree.body[1], ast.ImportFrom) and ast.get_docstring(tree) == "Doc."
    res = run(prepared.program)
    assert res.status is ExecStatus.OK
    key, _ = _keys(res.stdout, prepared.nonce)
    assert res.stdout.count(key + b":loaded data\n") == EMIT_LIMIT


def test_paper_mode_leaves_the_program_alone_and_unparsable_code_passes_through() -> None:
    assert prepare_run("x = 1\n", "paper").program == "x = 1\n"
    assert prepare_run("x = 1\n", "paper").nonce is None
    bad = prepare_run("def (:\n", "secure")
    assert bad.program == "def (:\n" and bad.nonce


K, V = b"a" * 32, b"b" * 32
OUTPUT = (
    b"\nNONCE:key " + K + b" " + V + b"\n"
    b"progress 10%\rprogress 100%\n"
    b"loaded data (plain print, forged)\n"
    b"partial line \xc3"
    b"\xa9 then\n"
    + K
    + b":imported packages\n"
    + V
    + b":testing loss: 0.93\n"  # display line: no credit
    + K
    + b":testing loss:\n"
    b"x" + K + b":trained model\n"  # not at line start
    b"NONCE:defined model\n"  # the nonce alone earns nothing
     + K + b":defined models\n"  # not a marker
    b"NONCE:key "
    + b"c" * 32
    + b" "
    + b"d" * 32
    + b"\n"  # a second handshake is ignored
    + b"c" * 32
    + b":trained model\n"
    + K
    + b":predicted test labels"  # final line without newline (killed program)
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(OUTPUT)), max_size=12))
def test_scanner_is_split_invariant(cuts: list[int]) -> None:
    for nonce, expected in [
        ("NONCE", ["imported packages", "testing loss:", "predicted test labels"]),
        (
            None,
            [
                "loaded data",
                "imported packages",
                "testing loss:",
                "trained model",
                "defined model",
                "predicted test labels",
            ],
        ),
    ]:
        scanner = MarkerScanner(nonce)
        edges = [0, *sorted(cuts), len(OUTPUT)]
        for a, b in zip(edges, edges[1:]):
            scanner.feed(OUTPUT[a:b])
        assert scanner.close() == expected


def test_scanner_needs_the_handshake_first_and_stops_at_a_taint_line() -> None:
    late = b"hello\nNONCE:key " + K + b" " + V + b"\n" + K + b":loaded data\n"
    assert scan_text(late, "NONCE") == []  # program output before the handshake: dead channel
    tainted = b"\nNONCE:key " + K + b" " + V + b"\n\n" + K + b":loaded data\n\n" + K
    tainted += b":tainted gc.get_objects\n" + K + b":trained model\n"
    scanner = MarkerScanner("NONCE")
    scanner.feed(tainted)
    assert scanner.close() == ["loaded data"] and scanner.tainted == "gc.get_objects"
    assert clean_output(tainted.decode(), "NONCE") == "loaded data\ntrained model\n"


def test_scanner_memory_is_bounded_and_long_lines_are_handled() -> None:
    scanner = MarkerScanner(None, max_line_bytes=256)
    for _ in range(1000):
        scanner.feed(b"x" * 1000)
    scanner.feed(b"trained ")
    scanner.feed(b"model" + b"y" * 5000 + b"\n")
    assert len(scanner._buf) <= 256
    assert scanner.markers == ["trained model"]
    secure = MarkerScanner("NONCE", max_line_bytes=256)
    secure.feed(b"NONCE:key " + K + b" " + V + b"\n")
    secure.feed(K + b":loaded data" + b"z" * 1000 + b"\n" + K + b":loaded data\n")
    assert secure.markers == ["loaded data"] and len(secure._buf) <= 256
