"""`mlerl eval`: best-of-K of a policy on tasks, with the paper's test-time protocol.

    mlerl eval --model RUN_DIR/policy --run RUN_DIR --k 16 --seeds 3
    mlerl eval --model INITIAL_POLICY_DIR --run RUN_DIR --k 16 --aide

``--run`` reuses the run's actor settings (prompt sizes, temperature, response length, task
data), so the policy is evaluated on the prompts it was trained with.

For each seed and task, K samples are drawn from the fixed policy (half of them improving an
earlier sample once one exists: generate from scratch, improve, take the best), run in the
sandbox, graded outside it and summarised. The output JSON holds per-seed summaries, the mean
+- s.e. over seeds of best-of-K and mean-of-K (the paper's protocol), and for the best
submission score the MLE-bench medal flags from the task's thresholds. The best of K is chosen
on the public leaderboard and reported on the private one (``best_of_k_mean``), with its public
score (``best_public_mean``) and the gap beside it; ``--public-fraction 1`` (or a run with
``tasks.public_fraction=1``) grades everything on all answers, as the paper did. Each seed's
summary carries the selected solution itself (``best_solution``: plan, program, terminal output,
public and private score, its position among the K), as a training run keeps ``best/<task>/``.

``--aide`` runs the AIDE-style baseline instead (``mlerl.actors.evaluate_aide``): a greedy tree
search (draft, debug, improve) driven by the same fixed policy, K steps = K program executions
per task and seed, each run, graded and summarised like an RL sample; the search optimises the
graded score. A response with no runnable program is sampled again, up to
``--aide-parse-attempts`` LLM calls per step (AIDE's 3; 1 makes such a response a step that ran
nothing). Each task's summary adds the best score after each execution
(``best_vs_executions``), the wall-clock seconds of each step and the LLM calls in all.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any


def evaluate_over_seeds(model_path: str, task_ids: list[str], **kwargs: Any) -> dict[str, Any]:
    """:func:`evaluate_policy` in its own event loop."""
    return asyncio.run(evaluate_policy(model_path, task_ids, **kwargs))


async def evaluate_policy(
    model_path: str,
    task_ids: list[str],
    *,
    k: int,
    seeds: list[int],
    base: Any = None,
    data_dir: str = "",
    tasks_dir: str = "",
    sandbox_backend: str = "local",
    sandbox_config: Any = None,
    method: str = "best_of_k",
    public_fraction: float | None = None,
    aide_parse_attempts: int = 3,
) -> dict[str, Any]:
    """Evaluate ``model_path`` and return the JSON-ready result (see the module docstring).

    ``base`` is an ``ActorsConfig`` whose prompts and sampling are reused (a run's ``actors``
    section; the engine is always ``hf``); ``data_dir``/``tasks_dir`` are a run's ``tasks``
    keys. ``sandbox_config`` (a run's ``sandbox`` section) overrides ``sandbox_backend``.
    ``method``: ``best_of_k`` (the paper's test-time protocol) or ``aide`` (the baseline, K
    executions per task). ``public_fraction``: a run's ``tasks.public_fraction`` (None: each
    task's own). ``aide_parse_attempts``: ``AideConfig.parse_attempts`` (``aide`` only)."""
    if method not in ("best_of_k", "aide"):
        raise ValueError(f"method must be 'best_of_k' or 'aide', not {method!r}")
    from mlerl.actors import ActorsConfig
    from mlerl.bench import Registry

    config = dataclasses.replace(base or ActorsConfig(), engine="hf")
    registry = Registry.load(tasks_dir or None, data_dir or None, public_fraction=public_fraction)
    tasks = {t: registry.get(t) for t in task_ids}
    per_seed: list[dict[str, Any]] = []
    for seed in seeds:
        result = await _one_seed(
            config,
            model_path,
            seed,
            tasks,
            k,
            sandbox_backend,
            sandbox_config,
            method,
            aide_parse_attempts,
        )
        per_seed.append({"seed": seed, "tasks": result})
    return {
        "model": model_path,
        "method": method,
        "k": k,
        **({"aide": {"parse_attempts": aide_parse_attempts}} if method == "aide" else {}),
        "seeds": seeds,
        "public_fraction": {t: tasks[t].public_fraction for t in task_ids},
        "per_seed": per_seed,
        "tasks": {t: _across_seeds(t, tasks[t], per_seed) for t in task_ids},
    }


async def _one_seed(
    config: Any,
    model_path: str,
    seed: int,
    tasks: dict[str, Any],
    k: int,
    backend: str,
    sandbox_config: Any = None,
    method: str = "best_of_k",
    aide_parse_attempts: int = 3,
) -> dict[str, Any]:
    from mlerl.actors import AideConfig, RealPipeline, evaluate, evaluate_aide, make_engine
    from mlerl.sandbox import SandboxConfig, make_sandbox

    engine = make_engine(config, model_path, seed)
    slots = config.admission.max_in_flight
    sandbox_config = dataclasses.replace(
        sandbox_config or SandboxConfig(backend=backend), max_concurrency=slots
    )
    sandbox = make_sandbox(sandbox_config)
    pipeline = RealPipeline(config)
    try:
        kwargs: dict[str, Any] = {"engine": engine, "sandbox": sandbox, "pipeline": pipeline}
        if method == "aide":
            aide = AideConfig(parse_attempts=aide_parse_attempts)
            return await evaluate_aide(config, tasks, k=k, seed=seed, aide=aide, **kwargs)
        return await evaluate(config, tasks, k=k, seed=seed, **kwargs)
    finally:
        await sandbox.close()
        pipeline.close()
        await engine.close()


def mean_se(values: list[float | None]) -> tuple[float | None, float | None]:
    """Mean and standard error over seeds (bench's protocol); None where undefined (JSON)."""
    from mlerl.bench import mean_se as bench_mean_se

    mean, se = bench_mean_se([math.nan if v is None else float(v) for v in values])
    return (None if math.isnan(mean) else mean), (None if math.isnan(se) else se)


def _across_seeds(task_id: str, task: Any, per_seed: list[dict[str, Any]]) -> dict[str, Any]:
    from mlerl.bench import rank_score

    best = [run["tasks"][task_id]["best_score"] for run in per_seed]
    mean = [run["tasks"][task_id]["mean_score"] for run in per_seed]
    public = [run["tasks"][task_id].get("best_public") for run in per_seed]
    gap = [run["tasks"][task_id].get("best_gap") for run in per_seed]
    best_m, best_se = mean_se(best)
    mean_m, mean_se_ = mean_se(mean)
    medals: dict[str, Any] = {}
    if best_m is not None and task.thresholds is not None:
        medals = _medal_flags(rank_score, best_m, task)
    return {
        "best_of_k_mean": best_m,
        "best_of_k_se": best_se,
        "best_public_mean": mean_se(public)[0],
        "best_gap_mean": mean_se(gap)[0],
        "mean_of_k_mean": mean_m,
        "mean_of_k_se": mean_se_,
        "valid_runs": sum(b is not None for b in best),
        **medals,
    }


def _medal_flags(rank_score: Any, score: float, task: Any) -> dict[str, Any]:
    t = task.thresholds
    ranking = rank_score(score, t.gold, t.silver, t.bronze, t.median, task.lower_is_better)
    return {
        k: getattr(ranking, k)
        for k in ("gold_medal", "silver_medal", "bronze_medal", "above_median")
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mlerl eval", description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="HF model directory of the policy")
    parser.add_argument(
        "--run", type=Path, help="a run directory: reuse its actor settings and tasks"
    )
    parser.add_argument("--tasks", default="", help="comma-separated task ids (default: the run's)")
    parser.add_argument("--k", type=int, default=16, help="samples per task and seed (default 16)")
    parser.add_argument("--seeds", type=int, default=3, help="how many seeds (default 3)")
    parser.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="seeds FIRST..FIRST+N-1 (default 0): e.g. a run's own seed",
    )
    parser.add_argument(
        "--data-dir",
        default="",
        help="prepared task data (default: the run's, else MLE-bench's cache)",
    )
    parser.add_argument("--backend", default="local", choices=["local", "docker"])
    parser.add_argument(
        "--aide",
        action="store_true",
        help="run the AIDE baseline with the policy (K executions per task) instead of best-of-K",
    )
    parser.add_argument(
        "--aide-parse-attempts",
        type=int,
        default=3,
        help="with --aide: LLM calls per step at most when a response holds no runnable program "
        "(default 3, as AIDE; 1: no resampling)",
    )
    parser.add_argument(
        "--scratch-only",
        action="store_true",
        help="best-of-K from scratch prompts only (improve_prob 0) instead of the run's mix of "
        "scratch and improve prompts",
    )
    parser.add_argument(
        "--public-fraction",
        type=float,
        default=None,
        help="share of each task's answers on the public leaderboard, which selects the best "
        "(default: the run's tasks.public_fraction, else each task's; 1: no split)",
    )
    parser.add_argument("--out", type=Path, help="write the JSON here too")
    args = parser.parse_args(argv)
    if args.k < 1 or args.seeds < 1:
        parser.error("--k and --seeds must be >= 1")
    if args.first_seed < 0:
        parser.error("--first-seed must be >= 0")
    if args.aide_parse_attempts < 1:
        parser.error("--aide-parse-attempts must be >= 1")
    if args.scratch_only and args.aide:
        parser.error("--scratch-only is a best-of-K option; AIDE chooses its own prompts")
    if not (Path(args.model) / "config.json").is_file():
        parser.error(f"--model {args.model} is not a Hugging Face model directory")
    from mlerl.actors import ActorsConfig
    from mlerl.protocol import ConfigError, RunTasks, load_run, load_section

    base, run_tasks = ActorsConfig(), RunTasks()  # without --run: the defaults of `mlerl train`
    if args.run:
        path = args.run / "config.yaml"
        try:
            run_tasks = load_run(path).tasks
            base = load_section(ActorsConfig, path, "actors")
        except (ConfigError, OSError) as exc:
            parser.error(f"--run {args.run}: {exc}")
    if args.scratch_only:
        improvement = dataclasses.replace(base.improvement, improve_prob=0.0)
        base = dataclasses.replace(base, improvement=improvement)
    fraction = run_tasks.public_fraction
    if args.public_fraction is not None:
        if not 0.0 < args.public_fraction <= 1.0:
            parser.error("--public-fraction must lie in (0, 1]")
        fraction = args.public_fraction
    tasks = [t for t in args.tasks.split(",") if t] or run_tasks.ids
    result = evaluate_over_seeds(
        args.model,
        tasks,
        k=args.k,
        seeds=list(range(args.first_seed, args.first_seed + args.seeds)),
        base=base,
        data_dir=args.data_dir or run_tasks.data_dir,
        tasks_dir=run_tasks.tasks_dir,
        sandbox_backend=args.backend,
        method="aide" if args.aide else "best_of_k",
        public_fraction=fraction,
        aide_parse_attempts=args.aide_parse_attempts,
    )
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
