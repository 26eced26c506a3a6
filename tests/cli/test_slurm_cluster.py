"""`mlerl slurm` and Hydra's Submitit launcher on a real Slurm cluster: the one of
scripts/ci/setup_slurm.sh (slurmctld + 3 slurmd, each node in its own network namespace with
its own hostname and address; `make test` starts it). Real sbatch/srun/scancel, the tiny policy
of conftest.py, the local sandbox; faults across nodes: scancel, an actor node's processes
killed, the learner's node killed (its slurmd included), a learner rank killed on another node.
docs/faults.md "Across nodes" has the measured times."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import train_args
from .test_distributed_e2e import (
    ENV,
    _assert_exactly_once,
    _checkpointed,
    _journal,
    _steps,
    _wait_for,
)

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

NODES = ["mlerl-n1", "mlerl-n2", "mlerl-n3"]
SETUP = Path(__file__).resolve().parents[2] / "scripts" / "ci" / "setup_slurm.sh"
LOGS = Path("/var/lib/mlerl-slurm/log")  # the daemons' logs (setup_slurm.sh: $ROOT/log)
ENDED = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "NODE_FAIL",
    "TIMEOUT",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
}
TIMES: dict[str, float] = {}  # fault cell -> seconds, written to $MLERL_SLURM_TIMES when set


def _sh(*argv: str, check: bool = True) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)}: {done.stderr.strip()}")
    return done.stdout


@pytest.fixture(scope="module")
def cluster():
    """The 3 nodes, up (a test that downs a node brings it back through the same script)."""
    try:
        states = dict(line.split() for line in _sh("sinfo", "-h", "-N", "-o", "%N %t").splitlines())
    except (OSError, AssertionError) as exc:
        pytest.fail(
            f"no Slurm cluster ({exc}): run `bash {SETUP}` as root, or deselect with -m 'not slurm'"
        )
    if any(not states.get(n, "").startswith(("idle", "mix", "alloc")) for n in NODES):
        pytest.fail(
            f"Slurm nodes not up: {states}; run `bash {SETUP}` as root, or deselect with -m 'not slurm'"
        )
    yield NODES
    if TIMES and os.environ.get("MLERL_SLURM_TIMES"):
        Path(os.environ["MLERL_SLURM_TIMES"]).write_text(json.dumps(TIMES, indent=1))


@pytest.fixture(scope="module")
def overrides(e2e_root: Path) -> list[str]:
    """Every node's Hydra overrides: the tiny policy (built here, once, before any job: a job
    would otherwise spend minutes bootstrapping it inside its time on the cluster)."""
    args = train_args(e2e_root, e2e_root / "slurm-prepare", "prepare_only=true")
    done = subprocess.run(args, capture_output=True, text=True, timeout=1200, env=ENV)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return [a for a in args[4:] if not a.startswith(("hydra.run.dir=", "prepare_only="))]


def _daemon_logs(since: str, lines: int = 80) -> str:
    """The tail of slurmctld's and each slurmd's log, at most ``lines`` lines after the last
    line that contains ``since`` (a fault test that fails shows what the daemons saw)."""
    out = []
    for path in sorted(LOGS.glob("*.log")):
        text = path.read_text(errors="replace")
        part = text[text.rfind(since) :] if since in text else text
        out.append(f"--- {path.name} ---\n" + "\n".join(part.splitlines()[-lines:]))
    return "\n".join(out)


def _node_processes(node: str) -> list[str]:
    """Command lines of a node's processes other than its slurmd (zombies left out)."""
    out = []
    for pid in _sh("ip", "netns", "pids", node).split():
        try:
            cmd = (
                Path(f"/proc/{pid}/cmdline")
                .read_bytes()
                .replace(b"\0", b" ")
                .decode(errors="replace")
            )
            state = next(
                ln
                for ln in Path(f"/proc/{pid}/status").read_text().splitlines()
                if ln.startswith("State:")
            )
        except (OSError, StopIteration):
            continue
        if "Z (zombie)" not in state and not cmd.startswith("slurmd"):
            out.append(f"{pid}: {cmd}")
    return out


def _job(job_id: str) -> dict[str, str]:
    text = _sh("scontrol", "show", "job", "-o", job_id)
    return dict(re.findall(r"(\w+)=(\S*)", text))


def _wait_job(job_id: str, timeout: float) -> dict[str, str]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        info = _job(job_id)
        if info.get("JobState") in ENDED:
            return info
        time.sleep(1)
    raise AssertionError(f"job {job_id} still {_job(job_id).get('JobState')} after {timeout:.0f} s")


