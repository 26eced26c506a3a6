"""``mlerl-instrument``: instrument a program, or score a run's stdout.

mlerl-instrument FILE.py [--mode ast|lm|paper] [--plain]
    ast   (default) deterministic markers, secure nonce channel; the nonce goes to stderr
    paper deterministic markers as plain prints (the paper's regex channel)
    lm    an OpenAI-compatible server (--openai-base-url URL --model NAME) instruments,
          falling back to ast; path and reason go to stderr; secure channel
    --plain prints the instrumented program without the channel (marker prints only)
mlerl-instrument credit --stdout LOG [--nonce N] [--status S --valid --score X
                        --lower-is-better]
    JSON: markers found, their count, the partial credit (-10 + 0.1 n) and, with --status,
    the paper reward.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from mlerl.instrument._ast_instrument import instrument_ast
from mlerl.instrument._channel import MarkerMode, prepare_run
from mlerl.instrument._lm import LMInstrumenter
from mlerl.instrument._reward import RewardConfig, RewardKind, compute_reward
from mlerl.instrument._scanner import scan_text
from mlerl.protocol import ChatMessage, Completion, ExecStatus, SamplingParams, WeightUpdate


class _OpenAIChat:
    """A minimal :class:`mlerl.protocol.InferenceEngine` over ``POST /chat/completions``."""

    policy_version = 0

    def __init__(self, base_url: str, model: str, timeout_s: float = 600.0) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.timeout_s = model, timeout_s

    def _one(self, conv: Sequence[ChatMessage], params: SamplingParams) -> Completion:
        body = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in conv],
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
        }
        req = urllib.request.Request(
            self.url, json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
            choice = json.load(resp)["choices"][0]
        text = choice["message"]["content"] or ""
        return Completion(
            prompt_ids=[],
            token_ids=[],
            logprobs=[],
            text=text,
            finish_reason=choice.get("finish_reason") or "stop",
        )

    async def generate(
        self, conversations: Sequence[Sequence[ChatMessage]], params: SamplingParams
    ) -> list[Completion]:
        return [await asyncio.to_thread(self._one, c, params) for c in conversations]

    async def update_weights(self, update: WeightUpdate) -> None:
        raise NotImplementedError("the instrumenting model is frozen")

    async def close(self) -> None:
        return None


def _instrument(args: argparse.Namespace) -> int:
    try:
        code = Path(args.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"mlerl-instrument: cannot read {args.file}: {exc}", file=sys.stderr)
        return 1
    if args.mode == "lm":
        if not (args.openai_base_url and args.model):
            print(
                "mlerl-instrument: --mode lm needs an engine: pass --openai-base-url URL "
                "--model NAME (or use LMInstrumenter from Python)",
                file=sys.stderr,
            )
            return 2
        engine = _OpenAIChat(args.openai_base_url, args.model)
        result = asyncio.run(LMInstrumenter(engine).instrument(code))
        print(
            f"path: {result.path} reason: {result.reason or '-'} {result.detail}", file=sys.stderr
        )
        instrumented = result.code
    else:
        try:
            instrumented = instrument_ast(code)
        except (SyntaxError, ValueError) as exc:
            print(f"mlerl-instrument: {args.file} does not parse: {exc}", file=sys.stderr)
            return 1
    if args.plain or args.mode == "paper":
        sys.stdout.write(instrumented)
        return 0
    prepared = prepare_run(instrumented, MarkerMode.secure)
    print(f"nonce: {prepared.nonce}", file=sys.stderr)
    if prepared.untrusted:
        print(f"untrusted (no markers): {prepared.untrusted}", file=sys.stderr)
    sys.stdout.write(prepared.program)
    return 0


def _credit(args: argparse.Namespace) -> int:
    try:
        data = Path(args.stdout).read_bytes()
    except OSError as exc:
        print(f"mlerl-instrument: cannot read {args.stdout}: {exc}", file=sys.stderr)
        return 1
    markers = scan_text(data, args.nonce)
    cfg = RewardConfig(kind=RewardKind.PAPER)  # the paper's raw score: no task reference needed
    out: dict[str, object] = {
        "mode": "secure" if args.nonce else "paper",
        "markers": markers,
        "n_markers": len(markers),
        "partial_credit": cfg.failure + cfg.per_marker * len(markers),
    }
    if args.status:
        try:
            result = compute_reward(
                markers, ExecStatus(args.status), args.score, args.valid, args.lower_is_better, cfg
            )
        except ValueError as exc:
            print(f"mlerl-instrument credit: {exc}", file=sys.stderr)
            return 2
        out.update(reward=result.reward, case=result.case)
    print(json.dumps(out))
    return 0


def _parser_credit() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mlerl-instrument credit")
    p.add_argument("--stdout", required=True, help="file holding the run's stdout")
    p.add_argument("--nonce", default=None, help="the run's nonce (secure mode); omit for paper")
    p.add_argument("--status", choices=[s.value for s in ExecStatus], default=None)
    p.add_argument("--score", type=float, default=None)
    p.add_argument("--valid", action="store_true")
    p.add_argument("--lower-is-better", action="store_true")
    return p


def _parser_instrument() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mlerl-instrument",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file")
    p.add_argument("--mode", choices=["ast", "lm", "paper"], default="ast")
    p.add_argument("--plain", action="store_true", help="print marker prints, no channel")
    p.add_argument("--openai-base-url", default=None)
    p.add_argument("--model", default=None)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["credit"]:
            return _credit(_parser_credit().parse_args(argv[1:]))
        return _instrument(_parser_instrument().parse_args(argv))
    except SystemExit as exc:  # argparse: usage errors exit 2, --help exits 0
        return int(exc.code or 0)


if __name__ == "__main__":
    raise SystemExit(main())
