"""Benchmark: does duration weighting stop the policy from collapsing onto fast, worse actions?

``python benchmarks/experiments/duration_bias.py [--seeds 5] [--updates 50]``

A bandit with solution "arms" of known reward and execution time (paper section 3.1, Figure 2):
``fast_bad`` (0.05 s, reward 0), ``fast_ok`` (0.05 s, reward 0.5) and ``slow_best`` (0.4 s,
reward 1.0); rewards get N(0, 0.1) noise and execution times a lognormal factor (sigma 0.3).
Executions *really sleep* and deliver a :class:`mlerl.protocol.Sample` (behaviour log-prob,
policy version, measured duration) into the real :class:`ExperienceBuffer`; the learner trains
on the first B completed with the real :func:`gae` (scalar critic, gamma = lambda = 1),
:func:`duration_weights`, :func:`ppo_policy_loss` (clip 0.2, entropy 0.001) and
:func:`value_loss` (clip 0.5). Three ways of scheduling executions (the REGIME of ``--scenarios REGIME:BASELINE,...``;
BASELINE is ``critic``, A = R - V, or ``none``, A = R):

- ``pool``: a fixed pool of ``--slots`` concurrent executions, each refilled from the current
  policy as soon as it completes; slow samples not in the first B wait for a later batch
  (mlerl's actors + buffer).
- ``lanes``: the same pool, but a slot keeps re-running its chosen arm for 0.4 s, so an arm's
  share of execution *time* is its probability and its sample count is pi(x) T / dt_x: the
  model of the paper's section 3.1 derivation.
- ``wave``: Algorithm 1 literally: launch m * B from the current policy, train on the first B
  completed, abandon the rest (what a synchronous framework's step does).

The policy is a softmax over arms (a logit vector) trained with plain SGD. Adam is deliberately
not used here: it normalises each logit's step separately, which would erase the per-action
gradient magnitudes the frequency bias acts on (in an LLM the parameters are shared across
actions, so magnitudes matter there).

Writes ``benchmarks/results/duration_bias.json`` and ``duration_bias.png``. The durations used
for weighting are the measured sleep times; ``--parallel`` runs share the event loop at once (too many make sleeps late,
which the JSON's ``measured_exec_s_per_arm`` would show).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from mlerl.protocol import ExecStatus, PromptKind, Sample

from mlerl.learner import (
    DurationWeighting,
    ExperienceBuffer,
    duration_weights,
    entropy_from_logits,
    gae,
    ppo_policy_loss,
    terminal_rewards,
    update_running_mean,
    value_loss,
    weight_stats,
)

ARMS = (("fast_bad", 0.05, 0.0), ("fast_ok", 0.05, 0.5), ("slow_best", 0.4, 1.0))
SLOW = 2  # index of slow_best


@dataclass
class Run:
    mode: DurationWeighting
    seed: int
    lr: float
    jitter: float = 0.3
    """sigma of the lognormal factor on each execution time."""
    baseline: str = "critic"
    """``critic``: A = R - V (GAE, gamma = lambda = 1, scalar critic); ``none``: A = R (V = 0)."""
    theta: torch.Tensor = field(default_factory=lambda: torch.zeros(len(ARMS), requires_grad=True))
    value: torch.Tensor = field(default_factory=lambda: torch.zeros(1, requires_grad=True))
    version: int = 0
    running_dt: float | None = None
    p_slow: list[float] = field(default_factory=list)
    mean_duration: list[float] = field(default_factory=list)
    grad_mass_slow: list[float] = field(default_factory=list)
    measured: dict[int, list[float]] = field(
        default_factory=lambda: {a: [] for a in range(len(ARMS))}
    )
    """Measured execution time of every trained sample, per arm (checks the loop kept up)."""

    def __post_init__(self) -> None:
        self.opt_pi = torch.optim.SGD([self.theta], lr=self.lr)
        self.opt_v = torch.optim.SGD([self.value], lr=0.5)
        self.rng = torch.Generator().manual_seed(self.seed)

    def probs(self) -> torch.Tensor:
        return torch.softmax(self.theta.detach(), -1)


def _choose(run: Run) -> tuple[int, float, int]:
    probs = run.probs()
    arm = int(torch.multinomial(probs, 1, generator=run.rng))
    return arm, float(torch.log(probs[arm])), run.version


async def _execute(
    run: Run,
    buffer: ExperienceBuffer,
    arrived: asyncio.Event,
    actor: str,
    seq: int,
    choice: tuple[int, float, int] | None = None,
) -> None:
    """Execute ``choice`` (arm, behaviour log-prob, version; default: sample one now), deliver the Sample."""
    arm, logprob, version = choice if choice is not None else _choose(run)
    _, duration, mean_reward = ARMS[arm]
    jitter = float(torch.exp(run.jitter * torch.randn(1, generator=run.rng)))  # lognormal, median 1
    t0 = time.time()
    await asyncio.sleep(duration * jitter)
    t1 = time.time()
    reward = mean_reward + 0.1 * float(torch.randn(1, generator=run.rng))
    buffer.add(
        Sample(
            sample_id=f"{actor}:{seq}",
            actor_id=actor,
            seq=seq,
            task_id="bandit",
            prompt_kind=PromptKind.SCRATCH,
            prompt_ids=[0],
            response_ids=[arm],
            behaviour_logprobs=[logprob],
            policy_version=version,
            t_sampled=t0,
            t_exec_started=t0,
            t_exec_finished=t1,
            duration_s=t1 - t0,
            exec_status=ExecStatus.OK,
            reward=reward,
        ),
        sync=False,
    )
    arrived.set()


async def _slot(
    run: Run, buffer: ExperienceBuffer, arrived: asyncio.Event, worker: int, hold_s: float
) -> None:
    """One execution slot, refilled as soon as its execution completes. With ``hold_s`` > 0
    (``lanes`` regime) the slot keeps re-running the arm it chose for ``hold_s`` seconds."""
    seq, choice, until = 0, None, 0.0
    while True:
        if hold_s <= 0 or time.time() >= until:
            choice, until = _choose(run), time.time() + hold_s
        await _execute(run, buffer, arrived, f"w{worker}", seq, choice)
        seq += 1


def bandit_update(run: Run, batch: list[Sample]) -> None:
    """One PPO update of the softmax policy and the scalar critic on a batch of Samples."""
    B = len(batch)
    arms = torch.tensor([s.response_ids[0] for s in batch])
    mask = torch.ones(B, 1)  # one action token per sample
    rewards = torch.tensor([s.reward for s in batch])
    durations = torch.tensor([s.duration_s for s in batch])
    old_logprobs = torch.tensor([s.behaviour_logprobs for s in batch])  # (B, 1)
    old_values = (
        run.value.detach().expand(B)[:, None] if run.baseline == "critic" else torch.zeros(B, 1)
    )
    advantages, returns = gae(
        terminal_rewards(rewards, mask), old_values, mask, 1.0, 1.0
    )  # A = R - V
    weights = duration_weights(durations, run.mode, clip=5.0, running_mean=run.running_dt)
    run.running_dt = update_running_mean(run.running_dt, durations, 0.9)

    logprobs = torch.log_softmax(run.theta, -1)[arms][:, None]  # (B, 1)
    pg_loss, _ = ppo_policy_loss(logprobs, old_logprobs, advantages, mask, weights, clip_ratio=0.2)
    entropy = entropy_from_logits(
        run.theta
    )  # every sample's (one-token) policy is the same softmax
    run.opt_pi.zero_grad()
    (pg_loss - 0.001 * entropy).backward()
    torch.nn.utils.clip_grad_norm_([run.theta], 1.0)
    run.opt_pi.step()

    if run.baseline == "critic":
        vf_loss, _ = value_loss(run.value.expand(B)[:, None], old_values, returns, mask, clip=0.5)
        run.opt_v.zero_grad()
        vf_loss.backward()
        run.opt_v.step()
    run.version += 1
    run.p_slow.append(float(run.probs()[SLOW]))
    run.mean_duration.append(float(durations.mean()))
    for s in batch:
        run.measured[s.response_ids[0]].append(s.duration_s)
    run.grad_mass_slow.append(weight_stats(weights, durations, advantages[:, 0])["grad_mass_slow"])


async def _wait_for(buffer: ExperienceBuffer, arrived: asyncio.Event, n: int) -> None:
    while not buffer.ready(n):
        arrived.clear()
        await arrived.wait()


async def simulate(
    run: Run,
    *,
    regime: str,
    updates: int,
    batch_size: int,
    slots: int,
    multiplier: int,
    workdir: Path,
) -> Run:
    """``pool``: ``slots`` executions always in flight, train on the first B completed, slow ones
    kept for later batches. ``lanes``: the same, but each slot holds its chosen arm for 0.4 s of
    back-to-back re-runs (time share of an arm = its probability: the paper's model, n_x =
    pi(x) T / dt_x). ``wave``: Algorithm 1 literally: launch m * B from the current policy,
    train on the first B completed, abandon the rest (a synchronous framework's step)."""
    buffer = ExperienceBuffer(workdir / f"{regime}-{run.baseline}-{run.mode.value}-{run.seed}")
    arrived = asyncio.Event()
    try:
        if regime in ("pool", "lanes"):
            hold_s = max(d for _, d, _ in ARMS) if regime == "lanes" else 0.0
            async with asyncio.TaskGroup() as tg:
                tasks = [
                    tg.create_task(_slot(run, buffer, arrived, w, hold_s)) for w in range(slots)
                ]
                while run.version < updates:
                    await _wait_for(buffer, arrived, batch_size)
                    bandit_update(run, buffer.take(batch_size))  # the first B completed
                for task in tasks:
                    task.cancel()
        else:
            seq = 0
            while run.version < updates:
                async with asyncio.TaskGroup() as tg:
                    tasks = [
                        tg.create_task(_execute(run, buffer, arrived, "wave", seq + i))
                        for i in range(multiplier * batch_size)
                    ]
                    seq += len(tasks)
                    await _wait_for(buffer, arrived, batch_size)
                    for task in tasks:
                        task.cancel()  # the unfinished (slow) executions are abandoned
                batch = buffer.take(batch_size)
                buffer.take(len(buffer))  # completions beyond B in the same tick are dropped too
                bandit_update(run, batch)
    finally:
        buffer.close()
    return run


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "mean": statistics.fmean(values),
        "std": statistics.pstdev(values),
        "min": min(values),
        "max": max(values),
    }


