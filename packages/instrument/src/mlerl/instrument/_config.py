"""`InstrumentConfig`: how a run instruments its programs and rewards them (the `instrument`
section of `mlerl train`'s config; this package owns it, the actors read it)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from mlerl.instrument._channel import MarkerMode
from mlerl.instrument._reward import RewardConfig


class InstrumentMode(str, enum.Enum):
    ast = "ast"
    """Deterministic AST insertion (the CPU default)."""
    lm = "lm"
    """A frozen copy of the policy inserts the prints; each answer is verified, AST fallback."""
    paper = "paper"
    """The frozen LM's output is used unverified, with plain prints: the exact reproduction."""


@dataclass
class InstrumentConfig:
    mode: InstrumentMode = InstrumentMode.ast
    """Who inserts the progress prints (see :class:`InstrumentMode`)."""
    markers: MarkerMode = MarkerMode.secure
    """How the markers a program reached are read (see :class:`MarkerMode`)."""
    reward: RewardConfig = field(default_factory=RewardConfig)
    """Reward constants (the paper's by default)."""

    def __post_init__(self) -> None:
        # Member names are the YAML values (OmegaConf matches enum names), as in LearnerConfig.
        # Constructed in Python, a plain string ("ast") is accepted too; an unknown one is refused.
        from mlerl.protocol import ConfigError

        for name, kind in (("mode", InstrumentMode), ("markers", MarkerMode)):
            value = getattr(self, name)
            try:
                setattr(self, name, kind(value))
            except ValueError:
                raise ConfigError(
                    name, f"must be one of {[k.value for k in kind]}, got {value!r}"
                ) from None
