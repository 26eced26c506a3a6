"""`mlerl slurm`: the generated sbatch script, the commands each node runs (recorded through
shims of srun/scontrol and of the interpreter), and a loopback run of the real script."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from mlerl.cli._slurm import TORCHRUN_ENV, SlurmJob, script

SRUN = r"""#!/bin/bash
# srun stand-in: run the command once per node of --nodelist, with SLURMD_NODENAME set
nodes=""
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in --nodelist=*) nodes=${1#--nodelist=};; esac
  shift
done
IFS=, read -ra list <<< "$nodes"
pids=()
for n in "${list[@]}"; do SLURMD_NODENAME=$n "$@" & pids+=($!); done
trap 'kill -TERM "${pids[@]}" 2>/dev/null' TERM INT
code=0
for p in "${pids[@]}"; do wait "$p" || code=$?; done
exit $code
"""


def _shims(tmp_path: Path, nodes: list[str]) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(SRUN)
    (bin_dir / "scontrol").write_text("#!/bin/bash\nprintf '%s\\n' " + " ".join(nodes) + "\n")
    for f in bin_dir.iterdir():
        f.chmod(f.stat().st_mode | stat.S_IEXEC)
    return {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SLURM_JOB_NODELIST": "n[1-9]",
        "SLURM_JOB_ID": "4242",
    }


def _recording_python(tmp_path: Path) -> Path:
    """An interpreter stand-in that records its argv, node and torchrun environment
    (``TORCHRUN_ENV``'s names), one JSON line per call."""
    log = tmp_path / "calls.jsonl"
    py = tmp_path / "py"
    # the learner stand-in lingers a moment: its end stops the actor step, which must have run
    py.write_text(
        f"#!{sys.executable}\nimport json, os, sys, time\n"
        f"open({str(log)!r}, 'a').write(json.dumps({{'node': os.environ.get('SLURMD_NODENAME'), "
        f"'head': os.environ.get('HEAD'), 'argv': sys.argv[1:], "
        f"'env': {{k: os.environ.get(k) for k in {sorted(TORCHRUN_ENV)!r}}}}}) + '\\n')\n"
        "if 'torch.distributed.run' in sys.argv: time.sleep(3)\n"
    )
    py.chmod(0o755)
    return py


def _calls(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]


def test_script_is_valid_bash_with_the_allocation_asked_for(tmp_path):
    text = script(
        SlurmJob(
            run_dir="/shared/run",
            learner_nodes=2,
            gpus_per_node=4,
            actor_nodes=3,
            partition="gpu",
            time="2:00:00",
            overrides=["seed=3"],
        )
    )
    assert "#SBATCH --nodes=5\n" in text and "#SBATCH --gpus-per-node=4\n" in text
    assert "#SBATCH --partition=gpu\n" in text and "#SBATCH --time=2:00:00\n" in text
    assert "#SBATCH --account" not in text
    path = tmp_path / "job.sh"
    path.write_text(text)
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0
    with pytest.raises(ValueError, match="actor_nodes"):
        SlurmJob(run_dir="/r", actor_nodes=0)
    with pytest.raises(ValueError, match="gpus_per_node"):
        SlurmJob(run_dir="/r", gpus_per_node=-1)


def test_cpu_cluster_asks_for_no_gpus_and_runs_one_rank_per_node():
    """A cluster without GPUs has no gres to give: Slurm refuses a job that asks for any
    (`Invalid generic resource (gres) specification`, seen on the real cluster of
    scripts/ci/setup_slurm.sh). --gpus-per-node 0 drops the request; ranks default to one."""
    text = script(SlurmJob(run_dir="/r", learner_nodes=2, gpus_per_node=0))
    assert "--gpus-per-node" not in text
    assert "--nproc_per_node=1 " in text and "learner_procs=2 " in text
    # each step names its task count: the job's SLURM_NTASKS (3) is inherited by srun otherwise
    # and a real slurmctld refuses the 1-node step ("More processors requested than permitted")
    assert [
        next(a for a in line.split() if a.startswith("--ntasks="))
        for line in text.splitlines()
        if line.startswith("srun ")
    ] == ["--ntasks=1", "--ntasks=2", "--ntasks=1"]
    text = script(SlurmJob(run_dir="/r", learner_nodes=2, gpus_per_node=0, ranks_per_node=3))
    assert "--nproc_per_node=3 " in text and "learner_procs=6 " in text
    assert "#SBATCH --gpus-per-node=4\n" in script(SlurmJob(run_dir="/r", gpus_per_node=4))


def test_each_node_runs_the_expected_command(tmp_path):
    """Run the script with srun/scontrol shims: node a prepares and hosts the rendezvous, nodes
    a+b run torchrun, nodes c+d run the actors pointed at a; overrides survive quoting."""
    run_dir = tmp_path / "run"
    py = _recording_python(tmp_path)
    out = tmp_path / "job.sh"
    overrides = ["tasks.ids=[x,y]", "learner.max_updates=7", "+experiment=paper_scale"]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mlerl.cli",
            "slurm",
            "--run-dir",
            str(run_dir),
            "--learner-nodes",
            "2",
            "--gpus-per-node",
            "4",
            "--actor-nodes",
            "2",
            "--actors-per-node",
            "3",
            "--samples-port",
            "6000",
            "--weights-port",
            "6001",
            "--rdzv-port",
            "29555",
            "--python",
            str(py),
            "--out",
            str(out),
            "--",
            *overrides,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    env = _shims(tmp_path, ["a", "b", "c", "d"])
    for attempt in (1, 2):  # a resubmission resumes each actor host from its own run dir
        (tmp_path / "calls.jsonl").unlink(missing_ok=True)
        ran = subprocess.run(
            ["bash", str(out)], env=env, capture_output=True, text=True, timeout=120
        )
        assert ran.returncode == 0, ran.stderr
        calls = _calls(tmp_path)
        prepare = [c for c in calls if "prepare_only=true" in c["argv"]]
        assert [c["node"] for c in prepare] == ["a"]
        assert prepare[0]["argv"][:4] == ["-m", "mlerl.cli", "train", "role=learner"]
        assert {
            f"hydra.run.dir={run_dir}",
            "learner_procs=8",
            "transport.samples_address=tcp://0.0.0.0:6000",
            "transport.weights_address=tcp://0.0.0.0:6001",
            *overrides,
        } <= set(prepare[0]["argv"])
        learners = [c for c in calls if "torch.distributed.run" in c["argv"]]
        assert sorted(c["node"] for c in learners) == ["a", "b"]
        for c in learners:
            assert {
                "--nnodes=2",
                "--nproc_per_node=4",
                "--rdzv_backend=c10d",
                "--rdzv_endpoint=a:29555",
                "--rdzv_id=4242",
                "--max-restarts=3",
            } <= set(c["argv"])
            assert c["env"] == TORCHRUN_ENV  # a fresh c10d store per restart round
            assert c["argv"][-4:] == [
                "-m",
                "mlerl.learner",
                "--config",
                str(run_dir / "config.yaml"),
            ]
        actors = [c for c in calls if "role=actors" in c["argv"]]
        assert sorted(c["node"] for c in actors) == ["c", "d"]
        for c in actors:
            host = run_dir / "hosts" / c["node"]
            expect_resume = f"resume={host}" if attempt == 2 else "resume="
            assert {
                f"hydra.run.dir={host}",
                expect_resume,
                f"actor_prefix={c['node']}",
                "num_actors=3",
                "transport.samples_address=tcp://a:6000",
                "transport.weights_address=tcp://a:6001",
                f"transport.keys_dir={run_dir / 'keys'}",
                *overrides,
            } <= set(c["argv"]), c["argv"]
            host.mkdir(parents=True, exist_ok=True)
            (host / "config.yaml").write_text("role: actors\n")  # what the first run leaves


@pytest.mark.slow
def test_submitit_sweep_runs_one_job_per_point(tmp_path):
    """A sweep through Hydra's Submitit launcher (`submitit_local`: the same launcher code as
    `submitit_slurm`, jobs as local processes): each job prepares its own run dir and config,
    with its own seed and its own loopback ports. Needs the optional `slurm` extra."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")  # prepare_only never loads it
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mlerl.cli",
            "train",
            "-m",
            "hydra/launcher=submitit_local",
            f"hydra.sweep.dir={tmp_path / 'multirun'}",
            "hydra.sweep.subdir=job${hydra.job.num}",
            f"model.path={tmp_path / 'model'}",
            f"tasks.data_dir={tmp_path / 'data'}",
            "prepare_only=true",
            "logging.console=false",
            "seed=0,1",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    from omegaconf import OmegaConf

    configs = [OmegaConf.load(tmp_path / "multirun" / f"job{i}" / "config.yaml") for i in (0, 1)]
    assert [c.seed for c in configs] == [0, 1]
    assert configs[0].transport.samples_address != configs[1].transport.samples_address
    assert all(
        (tmp_path / "multirun" / f"job{i}" / "keys" / "learner.key").is_file() for i in (0, 1)
    )
    assert list((tmp_path / "multirun" / ".submitit").iterdir())  # the jobs went through submitit
