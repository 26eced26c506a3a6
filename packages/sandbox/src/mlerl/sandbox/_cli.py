"""``mlerl-sandbox``: run one program, reap leftovers, check the host.

    mlerl-sandbox run PROGRAM.py --backend local|docker --timeout S --memory-mb M
                      [--cpus N] [--data DIR] [--collect submission.csv]
    mlerl-sandbox reap [--backend docker] [--all]
    mlerl-sandbox doctor

(The benchmark is ``python benchmarks/throughput/sandbox_overhead.py`` in the repository.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from mlerl.protocol import ConfigError
from mlerl.sandbox._factory import make_sandbox, reap
from mlerl.sandbox._types import ExecutionRequest, Limits, SandboxConfig, SandboxUnavailable


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mlerl-sandbox", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="run PROGRAM.py; print the ExecutionResult as JSON")
    run.add_argument("program", type=Path)
    for q in (run,):
        q.add_argument("--backend", choices=("local", "docker"), default="local")
        q.add_argument("--image", default=SandboxConfig.image)
    run.add_argument("--timeout", type=float, default=Limits.wall_time_s)
    run.add_argument("--memory-mb", type=int, default=Limits.memory_mb)
    run.add_argument("--cpus", type=float, default=Limits.cpus)
    run.add_argument("--pids", type=int, default=Limits.pids)
    run.add_argument("--disk-mb", type=int, default=Limits.disk_mb)
    run.add_argument("--output-bytes", type=int, default=Limits.output_bytes)
    run.add_argument("--data", type=Path, default=None)
    run.add_argument(
        "--collect",
        action="append",
        default=None,
        help="file to copy out (repeatable; default submission.csv)",
    )
    rp = sub.add_parser("reap", help="remove leftovers of dead executors")
    rp.add_argument("--backend", choices=("local", "docker"), default="docker")
    rp.add_argument("--all", action="store_true", help="also those of live executors")
    sub.add_parser("doctor", help="print which isolation features work on this host")
    return p


async def _run(args: argparse.Namespace) -> int:
    config = SandboxConfig(backend=args.backend, image=args.image, max_concurrency=1)
    limits = Limits(
        wall_time_s=args.timeout,
        memory_mb=args.memory_mb,
        cpus=args.cpus,
        pids=args.pids,
        disk_mb=args.disk_mb,
        output_bytes=args.output_bytes,
    )
    request = ExecutionRequest(
        program=args.program.read_text(),
        data_dir=args.data,
        limits=limits,
        collect=tuple(args.collect) if args.collect else ("submission.csv",),
    )
    sandbox = make_sandbox(config)
    try:
        result = await sandbox.run(request)
    finally:
        await sandbox.close()
    print(json.dumps(result.to_json()))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.cmd == "run":
            return asyncio.run(_run(args))
        if args.cmd == "reap":
            counts = asyncio.run(reap(SandboxConfig(backend=args.backend), args.all))
            print(json.dumps(counts))
            return 0
        from mlerl.sandbox._doctor import doctor  # "doctor"

        print(json.dumps(doctor(SandboxConfig()), indent=2))
        return 0
    except UnicodeDecodeError as exc:
        print(
            f"mlerl-sandbox: error: {args.program} is not UTF-8 text ({exc.reason} at byte "
            f"{exc.start})",
            file=sys.stderr,
        )
        return 2
    except (ConfigError, OSError, SandboxUnavailable) as exc:
        print(f"mlerl-sandbox: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
