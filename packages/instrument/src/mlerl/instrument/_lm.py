"""LM instrumentation (paper section 3.2, prompt of appendix C.3) with verified fallback.

A frozen copy of the LM, reached through any :class:`mlerl.protocol.InferenceEngine`, is asked to
insert the marker prints. Its answer is accepted only if it verifies
(:func:`mlerl.instrument._verify.finalize`: the original plus marker statements, nothing else),
every marker sits where a statement dominating it performs that stage and alone on its line
(:func:`mlerl.instrument._position.misplaced_markers`; else ``misplaced_marker``), and it holds at
least one marker; otherwise the deterministic instrumenter's output is used and
the reason recorded. Results are cached by the SHA-256 of the program (LRU, bounded); one
``engine.generate`` call serves up to ``batch_size`` distinct uncached programs. Engine failures
and timeouts fall back too but are not cached (they are not the program's property).
``asyncio.CancelledError`` is never swallowed.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import hashlib
import re
from collections import Counter, OrderedDict
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass

from mlerl.instrument._ast_instrument import instrument_ast
from mlerl.instrument._channel import _alone
from mlerl.instrument._markers import marker_of
from mlerl.instrument._position import misplaced_markers, verification_context
from mlerl.instrument._verify import Rejected, count_markers, finalize, parse
from mlerl.protocol import ChatMessage, Completion, InferenceEngine, SamplingParams, check

INSTRUMENT_PROMPT = """\
Please insert print statements in the given python script. The print statements are supposed \
to reflect the progress of executing a script that solves a Kaggle challenge machine learning \
benchmark. These print statements will be used to debug the python script so it needs to \
capture the progress of execution.

Print Statements:
- print("imported packages")
- print("loaded data")
- print("defined model")
- print("training loss:")
- print("trained model")
- print("testing loss:")
- print("predicted test labels")