def _to_90(p: list[float]) -> int | None:
    return next((i + 1 for i, x in enumerate(p) if x >= 0.9), None)


def _mode_summary(mine: list[Run]) -> dict:
    hits = [_to_90(r.p_slow) for r in mine]
    reached = [h for h in hits if h is not None]
    return {
        "final_p_slow": _summary([r.p_slow[-1] for r in mine]),
        "final_p_fast_ok": _summary([float(r.probs()[1]) for r in mine]),
        "updates_to_90": hits,
        "updates_to_90_median_of_reached": statistics.median(reached) if reached else None,
        "seeds_reaching_90": len(reached),
        "mean_exec_s_last10": _summary([statistics.fmean(r.mean_duration[-10:]) for r in mine]),
        "grad_mass_slow_mean": statistics.fmean(x for r in mine for x in r.grad_mass_slow),
        "measured_exec_s_per_arm": {
            ARMS[a][0]: statistics.fmean(x for r in mine for x in r.measured[a])
            if any(r.measured[a] for r in mine)
            else None
            for a in range(len(ARMS))
        },
        "trained_samples_per_arm": {
            ARMS[a][0]: sum(len(r.measured[a]) for r in mine) for a in range(len(ARMS))
        },
        "p_slow_per_update": [r.p_slow for r in mine],
    }