SUBMITTED: list[str] = []  # every job id `_submit` got, for `_no_job_left`


def _submit(path: Path) -> str:
    job = _sh("sbatch", "--parsable", str(path)).strip().split(";")[0]
    SUBMITTED.append(job)
    return job


@pytest.fixture(autouse=True)
def _no_job_left():
    """After each test no job of this module is left: a test that failed or timed out leaves its
    job running (or requeued, to start again about 2 min later), and on the shared nodes it
    would meet the next test's job, on the same torchrun rendezvous port too. Seen here: a
    three-node job requeued after its test timed out started beside the two-node test's job,
    which joined its rendezvous store and failed when that job ended."""
    yield
    if not SUBMITTED:
        return

    def left() -> set[str]:  # this module's jobs still queued or running
        return set(SUBMITTED) & set(_sh("squeue", "-h", "-r", "-o", "%A", check=False).split())

    if jobs := left():
        _sh("scancel", *sorted(jobs), check=False)
        _wait_for(lambda: not left(), 120, "the jobs a test left to end")


def _write(
    tmp_path: Path,
    run_dir: Path,
    overrides: list[str],
    *extra: str,
    learner_nodes: int = 1,
    actor_nodes: int = 2,
) -> Path:
    """The job script, written by `mlerl slurm` as a user would (CPU nodes: no GPUs to ask for)."""
    path = tmp_path / "job.sbatch"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mlerl.cli",
            "slurm",
            "--run-dir",
            str(run_dir),
            "--gpus-per-node",
            "0",
            "--learner-nodes",
            str(learner_nodes),
            "--actor-nodes",
            str(actor_nodes),
            "--actors-per-node",
            "1",
            "--out",
            str(path),
            "--",
            *overrides,
            "eval_samples=0",
            "learner.checkpoint_every=1",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return path


def _wait_steps(run_dir: Path, job_id: str, n: int, timeout: float = 900) -> None:
    """Until the learner logged update ``n`` and committed its checkpoint (written after the
    row: a fault before it would resume from an older one); fails at once when the job ends
    first."""

    def reached() -> bool:
        if any(s >= n for s in _steps(run_dir)) and any(c >= n for c in _checkpointed(run_dir)):
            return True
        info = _job(job_id)
        assert info.get("JobState") not in ENDED, (info, _out(run_dir, job_id)[-4000:])
        return False

    _wait_for(reached, timeout, f"update {n} of job {job_id}")


def _out(run_dir: Path, job_id: str) -> str:
    """The job's output: the script's, the learner's log, srun's."""
    path = run_dir / f"slurm-{job_id}.out"
    return path.read_text() if path.exists() else "(no job output)"


def _nothing_left(run_dir: Path, processes) -> None:
    assert {n: _node_processes(n) for n in NODES} == {n: [] for n in NODES}
    assert processes(str(run_dir)) == []


def _pids(node: str, marker: str) -> list[int]:
    return [int(line.split(":", 1)[0]) for line in _node_processes(node) if marker in line]


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _node_up(node: str) -> bool:
    state = _sh("sinfo", "-h", "-n", node, "-o", "%t").strip()
    return state.startswith(("idle", "mix", "alloc"))


