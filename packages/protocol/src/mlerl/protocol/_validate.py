"""What the learner accepts: content checks on a decoded :class:`Sample` that need context.

``decode`` enforces the structural invariants (field types, one log-prob per response token,
finite reward and duration, ordered timestamps); :func:`check_sample` adds the checks that keep
a well-formed but poisoned sample out of training, each of which would otherwise break or
hijack an update:

==========================  =========================================  ===========================
field                       accepted                                   else
==========================  =========================================  ===========================
``behaviour_logprobs``      finite, ``MIN_LOGPROB <= lp <= 0``         NaN/inf weights after one
                            (``LOGPROB_SLACK`` of rounding above 0)    update (ratio =
                                                                       exp(lp - old))
``prompt_ids``,             ``0 <= id < vocab_size``                   IndexError in the embedding
``response_ids``
``reward``                  finite, ``reward_min <= r <= reward_max``  one sample dominates the
                            (the reward function's documented range)   batch
``duration_s``,             finite, ``0 <= d <= max_duration_s``       Δt weights of every other
``generation_s``                                                       sample go to ~0
``t_*``                     finite                                     NaN breaks batch ordering
``top_p``, ``top_k``        1 and -1/0 (no truncation); a top_p that   the learner would score a
                            is NaN or outside (0, 1] is refused as no  distribution not sampled
                            probability (vLLM refuses it too)
==========================  =========================================  ===========================

The reason returned names the field first (``"reward: ..."``), so refusals can be counted per
field. Checks are pure and cheap (C-speed loops over the token lists).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlerl.protocol._messages import Sample

MIN_LOGPROB = -1000.0
"""Lowest accepted behaviour log-prob. A token whose probability underflows float32 (log-prob
below about -104) cannot have been sampled, so -1000 never refuses a real sample; it catches
sentinel values such as -1e30 whose importance ratio overflows."""
LOGPROB_SLACK = 1e-4
"""Rounding allowed above 0 (probability 1.0001 is an engine's rounding, not a poison)."""


@dataclass(frozen=True)
class SampleLimits:
    """The context :func:`check_sample` checks against (the learner's model and reward)."""

    vocab_size: int | None = None
    """Token ids must be below this (the learner model's ``config.vocab_size``); None: unchecked."""
    reward_min: float = -math.inf
    """Lowest accepted reward: the reward function's range (``mlerl.instrument.reward_range``)."""
    reward_max: float = math.inf
    """Highest accepted reward (infinite: any finite reward, the paper's raw score)."""
    max_duration_s: float = 86400.0
    """Longest accepted execution time (and generation time)."""


def _bad_ids(name: str, ids: list[int], vocab_size: int | None) -> str | None:
    if not ids:
        return None
    low, high = min(ids), max(ids)
    if low < 0:
        return f"{name}: token id {low} is negative"
    if vocab_size is not None and high >= vocab_size:
        return f"{name}: token id {high} is outside the vocabulary (size {vocab_size})"
    return None


def _in_range(name: str, value: float, low: float, high: float) -> str | None:
    if not math.isfinite(value):
        return f"{name}: {value} is not finite"
    if not low <= value <= high:
        return f"{name}: {value} is outside [{low}, {high}]"
    return None


def check_sample(sample: Sample, limits: SampleLimits) -> str | None:
    """None when ``sample`` may be stored and trained on, else why not (field name first)."""
    if not 0.0 < sample.top_p <= 1.0:  # NaN too: no nucleus mass, whatever the engine did
        return f"top_p: {sample.top_p} is not a probability in (0, 1]"
    if sample.top_p < 1.0 or sample.top_k > 0:  # truncated sampling: behaviour log-probs
        return (
            f"top_p: sampled with top_p={sample.top_p}, top_k={sample.top_k}; the learner "
            "scores the untruncated distribution (use top_p=1, top_k=-1)"
        )
    lps = sample.behaviour_logprobs  # one per response token: ``Sample`` (and decode) enforce it
    if not all(map(math.isfinite, lps)):
        bad = next(x for x in lps if not math.isfinite(x))
        return f"behaviour_logprobs: {bad} is not finite"
    if lps and max(lps) > LOGPROB_SLACK:
        return f"behaviour_logprobs: {max(lps)} > 0 is not a log-probability"
    if lps and min(lps) < MIN_LOGPROB:
        return f"behaviour_logprobs: {min(lps)} is below {MIN_LOGPROB}"
    for name, ids in (("prompt_ids", sample.prompt_ids), ("response_ids", sample.response_ids)):
        reason = _bad_ids(name, ids, limits.vocab_size)
        if reason:
            return reason
    reason = (
        _in_range("reward", sample.reward, limits.reward_min, limits.reward_max)
        or _in_range("duration_s", sample.duration_s, 0.0, limits.max_duration_s)
        or _in_range("generation_s", sample.generation_s, 0.0, limits.max_duration_s)
    )
    if reason:
        return reason
    for name in ("t_sampled", "t_exec_started", "t_exec_finished", "t_graded"):
        t = getattr(sample, name)
        if t is not None and not math.isfinite(t):
            return f"{name}: {t} is not finite"
    return None