def report(runs: list[tuple[str, Run]], args: argparse.Namespace, wall_s: float) -> dict:
    out: dict = {
        "command": "python benchmarks/experiments/duration_bias.py "
        + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "out"),
        "arms": [{"name": n, "duration_s": d, "reward_mean": r} for n, d, r in ARMS],
        "setup": {k: v for k, v in vars(args).items() if k != "out"},
        "wall_s": wall_s,
        "scenarios": {},
    }
    for regime in dict.fromkeys(g for g, _ in runs):
        modes = dict.fromkeys(r.mode for g, r in runs if g == regime)
        out["scenarios"][regime] = {
            m.value: _mode_summary([r for g, r in runs if g == regime and r.mode is m])
            for m in modes
        }
    return out


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    regimes = list(result["scenarios"])
    cols = 2
    rows = (len(regimes) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 4.0 * rows), squeeze=False)
    for ax in axes.flat[len(regimes) :]:
        ax.set_visible(False)
    for ax, regime in zip(axes.flat, regimes):
        for mode, data in result["scenarios"][regime].items():
            curves = torch.tensor(data["p_slow_per_update"])  # (seeds, updates)
            x = range(1, curves.shape[1] + 1)
            ax.plot(x, curves.mean(0), label=f"{mode} (mean of {curves.shape[0]} seeds)")
            ax.fill_between(x, curves.min(0).values, curves.max(0).values, alpha=0.15)
        ax.axhline(0.9, color="grey", lw=0.8, ls="--")
        ax.set_xlabel("policy update")
        ax.set_ylabel("P(slow_best arm)")
        ax.set_title(f"{regime}: fast_ok (0.05 s, R=0.5) vs slow_best (0.4 s, R=1)", fontsize=9)
        ax.set_ylim(0, 1)
        ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