def test_job_on_three_nodes_through_scancel_and_dead_nodes(cluster, overrides, tmp_path, processes):
    """One learner node, two actor nodes, through sbatch, one run taken through each fault:
    1. scancel after the first update: every step on every node ends;
    2. sbatch of the same script: the run resumes from its checkpoint and journal;
    3. kill -9 of every mlerl process on an actor node: the other node's actor carries on and the
       learner keeps training;
    4. the learner's node dies whole (its slurmd, the batch script, torchrun, the learner: kill -9
       of every process in its namespace): Slurm marks it DOWN, ends the steps on the other nodes
       and requeues the job (the script asks for --requeue); once the node is back the same job
       runs the script again, which resumes the run to learner.max_updates.
    Every sample is trained at most once and none is lost; nothing is left on any node."""
    run_dir = tmp_path / "run"
    path = _write(tmp_path, run_dir, overrides, "learner.max_updates=6")
    first = _submit(path)
    _wait_steps(run_dir, first, 1)
    assert _job(first)["JobState"] == "RUNNING"
    start = time.monotonic()
    _sh("scancel", first)
    info = _wait_job(first, 120)
    _wait_for(lambda: not any(_node_processes(n) for n in NODES), 60, "every node to be empty")
    TIMES["scancel -> job ended, no process on any node"] = round(time.monotonic() - start, 1)
    assert info["JobState"] == "CANCELLED", info
    _nothing_left(run_dir, processes)
    # the actors ran on their own nodes, with ids named after them, reached through the head's name
    assert sorted(p.name for p in (run_dir / "hosts").iterdir()) == ["mlerl-n2", "mlerl-n3"]

    job = _submit(path)
    start = time.monotonic()
    _wait_for(lambda: "resumed from" in _out(run_dir, job), 600, "the resubmitted job to resume")
    _wait_steps(run_dir, job, max(_steps(run_dir)) + 1)
    TIMES["resubmitted after scancel -> first update"] = round(time.monotonic() - start, 1)

    dead = _pids("mlerl-n3", str(run_dir))
    assert dead, _node_processes("mlerl-n3")
    _kill(dead)
    killed_at = time.monotonic()
    step = max(_steps(run_dir))
    seq = max((s.seq for s in _journal(run_dir) if s.actor_id == "mlerl-n2-0"), default=-1)
    _wait_for(
        lambda: (
            max(_steps(run_dir)) > step
            and max(s.seq for s in _journal(run_dir) if s.actor_id == "mlerl-n2-0") > seq
        ),
        900,
        "an update and a sample from mlerl-n2 after mlerl-n3's actors died",
    )
    TIMES["actor node's processes killed -> next update"] = round(time.monotonic() - killed_at, 1)
    assert _job(job)["JobState"] == "RUNNING"
    assert _pids("mlerl-n3", str(run_dir)) == []  # not restarted on that node: its step task ended
    assert _pids("mlerl-n2", str(run_dir))
    assert max(_steps(run_dir)) < 6, "the run ended before its learner node could be killed"

    _kill([int(p) for p in _sh("ip", "netns", "pids", "mlerl-n1").split()])
    start = time.monotonic()
    try:
        # RUNNING, then COMPLETING while Slurm ends the other nodes' steps, then PENDING again
        _wait_for(
            lambda: _job(job)["JobState"] in {"PENDING", "REQUEUED", *ENDED},
            300,
            "Slurm to see mlerl-n1 die",
        )
        info = _job(job)
        TIMES["learner node killed -> job requeued"] = round(time.monotonic() - start, 1)
        _wait_for(
            lambda: not any(_node_processes(n) for n in NODES[1:]),
            120,
            "the other nodes to be empty",
        )
        TIMES["learner node killed -> no process on any node"] = round(time.monotonic() - start, 1)
        assert info["JobState"] in ("PENDING", "REQUEUED") and info["Restarts"] == "1", info
        assert processes(str(run_dir)) == []
        log = (LOGS / "slurmctld.log").read_text()  # kept across restarts: this job's part
        log = log[log.rfind(f"_slurm_rpc_submit_batch_job: JobId={job} ") :]
        assert f"requeue job JobId={job} due to failure of node mlerl-n1" in log
    finally:
        subprocess.run(
            ["bash", str(SETUP)], capture_output=True, text=True, timeout=300, check=True
        )
    _wait_for(lambda: _node_up("mlerl-n1"), 120, "mlerl-n1 back in service")
    before = max(_steps(run_dir))
    info = _wait_job(job, 900)
    TIMES["learner node killed -> requeued job completed"] = round(time.monotonic() - start, 1)
    out = _out(run_dir, job)  # the requeued run's output replaces the first's
    assert info["JobState"] == "COMPLETED", (
        f"{info}\n{out[-4000:]}\n{_daemon_logs(f'Requeuing JobId={job}')}"
    )
    assert info["NodeList"] == "mlerl-n[1-3]"
    steps = _steps(run_dir)
    assert steps[-1] == 6 and before < 6, steps
    assert "resumed from" in out
    # the learner's end stopped the actors with SIGTERM, not Slurm's SIGKILL of a cancelled step
    assert "Killed" not in out and "forcing job termination" not in out, out[-4000:]
    actors = [run_dir / "hosts" / n / "actors" for n in ("mlerl-n2", "mlerl-n3")]
    assert sorted(d.name for a in actors for d in a.iterdir()) == ["mlerl-n2-0", "mlerl-n3-0"]
    _assert_exactly_once(run_dir, actors)
    assert {s.actor_id for s in _journal(run_dir)} == {"mlerl-n2-0", "mlerl-n3-0"}
    _nothing_left(run_dir, processes)


