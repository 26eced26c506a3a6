"""`mlerl slurm`: write the sbatch script that runs one training job across several nodes.

The job is built from the existing engines only: Slurm allocates the nodes and starts one task
per node (``srun``), torchrun runs the FSDP2 learner across the learner nodes (c10d rendezvous
on the first learner node, ``--max-restarts`` for a dead rank), and every actor node runs
``mlerl train role=actors`` (its own supervisor restarts dead actors). Addresses and ports reach
the processes through the config's ``transport`` section, which each host composes for itself:
the learner's ``transport.samples_address``/``weights_address`` bind on all interfaces, the
actor nodes' connect to the head node (its name substituted at run time).

Steps of the generated script (``RUN_DIR`` on a filesystem every node sees):

1. on the head node, ``mlerl train role=learner prepare_only=true``: tasks, policy, CURVE keys
   and ``RUN_DIR/config.yaml``, nothing started;
2. the learner: ``srun`` over the learner nodes, each running torchrun with
   ``--nnodes=L --nproc_per_node=G`` and ``python -m mlerl.learner --config RUN_DIR/config.yaml``
   (environment ``TORCHRUN_ENV``: a fresh rendezvous store per restart round);
3. the actors: ``srun`` over the actor nodes, each running ``mlerl train role=actors`` with its
   own run directory ``RUN_DIR/hosts/<node>`` and actor ids ``<node>-<i>`` (unique across nodes,
   stable across restarts), reading the keys from ``RUN_DIR/keys``;
4. when the learner step ends (``learner.max_updates``), the actor step is stopped.

Resubmitting the same script resumes: step 1 keeps the existing keys and config, the learner
restores its last checkpoint and journal, the actors their sequence numbers and outboxes. So the
job asks to be requeued when a node fails (``--requeue``): Slurm runs the script again.
A CPU cluster has no GPUs to ask for: ``--gpus-per-node 0`` (one learner rank per node unless
``--ranks-per-node``). tests/cli/test_slurm_cluster.py runs this on a real Slurm cluster.
Sweeps of single-node jobs go through Hydra's submitit launcher instead
(``mlerl train -m hydra/launcher=submitit_slurm ...``, README "Slurm").
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

TORCHRUN_ENV = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
"""The environment of the learner's torchrun on every learner node: each restart round gets a
fresh c10d store. By default torchrun's agents share one store across rounds and the ranks' gloo
addresses are keyed by rank alone, so after a rank dies the first rank to start again can read a
peer's address of the previous round and fail (``Connection refused``), again and again until
``--max-restarts`` is spent: a node whose ranks were healthy restarts them later, as a
"membership change". ``tests/cli/test_torchrun_restart.py`` shows it with two agents on one
host."""


@dataclass
class SlurmJob:
    run_dir: str
    learner_nodes: int = 1
    gpus_per_node: int = 8
    """GPUs each node asks for (``#SBATCH --gpus-per-node``); 0 on a CPU cluster, which has no
    GPU resource to ask for (Slurm refuses the job otherwise)."""
    ranks_per_node: int = 0
    """Learner ranks per learner node (torchrun ``--nproc_per_node``); 0: one per GPU (one on a
    CPU cluster)."""
    actor_nodes: int = 1
    actors_per_node: int = 4
    samples_port: int = 5555
    weights_port: int = 5556
    rdzv_port: int = 29500
    learner_restarts: int = 3
    partition: str = ""
    account: str = ""
    time: str = ""
    job_name: str = "mlerl"
    python: str = sys.executable
    overrides: list[str] = field(default_factory=list)
    """Hydra overrides every node's config gets (e.g. ``+experiment=paper_scale``)."""

    def __post_init__(self) -> None:
        for name in ("learner_nodes", "actor_nodes", "actors_per_node"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1")
        for name in ("gpus_per_node", "ranks_per_node"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must be >= 0")
        if self.ranks_per_node == 0:
            self.ranks_per_node = max(self.gpus_per_node, 1)


def _q(args: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in args)


def script(job: SlurmJob) -> str:
    """The sbatch script (bash) for ``job``."""
    L, A, G = job.learner_nodes, job.actor_nodes, job.ranks_per_node
    nodes = L + A
    header = [
        "#!/bin/bash",
        f"#SBATCH --job-name={job.job_name}",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --output={job.run_dir}/slurm-%j.out",
        # a node failure puts the job back in the queue (whatever the cluster's JobRequeue says):
        # the script resumes the run, so running it again is always right
        "#SBATCH --requeue",
    ]
    if job.gpus_per_node:
        header.insert(4, f"#SBATCH --gpus-per-node={job.gpus_per_node}")
    header += [
        f"#SBATCH --{k}={v}"
        for k, v in (("partition", job.partition), ("account", job.account), ("time", job.time))
        if v
    ]
    port = {"s": job.samples_port, "w": job.weights_port}
    actor = (
        'dir="$RUN_DIR/hosts/$SLURMD_NODENAME"; resume=""; '
        '[ -f "$dir/config.yaml" ] && resume="$dir"; '
        'exec "$PY" -m mlerl.cli train role=actors hydra.run.dir="$dir" resume="$resume" '
        f'actor_prefix="$SLURMD_NODENAME" num_actors={job.actors_per_node} '
        f'transport.samples_address="tcp://$HEAD:{port["s"]}" '
        f'transport.weights_address="tcp://$HEAD:{port["w"]}" '
        'transport.keys_dir="$RUN_DIR/keys" "$@"'
    )
    lines = [
        *header,
        "# generated by `mlerl slurm`: one training job, a torchrun learner and actor nodes",
        "set -euo pipefail",
        f"export RUN_DIR={shlex.quote(job.run_dir)}",
        f"export PY={shlex.quote(job.python)}",
        f"OVERRIDES=({_q(job.overrides)})",
        'mkdir -p "$RUN_DIR"',
        'mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        f'LEARNER_NODES=$(IFS=,; echo "${{NODES[*]:0:{L}}}")',
        f'ACTOR_NODES=$(IFS=,; echo "${{NODES[*]:{L}:{A}}}")',
        'export HEAD="${NODES[0]}"',
        "",
        "# every srun names its task count: one inherited from the job's SLURM_NTASKS (one per "
        "node)",
        "# asks for more tasks than a step's nodes hold, and Slurm refuses the step",
        "# 1. tasks, policy, keys and RUN_DIR/config.yaml, on the head node; nothing starts",
        'srun --nodes=1 --ntasks=1 --nodelist="$HEAD" "$PY" -m mlerl.cli train role=learner '
        "prepare_only=true \\",
        f'  hydra.run.dir="$RUN_DIR" learner_procs={L * G} learner_restarts={job.learner_restarts} '
        "\\",
        f"  transport.samples_address=tcp://0.0.0.0:{port['s']} "
        f"transport.weights_address=tcp://0.0.0.0:{port['w']} \\",
        '  "${OVERRIDES[@]}"',
        "",
        f"# 2. the learner: {L} node(s) x {G} rank(s), torchrun's c10d rendezvous on the head node",
        "# (a fresh c10d store per restart round: a shared one hands restarted ranks stale "
        "addresses)",
        *(f"export {k}={shlex.quote(v)}" for k, v in TORCHRUN_ENV.items()),
        f'srun --nodes={L} --ntasks={L} --ntasks-per-node=1 --nodelist="$LEARNER_NODES" \\',
        f'  "$PY" -m torch.distributed.run --nnodes={L} --nproc_per_node={G} \\',
        f'  --rdzv_backend=c10d --rdzv_endpoint="$HEAD:{job.rdzv_port}" --rdzv_id="$SLURM_JOB_ID" '
        "\\",
        f'  --max-restarts={job.learner_restarts} -m mlerl.learner --config "$RUN_DIR/config.yaml" '
        "&",
        "LEARNER=$!",
        "",
        f"# 3. the actors: {A} node(s) x {job.actors_per_node} (ids <node>-<i>), keys from "
        "RUN_DIR/keys",
        f"ACTOR_CMD={shlex.quote(actor)}",
        f"srun --job-name=actors --nodes={A} --ntasks={A} --ntasks-per-node=1 "
        f'--nodelist="$ACTOR_NODES" bash -c "$ACTOR_CMD" '
        'actors "${OVERRIDES[@]}" &',
        "ACTORS=$!",
        "",
        "# 4. the learner's end (learner.max_updates) ends the job",
        "code=0",
        'wait "$LEARNER" || code=$?',
        "# SIGTERM to the actors' tasks only: each `mlerl train role=actors` stops its actors "
        "and exits.",
        "# (SIGTERM to srun would cancel the step: SIGKILL after Slurm's KillWait, mid-sample.)",
        "# Those that have not ended within 60 s are cancelled.",
        'STEP=$(squeue -h -s -j "$SLURM_JOB_ID" -o "%i %j" 2>/dev/null '
        "| awk '$2 == \"actors\" {print $1}') || true",
        "# (scancel --signal may report an error for a step whose tasks it did signal: not "
        "checked.)",
        'if [ -n "$STEP" ]; then scancel --signal=TERM "$STEP" 2>/dev/null || true; fi',
        'for _ in $(seq 60); do kill -0 "$ACTORS" 2>/dev/null || break; sleep 1; done',
        'kill -TERM "$ACTORS" 2>/dev/null || true',
        'wait "$ACTORS" || true',
        'if [ "$code" != 0 ]; then',
        '  echo "mlerl slurm: the learner step ended with exit code $code (its log is above);" \\',
        '    "sbatch this script again to resume from the last checkpoint" >&2',
        "fi",
        'exit "$code"',
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="mlerl slurm",
        description=__doc__.splitlines()[0],
        epilog="Hydra overrides for every node follow `--`.",
    )
    parser.add_argument("--run-dir", required=True, help="run directory on a shared filesystem")
    parser.add_argument("--learner-nodes", type=int, default=1)
    parser.add_argument(
        "--gpus-per-node", type=int, default=8, help="GPUs per node (0: a CPU cluster)"
    )
    parser.add_argument(
        "--ranks-per-node",
        type=int,
        default=0,
        help="learner ranks per learner node (default: one per GPU, one without GPUs)",
    )
    parser.add_argument("--actor-nodes", type=int, default=1)
    parser.add_argument("--actors-per-node", type=int, default=4)
    parser.add_argument("--samples-port", type=int, default=5555)
    parser.add_argument("--weights-port", type=int, default=5556)
    parser.add_argument("--rdzv-port", type=int, default=29500)
    parser.add_argument("--learner-restarts", type=int, default=3)
    parser.add_argument("--partition", default="")
    parser.add_argument("--account", default="")
    parser.add_argument("--time", default="")
    parser.add_argument("--job-name", default="mlerl")
    parser.add_argument("--python", default=sys.executable, help="the interpreter on the nodes")
    parser.add_argument("--out", type=Path, help="write the script here (default: stdout)")
    args, rest = parser.parse_known_args(argv)
    overrides = rest[1:] if rest[:1] == ["--"] else rest
    try:
        job = SlurmJob(
            run_dir=str(Path(args.run_dir).expanduser().resolve()),
            learner_nodes=args.learner_nodes,
            gpus_per_node=args.gpus_per_node,
            ranks_per_node=args.ranks_per_node,
            actor_nodes=args.actor_nodes,
            actors_per_node=args.actors_per_node,
            samples_port=args.samples_port,
            weights_port=args.weights_port,
            rdzv_port=args.rdzv_port,
            learner_restarts=args.learner_restarts,
            partition=args.partition,
            account=args.account,
            time=args.time,
            job_name=args.job_name,
            python=args.python,
            overrides=overrides,
        )
    except ValueError as exc:
        parser.error(str(exc))
    text = script(job)
    # Slurm opens the job's output file (RUN_DIR/slurm-<id>.out) before the script runs: in a
    # directory that does not exist yet the job fails at launch (JobLaunchFailure), with nothing
    # written anywhere the user looks
    Path(job.run_dir).mkdir(parents=True, exist_ok=True)
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text)
        args.out.chmod(0o755)
        print(f"wrote {args.out}; submit with `sbatch {args.out}`", file=sys.stderr)
    return 0
