"""The ``mlerl-sandbox`` command: run prints one JSON result; doctor and reap report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlerl.sandbox._cli import main


def test_run_prints_the_result_as_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # work_root default lives under TMPDIR
    program = tmp_path / "p.py"
    program.write_text("print('hello')\nopen('out.txt', 'w').write('7')\n")
    rc = main(
        [
            "run",
            str(program),
            "--backend",
            "local",
            "--timeout",
            "20",
            "--memory-mb",
            "512",
            "--collect",
            "out.txt",
        ]
    )
    result = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert result["status"] == "ok" and result["exit_code"] == 0
    assert result["stdout"]["head"] == "hello\n"
    assert Path(result["files"]["out.txt"]).read_text() == "7"


def test_run_timeout_status_is_lower_case(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "p.py"
    program.write_text("import time\ntime.sleep(100)\n")
    assert main(["run", str(program), "--timeout", "1", "--memory-mb", "256"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "timeout"


def test_bad_arguments_are_clear_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = tmp_path / "p.py"
    program.write_text("pass\n")
    assert main(["run", str(program), "--timeout", "0"]) == 2
    assert "wall_time_s" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "missing.py")]) == 2
    with pytest.raises(SystemExit):
        main(["run", str(program), "--backend", "vm"])


def test_doctor_reports_each_feature(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor"]) == 0
    report = json.loads(capsys.readouterr().out)
    for key in ("local.bubblewrap", "local.cgroups", "local.tmpfs_workdir", "docker.engine"):
        assert isinstance(report[key], str) and report[key]


def test_reap_local_prints_counts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reap", "--backend", "local"]) == 0
    counts = json.loads(capsys.readouterr().out)
    assert set(counts) == {"cgroups", "workdirs"}


def test_non_utf8_program_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "p.py"
    program.write_bytes(b"print('\xff\xfe')\n")
    assert main(["run", str(program)]) == 2
    err = capsys.readouterr().err
    assert "is not UTF-8 text" in err and "Traceback" not in err


def test_doctor_without_a_docker_socket_says_so(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    assert main(["doctor"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["docker.engine"].startswith("unreachable")
    assert report["local.bubblewrap"]  # the local part is still reported