def _rank_pid(node: str, run_dir: Path, rank: int) -> int:
    from .test_distributed_e2e import _environ

    for pid in _pids(node, f"mlerl.learner --config {run_dir}"):
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        if b"torch.distributed.run" not in cmd and _environ(pid).get("RANK") == str(rank):
            return pid
    raise AssertionError(f"no learner rank {rank} on {node}: {_node_processes(node)}")


def test_learner_over_two_nodes_and_a_rank_killed(cluster, overrides, tmp_path, processes):
    """`--learner-nodes 2`: torchrun on mlerl-n1 and mlerl-n2 (gloo, c10d rendezvous on n1), the
    actors on mlerl-n3. kill -9 of rank 1 on mlerl-n2 after the first update: torchrun's
    --max-restarts restarts both nodes' ranks, which resume from the checkpoint and the journal,
    and the job completes; nothing lost or trained twice."""
    run_dir = tmp_path / "run"
    path = _write(
        tmp_path, run_dir, overrides, "learner.max_updates=3", learner_nodes=2, actor_nodes=1
    )
    job = _submit(path)
    _wait_steps(run_dir, job, 1)
    assert _rank_pid("mlerl-n1", run_dir, 0) and _rank_pid("mlerl-n2", run_dir, 1)
    _kill([_rank_pid("mlerl-n2", run_dir, 1)])
    start = time.monotonic()
    # torchrun's agents on both nodes see the group fail and start both ranks again in place
    _wait_for(lambda: _out(run_dir, job).count("resumed from") >= 2, 600, "both ranks to restart")
    TIMES["learner rank killed on the second learner node -> both ranks resumed"] = round(
        time.monotonic() - start, 1
    )
    info = _wait_job(job, 900)
    TIMES["learner rank killed on the second learner node -> job completed"] = round(
        time.monotonic() - start, 1
    )
    out = (run_dir / f"slurm-{job}.out").read_text()
    (tmp_path / "outcome.json").write_text(json.dumps({"job": info, "out": out}))
    assert info["JobState"] == "COMPLETED", (info, out[-4000:])
    assert info["Restarts"] == "0", info  # torchrun restarted the ranks, not Slurm the job
    assert _steps(run_dir)[-1] == 3
    assert "resumed from" in out
    _assert_exactly_once(run_dir, [run_dir / "hosts" / "mlerl-n3" / "actors"])
    _nothing_left(run_dir, processes)


def test_submitit_slurm_sweep_runs_each_point_on_the_cluster(
    cluster, overrides, tmp_path, processes
):
    """`mlerl train -m hydra/launcher=submitit_slurm ... seed=0,1`: two Slurm jobs, each a whole
    single-node run (learner + actor) to learner.max_updates; the launcher waits for both and
    the sweep ends with their results (metrics, a checkpoint) in its job directories."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    sweep = tmp_path / "multirun"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mlerl.cli",
            "train",
            "-m",
            "hydra/launcher=submitit_slurm",
            f"hydra.sweep.dir={sweep}",
            "hydra.sweep.subdir=job${hydra.job.num}",
            "hydra.launcher.timeout_min=20",
            *overrides,
            "learner.max_updates=1",
            "eval_samples=0",
            "num_actors=1",
            "seed=0,1",
        ],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=tmp_path,
        env=ENV,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    logs = sorted((sweep / ".submitit").rglob("*_log.out"))
    job_ids = sorted(
        {p.parent.name for p in logs}
    )  # one job array, a task per point: <id>_0, <id>_1
    assert len(job_ids) == 2 and all(re.fullmatch(r"\d+_[01]", j) for j in job_ids), logs
    for job_id in job_ids:  # each ran on the cluster, and ended well there (submitit collects a
        info = _wait_job(
            job_id, 120
        )  # result as soon as it is written, while the job may still exit)
        assert info["JobState"] == "COMPLETED" and info["NodeList"] in NODES, info
    for i in (0, 1):
        run = sweep / f"job{i}"
        assert _steps(run) == [1], (run, list(run.iterdir()))
        assert (run / "policy" / "config.json").is_file(), run  # the trained policy, saved
    from omegaconf import OmegaConf

    assert [OmegaConf.load(sweep / f"job{i}" / "config.yaml").seed for i in (0, 1)] == [0, 1]
    _nothing_left(sweep, processes)
