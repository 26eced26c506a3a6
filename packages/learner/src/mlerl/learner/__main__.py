"""``python -m mlerl.learner --config RUN_DIR/config.yaml``: the learner process (see ``_run``)."""

from __future__ import annotations

import argparse
import logging
import sys

from mlerl.protocol import ConfigError, CurveError, MetricsConfig, load_section

from mlerl.learner._checkpoint import CheckpointError
from mlerl.learner._config import LearnerConfig
from mlerl.learner._run import run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mlerl.learner", description=__doc__)
    parser.add_argument("--config", required=True, help="resolved run config (YAML) with a 'learner' section")
    parser.add_argument("--section", default="learner", help="the config section to read")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        config = load_section(LearnerConfig, args.config, args.section)
        metrics = _metrics_config(args.config)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    try:
        return run(config, metrics)
    except (CurveError, CheckpointError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _metrics_config(path: str) -> MetricsConfig:
    """The run config's ``logging`` section; without one, JSONL only (no W&B)."""
    try:
        return load_section(MetricsConfig, path, "logging")
    except ConfigError as exc:
        if exc.key == "logging" and "missing" in exc.message:
            return MetricsConfig(wandb_mode="disabled")
        raise


if __name__ == "__main__":
    sys.exit(main())
