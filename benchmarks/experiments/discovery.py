"""Does RL find better solutions than sampling with the same model, at equal executions?

``python benchmarks/experiments/discovery.py --runs-dir RUNS --seeds 0,1,2 --arm default= --arm 'entropic=learner.advantage=entropic' [--arm ...] [--baselines scratch_bon,initial_bon,aide] [--choose ARM] [--task TASK] [--parallel 2] [--probe 32 --probe-every 3] [--no-launch | --launch ARM,...] [--chosen-on 0,1,2] [--name discovery_study] [--with OTHER.json] [--at 60,120] [-- OVERRIDE ...]``

``--arm NAME=OVERRIDES``: one RL configuration, its Hydra overrides separated by spaces (empty:
the default). Each arm trains once per seed, ``mlerl train seed=S eval_samples=0
learner.probe_samples=P learner.probe_every=E tasks.ids=[TASK] OVERRIDES`` into
``RUNS/<arm>/seed<S>`` (a run with ``report.md`` finished and is not run again; ``--launch
A,B`` trains only those arms, the others are read back). The overrides after ``--`` go to
every arm.

**Equal executions.** The budget N is the default arm's ``learner.max_updates x
learner.batch_size`` (its config); every arm's result is the best of its first N executions of
the task (``samples.jsonl`` in arrival order, the failures included), chosen on the public score
and reported on the private one, as every selection in the project. The baselines get the same
N, driven by the initial policy with the default arm's actor settings (``mlerl eval --run``):
``scratch_bon`` best-of-N from scratch prompts, ``initial_bon`` best-of-N with the actors' mix
of scratch and improve prompts, ``aide`` AIDE's tree search, N steps; each once per seed into
``RUNS/baselines/seed<S>/<name>.json``.

**Adding to a finished study.** A run or baseline no longer on disk keeps its figures from the
results file the study wrote before (``--out``/``NAME.json``, same task), so a baseline can be
added later (``mlerl train prepare_only=true`` gives it the run's config) without the RL runs
being kept or trained again; ``kept`` lists what was read back and ``earlier_commands`` the
commands that wrote it.

**The probe.** The runs log the decision probe (``mlerl.learner.probe_decisions``); per arm
and seed the results keep the share of the best known configuration's decisions
(``_discovery_figures.BEST_DECISIONS``) at the first probe (the initial policy) and the last,
and the plot shows them per update.

Results (``NAME.json``): ``rows`` (one per task and seed for the ``--choose`` arm: ``task``,
``seed``, ``direction``, ``executions``, ``rl_private`` and each baseline's ``*_private``);
``arms`` (per arm and seed: best private and public, the step and kind that found it, the
probe, valid fractions by quarter, KL and clip fraction of the last quarter); ``paired``: each
arm against the first arm and against each baseline, mean ± s.e. of the paired differences
(positive when the arm is better); with ``--at 60,120``, ``paired_at``: the same pairs after
each of those numbers of executions (from each run's best-so-far curve); ``probe``: per task,
arm and seed, the best decisions' shares first and last; ``selection`` (the seeds the choice was
made on); with ``--with OTHER.json`` (another task's results of the same study, repeatable) its
rows follow these, its probe is under its task and its paired differences under
``other_tasks``; ``unlike_starts`` (only when there are any): the seeds whose arms' first
probes differ, so they did not start from the same policy (an arm from another build) and their
pairs mean nothing. ``NAME.png``: the best score so far against executions, mean over seeds
with a band of ± 1 s.e., each arm and baseline; and the probe's shares per update (mean over
seeds). ``NAME_probe_seed<S>.png``: the first held-out seed's run of the chosen arm, its own
probe plot.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common
from _common import RESULTS, command_line, git_commit, int_list, machine_info, read_jsonl
from _discovery_figures import (
    BASELINES,
    best_at,
    best_of_first,
    combination,
    issue_row,
    paired,
    probe_keys,
    probe_summary,
    quarter_stats,
    unlike_starts,
)
from _discovery_plot import plot, probe_plot
from embedded_rl import selection
from equal_budget import eval_command

REPO = Path(__file__).resolve().parents[2]


# ---- launching ----------------------------------------------------------------------------
def _config(run_dir: Path) -> dict[str, Any]:
    import yaml

    return yaml.safe_load((run_dir / "config.yaml").read_text())


def train_cmd(run_dir: Path, seed: int, task: str, overrides: list[str], args: Any) -> list[str]:
    return [
        str(REPO / ".venv" / "bin" / "mlerl"),
        "train",
        f"seed={seed}",
        f"hydra.run.dir={run_dir}",
        "eval_samples=0",
        f"tasks.ids=[{task}]",
        f"learner.probe_samples={args.probe}",
        f"learner.probe_every={args.probe_every}",
        "logging.console=false",
        *args.extra,
        *overrides,
    ]


def run_jobs(jobs: list[tuple[list[str], Path, Path | None]], parallel: int) -> None:
    """Run ``(command, log file, done dir)`` jobs, ``parallel`` at a time; a job that succeeds
    writes ``DONE`` (its wall-clock seconds) into its done dir. A failed one is reported and left
    undone (run the script again to retry it)."""
    pending, running = list(jobs), []
    while pending or running:
        while pending and len(running) < parallel:
            cmd, log, done = pending.pop(0)
            print("+", " ".join(cmd), flush=True)
            log.parent.mkdir(parents=True, exist_ok=True)
            out = open(log, "w")  # noqa: SIM115 - closed when the job ends
            proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
            running.append((proc, done, time.time(), out))
        time.sleep(2)
        for job in list(running):
            proc, done, t0, out = job
            if proc.poll() is None:
                continue
            running.remove(job)
            out.close()
            if proc.returncode != 0:
                print(f"failed ({proc.returncode}): {' '.join(proc.args)}", flush=True)
            elif done is not None:
                (done / "DONE").write_text(f"{time.time() - t0:.0f}\n")


def _earlier(path: Path, task: str) -> dict[str, Any] | None:
    """The study's results file as written before, where it is about the same task."""
    if not path.is_file():
        return None
    earlier = json.loads(path.read_text())
    return earlier if earlier.get("task") == task else None


