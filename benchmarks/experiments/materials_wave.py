"""How strong should the materials stand-in's basal-area wave be? (data version 3)

``python benchmarks/experiments/materials_wave.py [--waves 0.2,0.35] [--periods 6] [--draws 256]
[--work-dir /tmp/materials_wave] [--name materials_wave]``

For each (amplitude, period) it prepares a variant of ``standin-materials-rmsle-tiny`` whose
task.yaml passes that ``wave`` and ``period`` to the generator (``extra.generator``; amplitude
0: data version 2's targets), then runs in the sandbox and grades on both halves:

- one decision at a time from a strong configuration (log1p, one-hot spacegroup, the basal-area
  product, LightGBM 800 rounds): what each decision is worth on that data;
- ``--draws`` settings blocks of the corpus generator (`mlerl.embedded.draw_settings`, the
  held-out combination not excluded): best-of-N of the generator chosen on public, reported
  on private, for N = 16, 64 and all draws. The generator is what the initial policy is tuned
  on, so this is a proxy for the initial policy's best-of-N before any build.

Writes ``benchmarks/results/NAME.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common
from _common import RESULTS, command_line, git_commit, machine_info
from embedded_prior import _run

TASK = "standin-materials-rmsle-tiny"
PAIR = "lattice_vector_1_ang*lattice_vector_2_ang"
LGB = '{"n_estimators": 800, "learning_rate": 0.05, "num_leaves": 7, "n_jobs": 1, "verbose": -1}'


def decision_settings(settings_cls) -> dict:
    """The strong configuration and its one-decision changes (name -> Settings)."""
    strong = settings_cls(
        (
            ("LOG_TARGET", "True"),
            ("ONE_HOT", "['spacegroup']"),
            ("PRODUCTS", repr([PAIR])),
            ("MODEL", '"lightgbm"'),
            ("PARAMS", LGB),
        )
    )
    return {
        "strong": strong,
        "no log1p target": strong.replace("LOG_TARGET", "False"),
        "no one-hot spacegroup": strong.replace("ONE_HOT", "[]"),
        "no basal-area product": strong.replace("PRODUCTS", "[]"),
        "another product (al*in)": strong.replace(
            "PRODUCTS", "['percent_atom_al*percent_atom_in']"
        ),
        "200 rounds": strong.replace("PARAMS", LGB.replace("800", "200")),
        "hist_gb 400": strong.replace("MODEL", '"hist_gb"').replace(
            "PARAMS", '{"max_iter": 400, "learning_rate": 0.1}'
        ),
        "random forest 200": strong.replace("MODEL", '"random_forest"').replace(
            "PARAMS", '{"n_estimators": 200, "max_depth": None}'
        ),
        "mlp (64, 32)": strong.replace("MODEL", '"mlp"').replace(
            "PARAMS", '{"hidden_layer_sizes": (64, 32), "max_iter": 500}'
        ),
        "ridge": strong.replace("MODEL", '"ridge"').replace("PARAMS", '{"alpha": 1.0}'),
    }


def best_of(valid: list[dict], n: int, reps: int = 50) -> float:
    """Mean private score of the public-best of `n` draws (without replacement), over `reps`."""
    picks = []
    for rep in range(reps):
        sub = random.Random(rep).sample(valid, min(n, len(valid)))
        picks.append(min(sub, key=lambda r: r["public"])["private"])
    return sum(picks) / len(picks)


def variant_tasks_dir(wave: float, period: float, dest: Path) -> Path:
    """A tasks dir holding the task with its generator's options in ``extra.generator`` (a
    task variant: `mlerl.bench.prepare` passes them to the generator and stamps them)."""
    import yaml

    from mlerl.bench import Registry

    builtin = Registry.load().get(TASK).task_dir
    task_dir = dest / TASK
    shutil.rmtree(task_dir, ignore_errors=True)
    shutil.copytree(builtin, task_dir)
    raw = yaml.safe_load((task_dir / "task.yaml").read_text(encoding="utf-8"))
    raw["extra"]["generator"] = {"wave": wave, "period": period}
    (task_dir / "task.yaml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return dest


def one(wave: float, period: float, draws: int, work: Path) -> dict:
    from mlerl.bench import Registry, prepare
    from mlerl.embedded import Settings, draw_settings, settings_code, task_views

    name = f"wave{wave}_period{period}"
    tasks = variant_tasks_dir(wave, period, work / name / "tasks")
    data = work / name / "data"
    prepare(TASK, data, tasks_dir=tasks)
    task = Registry.load(tasks_dir=tasks, data_dir=data).get(TASK)
    view = task_views(data, [TASK], tasks_dir=tasks)[0]
    changes = decision_settings(Settings)
    rng = random.Random("materials_wave:0")
    drawn = [draw_settings(view, rng) for _ in range(draws)]
    todo = [*changes.values(), *drawn]
    runs = asyncio.run(_run([settings_code(view, s) for s in todo], task, 300.0))
    decisions = {
        k: {"public": r.get("public"), "private": r.get("private"), "valid": r["valid"]}
        for k, r in zip(changes, runs, strict=False)
    }
    rows = [
        {"settings": dict(s.lines), **r} for s, r in zip(drawn, runs[len(changes) :], strict=True)
    ]
    valid = [r for r in rows if r["valid"]]
    with_pair = [r for r in rows if PAIR in r["settings"].get("PRODUCTS", "")]
    return {
        "wave": wave,
        "period": period,
        "decisions": decisions,
        "draws": len(rows),
        "draws_valid": len(valid),
        "draws_with_pair": len(with_pair),
        "generator_best_of": {
            str(n): round(best_of(valid, n), 4) for n in (16, 64, len(valid)) if valid
        },
        "rows": rows,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--waves", default="0,0.2,0.35")
    p.add_argument("--periods", default="6")
    p.add_argument("--draws", type=int, default=256)
    p.add_argument("--work-dir", type=Path, default=Path("/tmp/materials_wave"))
    p.add_argument("--name", default="materials_wave")
    args = p.parse_args()
    t0 = time.time()
    out = []
    for wave in [float(w) for w in args.waves.split(",")]:
        for period in [float(x) for x in args.periods.split(",")]:
            r = one(wave, period, args.draws, args.work_dir)
            out.append(r)
            strong = r["decisions"]["strong"]["private"]
            print(f"wave {wave} period {period}: strong private {strong:.4f}")
            for k, d in r["decisions"].items():
                print(f"  {k:26s} public {d['public']:.4f} private {d['private']:.4f}")
            print(f"  generator best-of (private): {r['generator_best_of']}")
    result = {
        "command": command_line(),
        "commit": git_commit(),
        "machine": machine_info(),
        "task": TASK,
        "results": out,
        "seconds": round(time.time() - t0, 1),
    }
    path = RESULTS / f"{args.name}.json"
    path.write_text(json.dumps(result, indent=1))
    print("wrote", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
