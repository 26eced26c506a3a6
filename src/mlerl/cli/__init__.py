"""The `mlerl` command: one entry point dispatching to each component's subcommand.

Also ``rolling_mean``, the trailing mean the run's plots draw, and ``plot_decision_probe``, the
run's probe plot (for scripts that plot runs the same way, e.g. benchmarks/experiments/).
"""

from __future__ import annotations

import os
import sys

from mlerl.cli._curves import plot_decision_probe, rolling_mean

__all__ = ["main", "plot_decision_probe", "rolling_mean"]

__version__ = "0.1.0"

_SUBCOMMANDS = {
    "train": "mlerl.cli._train:main",
    "eval": "mlerl.cli._eval:main",
    "sandbox": "mlerl.sandbox._cli:main",
    "instrument": "mlerl.instrument._cli:main",
    "tasks": "mlerl.bench._cli:main",
    "slurm": "mlerl.cli._slurm:main",
}

_USAGE = """usage: mlerl <command> [args...]

commands:
  train        run RL training (Hydra app; `mlerl train --help`)
  eval         best-of-K evaluation of a checkpoint
  sandbox      run / reap / doctor the program sandbox (= mlerl-sandbox)
  instrument   instrument a program, score its output (= mlerl-instrument)
  tasks        prepare / grade / validate / compare tasks (= mlerl-bench)
  slurm        write the sbatch script of a multi-node training job (torchrun learner + actor nodes)

Benchmarks and experiments are scripts in the repository: `python benchmarks/<dir>/<name>.py`
(benchmarks/README.md).
"""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in {"-h", "--help"}:
        print(_USAGE)
        return 0
    if argv[0] == "--version":
        print(f"mlerl {__version__}")
        return 0
    # transformers' per-call "Loading weights" / "Writing model shards" bars would interleave
    # with mlerl's own progress lines (children inherit this); set it to 0 to see them
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    name, rest = argv[0], argv[1:]
    target = _SUBCOMMANDS.get(name)
    if target is None:
        print(f"mlerl: unknown command {name!r}\n\n{_USAGE}", file=sys.stderr)
        return 2
    module_name, func_name = target.split(":")
    import importlib

    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        print(f"mlerl {name}: not available in this install ({exc})", file=sys.stderr)
        return 2
    sys.argv = [f"mlerl {name}", *rest]
    result = getattr(module, func_name)(rest)
    return int(result or 0)
