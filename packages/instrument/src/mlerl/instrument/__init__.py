"""mlerl.instrument: progress markers for generated programs and the partial-credit reward.

Pipeline (paper section 3.2): ``instrument_ast`` or ``LMInstrumenter`` inserts marker prints ->
``prepare_run`` turns them into an unforgeable nonce channel (or leaves plain prints in paper
mode) -> the sandbox runs the program and streams stdout into ``MarkerScanner`` ->
``compute_reward`` turns (markers, status, grade, direction) into the reward.
"""

from mlerl.instrument._ast_instrument import instrument_ast, plan_markers
from mlerl.instrument._lm import (
    INSTRUMENT_PROMPT,
    REASONS,
    Instrumented,
    InstrumentStats,
    LMInstrumentConfig,
    LMInstrumenter,
    LRUCache,
    extract_code,
    drop_unjustified,
    judge,
)
from mlerl.instrument._markers import LOSS_MARKERS, MARKERS, marker_of
from mlerl.instrument._reward import (
    Reference,
    RewardConfig,
    RewardKind,
    RewardResult,
    compute_reward,
)
from mlerl.instrument._run import EMIT_LIMIT, MarkerMode, PreparedRun, clean_output, prepare_run
from mlerl.instrument._scanner import MarkerScanner, scan_text
from mlerl.instrument._verify import Rejected, finalize

__version__ = "0.1.0"

__all__ = [
    "EMIT_LIMIT",
    "INSTRUMENT_PROMPT",
    "LOSS_MARKERS",
    "MARKERS",
    "REASONS",
    "InstrumentStats",
    "Instrumented",
    "LMInstrumentConfig",
    "LMInstrumenter",
    "LRUCache",
    "MarkerMode",
    "MarkerScanner",
    "PreparedRun",
    "Reference",
    "Rejected",
    "RewardConfig",
    "RewardKind",
    "RewardResult",
    "clean_output",
    "compute_reward",
    "extract_code",
    "finalize",
    "instrument_ast",
    "drop_unjustified",
    "judge",
    "marker_of",
    "plan_markers",
    "prepare_run",
    "scan_text",
]