async def _main(args: argparse.Namespace) -> list[tuple[str, Run]]:
    modes = [DurationWeighting(m) for m in args.modes.split(",")]
    scenarios = [tuple(x.split(":")) for x in args.scenarios.split(",")]
    jobs = [
        (f"{regime}:{baseline}", Run(mode, seed, args.lr, args.jitter, baseline))
        for regime, baseline in scenarios
        for mode in modes
        for seed in range(args.seeds)
    ]
    gate = asyncio.Semaphore(args.parallel)  # too many concurrent runs would make the sleeps late

    async def one(scenario: str, run: Run, workdir: Path) -> None:
        async with gate:
            await simulate(
                run,
                regime=scenario.split(":")[0],
                updates=args.updates,
                batch_size=args.batch_size,
                slots=args.slots,
                multiplier=args.multiplier,
                workdir=workdir,
            )

    with tempfile.TemporaryDirectory() as tmp:
        async with asyncio.TaskGroup() as tg:
            for regime, run in jobs:
                tg.create_task(one(regime, run, Path(tmp)))
    return jobs


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--updates", type=int, default=50)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--slots", type=int, default=16, help="concurrent executions per run")
    p.add_argument("--lr", type=float, default=2.0, help="SGD learning rate of the logits")
    p.add_argument("--modes", default="none,paper,clipped,log,running")
    p.add_argument(
        "--scenarios",
        default="lanes:none,lanes:critic,pool:critic,wave:critic",
        help="REGIME:BASELINE pairs; regimes lanes|pool|wave (see simulate), baselines critic|none",
    )
    p.add_argument("--multiplier", type=int, default=2, help="m of Algorithm 1 (wave regime)")
    p.add_argument(
        "--jitter", type=float, default=0.3, help="sigma of the lognormal noise on execution times"
    )
    p.add_argument("--parallel", type=int, default=5, help="runs sharing the event loop at once")
    p.add_argument(
        "--out", default=str(Path(__file__).resolve().parents[1] / "results" / "duration_bias.json")
    )
    args = p.parse_args(argv)
    t0 = time.time()
    runs = asyncio.run(_main(args))
    result = report(runs, args, time.time() - t0)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    plot(result, out.with_suffix(".png"))
    for regime, modes in result["scenarios"].items():
        for mode, data in modes.items():
            f = data["final_p_slow"]
            print(
                f"{regime:>12} {mode:>8}: final P(slow_best) {f['mean']:.3f} +- {f['std']:.3f} [{f['min']:.3f}, {f['max']:.3f}]  "
                f"updates to 90%: {data['updates_to_90']}  exec s (last 10): {data['mean_exec_s_last10']['mean']:.3f}"
            )
    print(f"wrote {out} and {out.with_suffix('.png')} in {result['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