def finished(run_dir: Path) -> bool:
    """A run that ended cleanly: `mlerl train` writes ``report.md`` only then."""
    return (run_dir / "report.md").is_file()


# ---- aggregation --------------------------------------------------------------------------
def arm_seed(run_dir: Path, task: str, n: int, lower: bool) -> dict[str, Any] | None:
    if not finished(run_dir):
        return None
    records = [r for r in read_jsonl(run_dir / "samples.jsonl") if r.get("task_id") == task]
    rows = read_jsonl(run_dir / "metrics.jsonl")
    metrics = [m for m in rows if m.get("stream", "learner") == "learner"]
    probes = [m for m in rows if m.get("stream", "learner") in ("learner", "probe")]
    best = best_of_first(records, n, lower)
    return {
        **best,
        "probe": probe_summary(probes, task),
        **quarter_stats(metrics, records[:n]),
        "combination": combination(records[:n], probe_keys(task), lower),
        "wall_s": float((run_dir / "DONE").read_text()) if (run_dir / "DONE").is_file() else None,
    }


def baseline_seed(path: Path, task: str) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    t = json.loads(path.read_text())["per_seed"][0]["tasks"][task]
    return {
        "private": t.get("best_score"),
        "public": t.get("best_public"),
        "curve": t.get("best_vs_executions") or [],
        "valid_frac": t.get("valid_frac"),
    }


def join_task(result: dict[str, Any], other: dict[str, Any], source: str) -> None:
    """Another task's results of the same study join ``result``: its rows after these, its
    probe under its task, its paired differences in ``other_tasks`` with the file they came
    from. A file written before the probe was keyed by task (arm -> seed) is read as its own
    task's."""
    task = other["task"]
    if task == result["task"] or task in result.get("other_tasks", {}):
        raise ValueError(f"--with {source}: task {task!r} is already in these results")
    result["rows"] = [*result["rows"], *other["rows"]]
    probe = other.get("probe", {})
    result["probe"][task] = probe.get(task, probe)
    result.setdefault("other_tasks", {})[task] = {
        "source": source,
        "executions": other["executions"],
        "direction": other["direction"],
        "paired": other["paired"],
        "commit": other.get("commit"),
        "command": other.get("command"),
    }


