import json

from mlerl.embedded.__main__ import main

from .test_model import TINY


def test_build_prints_path_and_figures(tmp_path, data_dir, capsys):
    sets = [
        f"--set={k}={','.join(v) if isinstance(v, list) else v}"
        for k, v in TINY.items()
        if k not in ("sft_steps",)
    ]
    results = tmp_path / "figures.json"
    rc = main(
        [
            "build",
            "--cache-dir",
            str(tmp_path / "c"),
            "--data-dir",
            str(data_dir),
            "--steps",
            "2",
            *sets,
            "--results",
            str(results),
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    path = out.splitlines()[0]
    figures = json.loads(results.read_text())
    assert figures["model_dir"] == path and figures["steps"] == 2
    assert figures["params"] > 0 and len(figures["loss_first_last"]) == 2
