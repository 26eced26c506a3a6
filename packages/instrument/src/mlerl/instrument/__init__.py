"""mlerl.instrument: progress markers for generated programs and the partial-credit reward.

Pipeline (paper section 3.2): ``instrument_ast`` or ``LMInstrumenter`` inserts marker prints ->
``prepare_run`` turns them into an unforgeable nonce channel (or leaves plain prints in paper
mode) -> the sandbox runs the program and streams stdout into ``MarkerScanner`` (``scan_text``
for a complete output; ``clean_output``: the output with plain markers, for prompts) ->
``compute_reward`` turns (markers, status, grade, direction) into the reward.

- markers: ``MARKERS`` (the paper's seven);
- the LM instrumenter: ``LMInstrumenter``, ``LMInstrumentConfig``, its prompt
  ``INSTRUMENT_PROMPT``, ``judge`` (accept an answer or fall back to the AST) and
  ``drop_unjustified`` (the markers ``judge`` would refuse, removed);
- the reward: ``compute_reward`` (its range: ``reward_range``; the normalised score:
  ``normalised_score``), ``RewardConfig``, ``RewardKind``, ``Reference``;
- the run's ``instrument`` section: ``InstrumentConfig`` (``InstrumentMode``, ``MarkerMode``).

See docs/instrument.md.
"""

from mlerl.instrument._ast_instrument import instrument_ast
from mlerl.instrument._channel import clean_output, prepare_run
from mlerl.instrument._config import InstrumentConfig, InstrumentMode, MarkerMode
from mlerl.instrument._lm import (
    INSTRUMENT_PROMPT,
    LMInstrumentConfig,
    LMInstrumenter,
    drop_unjustified,
    judge,
)
from mlerl.instrument._markers import MARKERS
from mlerl.instrument._reward import (
    Reference,
    RewardConfig,
    RewardKind,
    compute_reward,
    normalised_score,
    reward_range,
)
from mlerl.instrument._scanner import MarkerScanner, scan_text

__version__ = "0.1.0"

__all__ = [
    "MARKERS",
    "instrument_ast",
    "LMInstrumenter",
    "LMInstrumentConfig",
    "INSTRUMENT_PROMPT",
    "judge",
    "drop_unjustified",
    "prepare_run",
    "MarkerScanner",
    "scan_text",
    "clean_output",
    "compute_reward",
    "normalised_score",
    "reward_range",
    "RewardConfig",
    "RewardKind",
    "Reference",
    "InstrumentConfig",
    "InstrumentMode",
    "MarkerMode",
]
