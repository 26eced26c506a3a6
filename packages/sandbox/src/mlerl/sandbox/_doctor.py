"""``mlerl-sandbox doctor``: which isolation features work on this host, each tried for real."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

from mlerl.sandbox import _cgroup
from mlerl.sandbox._local import probe_isolation
from mlerl.sandbox._types import SandboxConfig
from mlerl.sandbox._workdir import _mount_tmpfs, _umount, owner_tag


def _cgroups_work() -> str:
    cg = _cgroup.create(owner_tag(), "doctor-" + uuid.uuid4().hex[:8], 64, 16, 1.0)
    if cg is None:
        return "unavailable (not writable: memory/pids limits and group kill degrade)"
    kinds = ",".join(sorted(cg.dirs))
    asyncio.run(cg.remove())
    version = "v2" if _cgroup.is_v2() else "v1"
    return f"ok ({version}: {kinds})"


def _tmpfs_works() -> str:
    if os.geteuid() != 0:
        return "unavailable (not root: disk limited per file by RLIMIT_FSIZE only)"
    with tempfile.TemporaryDirectory() as d:
        ok = _mount_tmpfs(Path(d), 1)
        if ok:
            _umount(Path(d))
    return "ok" if ok else "mount failed"


async def _docker_works(config: SandboxConfig) -> dict[str, str]:
    import aiodocker

    try:
        docker = aiodocker.Docker(url=config.docker_host or None)
    except Exception as exc:  # noqa: BLE001 - no socket, bad DOCKER_HOST: said, not a traceback
        return {"engine": f"unreachable: {type(exc).__name__}: {exc}"[:300], "image": "?"}
    try:
        async with asyncio.timeout(10):
            info = await docker.system.info()
            engine = f"ok ({info.get('ServerVersion', '?')}, cgroup v{info.get('CgroupVersion')})"
            try:
                await docker.images.inspect(config.image)
                image = "ok"
            except aiodocker.DockerError:
                image = "missing (bash scripts/build_image.sh)"
    except Exception as exc:  # noqa: BLE001 - an engine failing mid-check: said, not a traceback
        return {"engine": f"unreachable: {type(exc).__name__}: {exc}"[:300], "image": "?"}
    finally:
        await docker.close()
    return {"engine": engine, "image": f"{config.image}: {image}"}


def doctor(config: SandboxConfig) -> dict[str, Any]:
    """A dict feature -> 'ok ...' or why not."""
    report: dict[str, Any] = {
        "uid": os.geteuid(),
        "local.bubblewrap": probe_isolation(config)["bubblewrap"],
        "local.cgroups": _cgroups_work(),
        "local.tmpfs_workdir": _tmpfs_works(),
        "local.prlimit": "ok" if shutil.which("prlimit") else "absent (no rlimits)",
    }
    report |= {f"docker.{k}": v for k, v in asyncio.run(_docker_works(config)).items()}
    return report