def _read_with(p: argparse.ArgumentParser, path: Path) -> dict[str, Any]:
    """A ``--with`` results file, or the parser's error naming it."""
    try:
        other = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        p.error(f"--with: cannot read results file {path}: {e}")
    if not isinstance(other, dict) or not {"task", "rows", "paired"} <= other.keys():
        p.error(f"--with: {path} is not a discovery results file (no task, rows and paired)")
    return other


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs-dir", type=Path, required=True)
    p.add_argument("--seeds", type=int_list, required=True)
    p.add_argument("--arm", action="append", required=True, help="NAME=OVERRIDES (space-separated)")
    p.add_argument("--baselines", default="", help="comma-separated: scratch_bon,initial_bon,aide")
    p.add_argument("--choose", default=None, help="the arm the rows report (default: the last)")
    p.add_argument("--task", default="standin-materials-rmsle-tiny")
    p.add_argument("--parallel", type=int, default=1)
    p.add_argument("--probe", type=int, default=32)
    p.add_argument("--probe-every", type=int, default=3)
    p.add_argument("--no-launch", action="store_true")
    p.add_argument(
        "--launch",
        default=None,
        help="comma-separated arms to train (default: every arm); the rest are only read back",
    )
    p.add_argument("--chosen-on", type=int_list, default=None)
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--name", default="discovery_study")
    p.add_argument(
        "--with",
        dest="with_",
        type=Path,
        action="append",
        default=[],
        help="another task's results of this study (NAME.json): its rows join these",
    )
    p.add_argument(
        "--at",
        type=int_list,
        default=[],
        help="also pair every arm at these smaller budgets (executions), from the same runs",
    )
    p.add_argument("extra", nargs="*", help="overrides for every arm (after --)")
    args = p.parse_args(argv)
    arms = dict(a.split("=", 1) for a in args.arm)
    names = list(arms)
    chosen = args.choose or names[-1]
    baselines = [b for b in args.baselines.split(",") if b]
    launch = names if args.launch is None else [a for a in args.launch.split(",") if a]
    for a in launch:
        if a not in arms:
            p.error(f"--launch: {a!r} is not an --arm (the arms: {', '.join(names)})")
    others = [(path.name, _read_with(p, path)) for path in args.with_]  # before hours of runs
    if any(m < 1 for m in args.at):
        p.error("--at: budgets are numbers of executions, at least 1")
    for b in baselines:
        if b not in BASELINES:
            p.error(f"--baselines: unknown {b!r} (choose from {', '.join(BASELINES)})")
    # seed by seed, so the arms of a seed finish together and partial results stay paired
    run = {(a, s): args.runs_dir / a / f"seed{s}" for s in args.seeds for a in names}
    if not args.no_launch:
        run_jobs(
            [
                (train_cmd(d, s, args.task, arms[a].split(), args), d.with_suffix(".log"), d)
                for (a, s), d in run.items()
                if a in launch and not finished(d)
            ],
            args.parallel,
        )
    first = {s: run[(names[0], s)] for s in args.seeds}
    ready = {s: d for s, d in first.items() if finished(d)}
    earlier = _earlier(args.out / f"{args.name}.json", args.task)
    if ready:
        cfg = _config(next(iter(ready.values())))
        n = int(cfg["learner"]["max_updates"]) * int(cfg["learner"]["batch_size"])
        from mlerl.bench import Registry

        registry = Registry.load(None, Path(cfg["tasks"]["data_dir"]))
        lower = bool(registry.get(args.task).lower_is_better)
    elif earlier:
        n, lower = int(earlier["executions"]), earlier["direction"] == "lower"
    else:
        print("no finished run of the first arm: nothing to aggregate", flush=True)
        return 1
    base_dir = {s: args.runs_dir / "baselines" / f"seed{s}" for s in args.seeds}
    if not args.no_launch and baselines:
        jobs = []
        for s, d in ready.items():
            model = str(_config(d)["model"]["path"])
            for b in baselines:
                out = base_dir[s] / f"{b}.json"
                if not out.is_file():
                    base_dir[s].mkdir(parents=True, exist_ok=True)
                    cmd = eval_command(d, model, b, s, n, out)
                    jobs.append((cmd, out.with_suffix(".log"), None))
        run_jobs(jobs, args.parallel)
    kept: list[str] = []

    def or_earlier(found: dict[str, Any] | None, group: str, name: str, s: int) -> Any:
        if found is not None:
            return found
        again = ((earlier or {}).get(group, {}).get(name) or {}).get(str(s))
        if again is not None:
            kept.append(f"{group}/{name}/seed{s}")
        return again

    result: dict[str, Any] = {
        "task": args.task,
        "direction": "lower" if lower else "higher",
        "executions": n,
        "arms": {
            a: {
                s: or_earlier(arm_seed(run[(a, s)], args.task, n, lower), "arms", a, s)
                for s in args.seeds
            }
            for a in names
        },
        "overrides": arms,
        "baselines": {
            b: {
                s: or_earlier(
                    baseline_seed(base_dir[s] / f"{b}.json", args.task), "baselines", b, s
                )
                for s in args.seeds
            }
            for b in baselines
        },
    }

    def private(by_seed: dict[int, Any]) -> list[float | None]:
        return [(by_seed.get(s) or {}).get("private") for s in args.seeds]

    unlike = unlike_starts(result["arms"])
    if unlike:  # recorded and said, not hidden: the pairs of these seeds compare two policies
        result["unlike_starts"] = unlike
        print(f"warning: the arms of seeds {', '.join(unlike)} started from different policies")
    pairs = [(f"{a} - {names[0]}", result["arms"][a], result["arms"][names[0]]) for a in names[1:]]
    pairs += [
        (f"{a} - {b}", result["arms"][a], result["baselines"][b]) for a in names for b in baselines
    ]
    result["paired"] = {k: paired(private(x), private(y), lower) for k, x, y in pairs}
    if args.at:  # the same pairs after fewer executions: how the gap grows with the budget
        if max(args.at) > n:  # the runs stay on disk: run again with --no-launch
            p.error(f"--at: {max(args.at)} is more than the study's {n} executions")
        result["paired_at"] = {
            str(m): {
                k: paired(best_at(x, args.seeds, m), best_at(y, args.seeds, m), lower)
                for k, x, y in pairs
            }
            for m in args.at
        }
    result["rows"] = [
        issue_row(
            args.task,
            s,
            result["direction"],
            n,
            chosen,
            (result["arms"][chosen][s] or {}).get("private"),
            {b: (result["baselines"][b][s] or {}).get("private") for b in baselines},
        )
        for s in args.seeds
    ]
    result["probe"] = {
        args.task: {
            a: {
                s: {
                    k: (v or {}).get("probe", {}).get(k)
                    for k in ("first", "last", "first_step", "last_step")
                }
                for s, v in by_seed.items()
            }
            for a, by_seed in result["arms"].items()
        }
    }
    for source, other in others:
        join_task(result, other, source)
    result["selection"] = selection(args.chosen_on, args.seeds)
    result.update(commit=git_commit(), command=command_line(), machine=machine_info())
    if kept:
        result["kept"] = kept
        result["earlier_commands"] = [
            *earlier.get("earlier_commands", []),
            {"commit": earlier.get("commit"), "command": earlier.get("command")},
        ]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result, args.out / f"{args.name}.png", probe_keys(args.task))
    held_out = [
        s for s in args.seeds if s not in (args.chosen_on or []) and finished(run[(chosen, s)])
    ]
    if held_out:  # one held-out run's own probe plot, per update
        probe_plot(
            run[(chosen, held_out[0])], args.out / f"{args.name}_probe_seed{held_out[0]}.png"
        )
    for s in args.seeds:
        c = (result["arms"][chosen].get(s) or {}).get("combination")
        if c:
            print(
                f"{chosen} seed {s}: the best known combination ran {c['executions']} times in"
                f" {n} executions ({c['valid']} valid, first at {c['first']}, {c['by_kind']})"
            )
    for at, by_key in [(n, result["paired"]), *result.get("paired_at", {}).items()]:
        for key, d in by_key.items():
            if d["mean"] is not None:
                print(
                    f"{key} at {at}: {d['mean']:+.4f} ± {d['se'] or 0:.4f} over {d['n']} seeds,"
                    f" better in {d['better_in']}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
