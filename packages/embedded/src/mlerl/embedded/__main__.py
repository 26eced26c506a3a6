"""`python -m mlerl.embedded build|eval|random`: bootstrap the default policy and measure it;
write a real-size architecture (Qwen2.5-0.5B, -3B) initialised at random, for the GPU path."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m mlerl.embedded")
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser(
        "build",
        help="build the bootstrapped policy here (or reuse this cache's build; never the "
        "shipped reference build); print its path",
    )
    b.add_argument("--cache-dir", required=True, type=Path)
    b.add_argument("--data-dir", type=Path, default=None, help="task data (default: CACHE/tasks)")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--steps", type=int, default=None, help="SFT step bound")
    b.add_argument("--seconds", type=float, default=None, help="SFT wall-clock bound")
    b.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override any BootstrapConfig field (repeatable), e.g. --set hidden_size=64",
    )
    for q in (b, sub.add_parser("eval", help="sample, run and validate programs of a policy dir")):
        q.add_argument("--eval-tasks", default="", help="comma-separated task ids to measure")
        q.add_argument("--samples", type=int, default=32)
        q.add_argument("--temperature", type=float, default=0.8)
        q.add_argument("--max-new-tokens", type=int, default=768)
        q.add_argument("--results", type=Path, default=None, help="write figures to this JSON")
    sub.choices["eval"].add_argument("--model-dir", required=True, type=Path)
    sub.choices["eval"].add_argument("--data-dir", required=True, type=Path)
    from mlerl.embedded._random import ARCHITECTURES

    r = sub.add_parser(
        "random", help="write (or reuse) a randomly initialised real-size model directory"
    )
    r.add_argument(
        "arch",
        choices=sorted(ARCHITECTURES),
        help="published architecture (tiny: CI's scaled-down one)",
    )
    r.add_argument("--out", required=True, type=Path, help="the model directory to write")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    return p


def _parse_sets(items: list[str]) -> dict:
    """FIELD=VALUE pairs typed like the BootstrapConfig field they name."""
    from dataclasses import fields

    from mlerl.embedded import BootstrapConfig

    types = {f.name: f.type for f in fields(BootstrapConfig)}
    out: dict = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or name not in types:
            raise SystemExit(
                f"--set {item!r}: expected FIELD=VALUE with FIELD one of {sorted(types)}"
            )
        kind = str(types[name])
        if kind.startswith("list"):
            out[name] = [v for v in value.split(",") if v]
        elif kind == "bool":
            out[name] = value.lower() in ("1", "true", "yes")
        else:
            out[name] = {"int": int, "float": float}.get(kind, str)(value)
    return out


def main(argv: list[str] | None = None) -> int:
    from mlerl.embedded import BootstrapConfig, build_policy, evaluate_drafts, read_manifest

    args = _parser().parse_args(argv)
    if args.cmd == "random":
        from mlerl.embedded import build_random_model

        print(
            build_random_model(
                args.arch,
                args.out,
                seed=args.seed,
                dtype=args.dtype,
                log=lambda m: print(m, file=sys.stderr),
            )
        )
        return 0
    if args.cmd == "build":
        overrides = {"seed": args.seed}
        if args.steps is not None:
            overrides["sft_steps"] = args.steps
        if args.seconds is not None:
            overrides["sft_seconds"] = args.seconds
        overrides.update(_parse_sets(args.set))
        model_dir = build_policy(
            args.cache_dir,
            BootstrapConfig(**overrides),
            data_dir=args.data_dir,
            log=lambda m: print(m, file=sys.stderr),
            reference=None,
        )
        data_dir = args.data_dir or args.cache_dir / "tasks"
    else:
        model_dir, data_dir = args.model_dir, args.data_dir
    manifest = read_manifest(model_dir) or {}
    figures = {
        k: manifest.get(k)
        for k in (
            "key",
            "params",
            "steps",
            "seconds",
            "steps_per_s",
            "tokens_per_s",
            "build_seconds",
            "corpus",
        )
    }
    curve = manifest.get("loss_curve") or []
    figures["loss_first_last"] = [curve[0][2], curve[-1][2]] if curve else None
    tasks = [t for t in args.eval_tasks.split(",") if t]
    if tasks:
        results = evaluate_drafts(
            model_dir,
            tasks,
            data_dir,
            samples=args.samples,
            temperature=args.temperature,
            max_new_tokens=args.max_new_tokens,
        )
        figures["eval"] = [{k: v for k, v in asdict(r).items() if k != "scores"} for r in results]
    print(model_dir)
    print(json.dumps(figures, indent=1))
    if args.results:
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text(json.dumps({"model_dir": str(model_dir), **figures}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
