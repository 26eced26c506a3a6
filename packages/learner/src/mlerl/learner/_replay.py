"""Self-imitation (``LearnerConfig.replay_best``): the run's best solutions, trained on again.

An update's batch holds the samples of the last few executions; the run's best solution may be
many updates old, and a mean-reward update then pushes its rare decisions down with the rest of
its group. :class:`ReplayArchive` keeps, per task, the ``k`` best distinct programs of the
samples the learner has trained on (valid, ranked on the signed public score like every
selection; the first of equal scores stays; a program already kept is not kept twice), and
:meth:`ReplayArchive.replays` turns them into samples on the task's scratch prompt for the next
update. There they join the task's scratch group, so the group baseline decides their advantage
(positive while they beat what the policy samples now). The learner takes their old log-probs
from the policy itself (:meth:`mlerl.learner.Learner.update`'s ``replay``).

Only an answer that holds its whole program can be replayed as a from-scratch answer: a sample
is kept only when ``holds_program(sample)`` says so (the learner decodes its response and looks
for the program), which leaves out ``edit``-format revisions. The archive is part of the
checkpoint (``state_dict``), so a resumed run replays what the interrupted one would have.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from mlerl.learner._best import signed_public
from mlerl.protocol import PromptKind, Sample, decode, encode

REPLAY_PREFIX = "replay:"
"""Sample ids of replays: ``replay:<the original's id>``."""


class ReplayArchive:
    """Per task, the ``k`` best distinct programs trained on so far."""

    def __init__(self, k: int, holds_program: Callable[[Sample], bool]) -> None:
        self.k = k
        self.holds_program = holds_program
        self.kept: dict[str, list[tuple[float, Sample]]] = {}
        """Per task: (signed public score, sample), best first."""
        self.prompts: dict[str, list[int]] = {}
        """Per task: the scratch prompt of the first scratch sample trained on."""

    def offer(self, samples: Iterable[Sample]) -> None:
        """Keep those of ``samples`` that are among their task's ``k`` best distinct programs
        (and note each task's scratch prompt)."""
        for sample in samples:
            if sample.prompt_kind is PromptKind.SCRATCH:
                self.prompts.setdefault(sample.task_id, list(sample.prompt_ids))
            signed = signed_public(sample)
            if signed is None or self.k == 0:
                continue
            kept = self.kept.setdefault(sample.task_id, [])
            if any(s.code == sample.code for _, s in kept):
                continue
            if len(kept) == self.k and signed <= kept[-1][0]:
                continue
            if not self.holds_program(sample):
                continue
            at = next((i for i, (v, _) in enumerate(kept) if signed > v), len(kept))
            kept.insert(at, (signed, sample))
            del kept[self.k :]

    def replays(self, batch: list[Sample]) -> list[Sample]:
        """The kept solutions as answers to their task's scratch prompt (tasks whose scratch
        prompt is known), best first per task, leaving out any that is in ``batch`` itself (it
        is trained on there)."""
        in_batch = {s.sample_id for s in batch}
        out = []
        for task, kept in sorted(self.kept.items()):
            prompt = self.prompts.get(task)
            if prompt is None:
                continue
            out += [
                replay_of(sample, prompt) for _, sample in kept if sample.sample_id not in in_batch
            ]
        return out

    def state_dict(self) -> dict[str, Any]:
        """Plain values (a checkpoint loads with ``weights_only``): samples as the hex of their
        protocol encoding."""
        return {
            "kept": {
                task: [[v, encode(s).hex()] for v, s in kept] for task, kept in self.kept.items()
            },
            "prompts": {task: list(ids) for task, ids in self.prompts.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        kept: dict[str, list[tuple[float, Sample]]] = {}
        for task, rows in state["kept"].items():
            for v, text in rows:
                sample = decode(bytes.fromhex(text))
                if not isinstance(sample, Sample):
                    raise ValueError(f"replay archive of {task!r}: not a sample")
                kept.setdefault(task, []).append((float(v), sample))
        self.kept = kept
        self.prompts = {task: [int(i) for i in ids] for task, ids in state["prompts"].items()}


def holds_program(sample: Sample, decode_ids: Callable[[list[int]], str]) -> bool:
    """Whether ``sample``'s response (decoded by ``decode_ids``) holds its whole program, white
    space aside: true of a rewritten program, not of a search/replace edit."""
    if not sample.code.strip():
        return False
    text = "".join(decode_ids(sample.response_ids).split())
    return "".join(sample.code.split()) in text


def replay_of(sample: Sample, scratch_prompt: list[int]) -> Sample:
    """``sample``'s answer to the scratch prompt ``scratch_prompt``: a from-scratch sample with
    its response, reward and execution, no parent."""
    fields = {f: getattr(sample, f) for f in sample.__struct_fields__}
    fields.update(
        sample_id=REPLAY_PREFIX + sample.sample_id,
        prompt_kind=PromptKind.SCRATCH,
        prompt_ids=list(scratch_prompt),
        parent_id=None,
        parent_reward=None,
    )
    return Sample(**fields)


def fit_to_split(batch_size: int, replays: list[Sample], split: int) -> list[Sample]:
    """The first replays such that batch and replays still split into ``split`` equal parts
    (minibatches x ranks): an update with an uneven split would be refused."""
    keep = len(replays) - (batch_size + len(replays)) % split
    return replays[: max(keep, 0)]
