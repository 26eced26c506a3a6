"""``make_sandbox``, the reaper entry point and the leak count (no hidden registry: an explicit
match)."""

from __future__ import annotations

from pathlib import Path

from mlerl.sandbox import _cgroup
from mlerl.sandbox._types import Sandbox, SandboxConfig
from mlerl.sandbox._workdir import owner_alive, owner_tag, reap_workdirs


def make_sandbox(config: SandboxConfig) -> Sandbox:
    """The backend named by ``config.backend``. Docker connects lazily on the first run."""
    match config.backend:
        case "local":
            from mlerl.sandbox._local import LocalSandbox

            return LocalSandbox(config)
        case "docker":
            from mlerl.sandbox._docker import DockerSandbox

            return DockerSandbox(config)
    raise ValueError(f"unknown sandbox backend {config.backend!r}")


async def reap(config: SandboxConfig, everything: bool = False) -> dict[str, int]:
    """Remove leftovers of dead executors: containers (Docker backend), cgroups, work dirs.

    ``everything`` also removes those of live executors (only when none is running).
    """
    counts = {
        "cgroups": await _cgroup.reap(owner_alive, everything),
        "workdirs": reap_workdirs(config.work_root, everything),
    }
    if config.backend == "docker":
        from mlerl.sandbox._docker import reap_containers

        counts["containers"] = await reap_containers(config, everything)
    return counts


async def leftovers(config: SandboxConfig) -> dict[str, int]:
    """What this process's sandboxes hold now: run work dirs, run cgroups and (Docker backend)
    containers under this process's owner tag. All 0 once every run has ended and ``close()``
    returned: what a leak check counts."""
    owner = owner_tag()
    counts = {
        "run_dirs": len(list((Path(config.work_root) / owner).glob("*"))),
        "cgroups": sum(
            len([p for p in (base / owner).glob("*") if p.is_dir()])
            for base in _cgroup.base_dirs().values()
        ),
    }
    if config.backend == "docker":
        from mlerl.sandbox._docker import count_containers

        counts["containers"] = await count_containers(config, owner)
    return counts
