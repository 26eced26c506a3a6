"""``python -m mlerl.learner --config RUN_DIR/config.yaml``: the learner process (see ``_run``).

Reads the run contract (``mlerl.protocol.load_run``: ``model.path``, ``seed``, ``transport``),
its own ``learner`` section, the reward's range from ``instrument`` and ``logging`` (both
optional). The run directory is the one holding the config file.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from mlerl.learner._config import LearnerConfig
from mlerl.learner._faults import RankFailed, die
from mlerl.learner._process import run
from mlerl.protocol import ConfigError, MetricsConfig, die_with_parent, load_run, load_section


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mlerl.learner", description=__doc__)
    parser.add_argument(
        "--config", required=True, type=Path, help="RUN_DIR/config.yaml, the resolved run config"
    )
    parser.add_argument("--section", default="learner", help="the config section to read")
    args = parser.parse_args(argv)
    if "TORCHELASTIC_RUN_ID" in os.environ:  # a torchrun rank: end with torchrun, however it ends
        die_with_parent()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        config = load_section(LearnerConfig, args.config, args.section)
        contract = load_run(args.config)
        run_dir = args.config.resolve().parent
        transport = contract.transport.resolve(run_dir)
        metrics = _metrics_config(args.config)
        bounds = _reward_bounds(args.config)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    try:
        return run(
            config,
            transport,
            model_path=contract.model.path,
            run_dir=run_dir,
            seed=contract.seed,
            metrics=metrics,
            reward_bounds=bounds,
        )
    except RankFailed as failed:
        die(failed)  # logs, records a lasting reason for the supervisor, exits without a collective
        raise  # unreachable: die() ends the process


def _reward_bounds(path: Path) -> tuple[float, float]:
    """The door's reward bounds: the range of the run's reward (its ``instrument`` section, the
    one owner of the reward; without one, the default reward's)."""
    from mlerl.instrument import InstrumentConfig, reward_range

    try:
        instrument = load_section(InstrumentConfig, path, "instrument")
    except ConfigError as exc:
        if exc.key == "instrument" and "missing" in exc.message:
            instrument = InstrumentConfig()
        else:
            raise
    return reward_range(instrument.reward)


def _metrics_config(path: Path) -> MetricsConfig:
    """The run config's ``logging`` section; without one, JSONL only (no W&B)."""
    try:
        return load_section(MetricsConfig, path, "logging")
    except ConfigError as exc:
        if exc.key == "logging" and "missing" in exc.message:
            return MetricsConfig(wandb_mode="disabled")
        raise


if __name__ == "__main__":
    sys.exit(main())