Requirements:
* Only insert print statement AFTER an operation is actually performed (e.g., data have \
actually been loaded).
* Insert print statements for "training loss:" and "testing loss:" if applicable (i.e., the \
code actually computes training or testing losses).
* Output the entire python script after inserting print statements in a single markdown code \
block (wrapped in ```).
* Do not modify the original python code, other than inserting print statements.

Now please insert print statements for this python script: {code}"""
"""Appendix C.3 of the paper, verbatim up to bullet characters."""

PROMPT_VERSION = "c3-v1"
"""Part of the cache key: change it when the prompt changes."""

REASONS = (
    "unparsable_input",
    "engine_error",
    "engine_timeout",
    "truncated",
    "no_code_block",
    "syntax_error",
    "modified_program",
    "misplaced_marker",
    "no_markers",
)
"""Every fallback reason :class:`Instrumented` can carry."""

_FENCE = re.compile(r"```[ \t]*[\w+-]*[ \t]*\n(.*?)```", re.DOTALL)


@dataclass
class LMInstrumentConfig:
    max_new_tokens: int = 2048
    """Room for the whole program plus seven lines; a truncated answer falls back."""
    temperature: float = 0.0
    """Greedy by default: the instrumenter is a frozen tool, not a policy."""
    batch_size: int = 16
    """Most programs per ``engine.generate`` call."""
    timeout_s: float = 600.0
    """Per ``generate`` call; on expiry the batch falls back to the AST instrumenter."""
    cache_size: int = 4096
    """Entries of the default LRU cache (keyed by program hash)."""

    def __post_init__(self) -> None:
        check(self.max_new_tokens > 0, "max_new_tokens", "must be > 0")
        check(0.0 <= self.temperature <= 5.0, "temperature", "must be in [0, 5]")
        check(self.batch_size > 0, "batch_size", "must be > 0")
        check(self.timeout_s > 0, "timeout_s", "must be > 0")
        check(self.cache_size > 0, "cache_size", "must be > 0")


@dataclass(frozen=True)
class Instrumented:
    code: str
    """The instrumented program (plain-print marker form), ready for ``prepare_run``."""
    path: str
    """``lm`` (the LM's answer verified), ``ast`` (fallback) or ``none`` (input does not parse)."""
    reason: str = ""
    """Empty for ``lm``; else one of :data:`REASONS`."""
    detail: str = ""
    cached: bool = False
    n_markers: int = 0
    """Marker statements in ``code``."""


class LRUCache(OrderedDict[str, Instrumented]):
    """A bounded mapping that forgets the least recently used entry."""

    def __init__(self, max_entries: int) -> None:
        super().__init__()
        self.max_entries = max_entries

    def __getitem__(self, key: str) -> Instrumented:
        value = super().__getitem__(key)
        self.move_to_end(key)
        return value

    def __setitem__(self, key: str, value: Instrumented) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.max_entries:
            self.popitem(last=False)


@dataclass
class InstrumentStats:
    """Counts for metrics: how programs were instrumented and why the LM answer was refused."""

    total: int = 0
    lm: int = 0
    ast: int = 0
    none: int = 0
    cache_hits: int = 0
    reasons: Counter[str] = dataclasses.field(default_factory=Counter)

    def record(self, result: Instrumented) -> None:
        self.total += 1
        setattr(self, result.path, getattr(self, result.path) + 1)
        self.cache_hits += result.cached
        if result.reason:
            self.reasons[result.reason] += 1

    def as_dict(self) -> dict[str, int]:
        out = {k: getattr(self, k) for k in ("total", "lm", "ast", "none", "cache_hits")}
        out.update({f"fallback/{r}": self.reasons[r] for r in REASONS})
        return out


def extract_code(text: str) -> str | None:
    """The longest fenced code block of an answer, or None."""
    blocks = _FENCE.findall(text)
    return max(blocks, key=len) if blocks else None


def code_key(code: str) -> str:
    return hashlib.sha256(f"{PROMPT_VERSION}\0{code}".encode()).hexdigest()


def judge(code: str, completion: Completion) -> Instrumented:
    """Accept the LM's answer for ``code`` or fall back to :func:`instrument_ast`."""
    if completion.finish_reason == "length":
        return _fallback(code, "truncated", "the answer hit max_new_tokens")
    candidate = extract_code(completion.text)
    if candidate is None:
        return _fallback(code, "no_code_block", "no fenced code block in the answer")
    try:
        result = finalize(code, candidate)
    except Rejected as exc:
        return _fallback(code, exc.reason, exc.detail)
    rtree = parse(result, "result")
    n = count_markers(rtree)
    bad = misplaced_markers(rtree, verification_context(parse(code, "original program")))
    markers = [s for s in ast.walk(rtree) if isinstance(s, ast.stmt) and marker_of(s)]
    shared = len(markers) - len(_alone(markers, rtree))
    if bad or shared:
        where = ", ".join(f"{m!r} at line {line}" for line, m in bad[:3])
        detail = where or f"{shared} marker(s) share a line with other code"
        return _fallback(code, "misplaced_marker", detail)
    if n == 0:
        return _fallback(code, "no_markers", "the answer inserted no marker")
    return Instrumented(result, "lm", n_markers=n)


def drop_unjustified(code: str, instrumented: str) -> str:
    """``instrumented`` (``code`` with marker statements, one per line) without the markers
    :func:`judge` would refuse as misplaced: what an answer for ``code`` may claim."""
    bad = {
        line
        for line, _ in misplaced_markers(
            parse(instrumented, "instrumented"),
            verification_context(parse(code, "original program")),
        )
    }
    return "".join(
        text for n, text in enumerate(instrumented.splitlines(keepends=True), 1) if n not in bad
    )


def _fallback(code: str, reason: str, detail: str) -> Instrumented:
    try:
        out = instrument_ast(code)
    except (SyntaxError, ValueError) as exc:
        return Instrumented(code, "none", "unparsable_input", f"input does not parse: {exc}")
    return Instrumented(out, "ast", reason, detail, n_markers=count_markers(parse(out, "ast")))


class LMInstrumenter:
    """Instruments programs with a frozen LM behind ``engine``; see the module docstring."""

    def __init__(
        self,
        engine: InferenceEngine,
        cache: MutableMapping[str, Instrumented] | None = None,
        config: LMInstrumentConfig | None = None,
    ) -> None:
        self.engine = engine
        self.config = config or LMInstrumentConfig()
        self.cache = cache if cache is not None else LRUCache(self.config.cache_size)
        self.stats = InstrumentStats()

    async def instrument(self, code: str) -> Instrumented:
        return (await self.instrument_batch([code]))[0]

    async def instrument_batch(self, codes: Sequence[str]) -> list[Instrumented]:
        """One result per program, in order; never raises for a program or engine failure."""
        results: dict[str, Instrumented] = {}
        todo: dict[str, str] = {}
        for code in codes:
            key = code_key(code)
            if key in results or key in todo:
                continue
            hit = self.cache.get(key)
            if hit is not None:
                results[key] = dataclasses.replace(hit, cached=True)
            elif not _parses(code):
                results[key] = _fallback(code, "unparsable_input", "input does not parse")
            else:
                todo[key] = code
        keys = list(todo)
        for i in range(0, len(keys), self.config.batch_size):
            chunk = keys[i : i + self.config.batch_size]
            for key, result in zip(chunk, await self._query([todo[k] for k in chunk]), strict=True):
                results[key] = result
        out = [results[code_key(c)] for c in codes]
        for result in out:
            self.stats.record(result)
        return out

    async def _query(self, codes: list[str]) -> list[Instrumented]:
        conversations = [
            [ChatMessage(role="user", content=INSTRUMENT_PROMPT.format(code=c))] for c in codes
        ]
        params = SamplingParams(
            max_new_tokens=self.config.max_new_tokens, temperature=self.config.temperature
        )
        try:
            async with asyncio.timeout(self.config.timeout_s):
                completions = await self.engine.generate(conversations, params)
            if len(completions) != len(codes):
                raise RuntimeError(f"engine returned {len(completions)} of {len(codes)} answers")
        except TimeoutError:
            return [
                _fallback(c, "engine_timeout", f"no answer in {self.config.timeout_s} s")
                for c in codes
            ]
        except Exception as exc:  # noqa: BLE001 - any engine failure falls back, CancelledError passes
            return [_fallback(c, "engine_error", f"{type(exc).__name__}: {exc}") for c in codes]
        out = []
        for code, completion in zip(codes, completions, strict=True):
            result = judge(code, completion)
            self.cache[code_key(code)] = result
            out.append(result)
        return out


def _parses(code: str) -> bool:
    try:
        parse(code, "input")
    except Rejected:
        return False
    return True
