"""The paper's prompts (appendix C.1 draft, C.2 improve, C.3 instrument) as chat messages.

The SFT corpus and RL sampling must format prompts identically, or the bootstrap trains the
policy on a distribution it never sees again. So C.1/C.2 come from `mlerl.actors`
(`scratch_prompt`, `improve_prompt`, default `PromptConfig`) and C.3 is `mlerl.instrument`'s
`INSTRUMENT_PROMPT`: the policy and the static instrumentation model are trained on exactly the
prompts the actors and the `LMInstrumenter` send.
Messages are plain `{"role", "content"}` dicts, the shape `apply_chat_template` takes.
"""

from __future__ import annotations

from mlerl.instrument import MARKERS as MARKERS  # re-exported: the paper's seven markers


def _dicts(messages) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def draft_messages(task, config=None) -> list[dict[str, str]]:
    """C.1 for `task` (a `mlerl.bench.TaskSpec`), via `mlerl.actors.scratch_prompt`."""
    from mlerl.actors import PromptConfig, scratch_prompt

    return _dicts(scratch_prompt(task, config or PromptConfig()))


def improve_messages(task, plan: str, code: str, output: str, config=None) -> list[dict[str, str]]:
    """C.2 for `task`: revise `plan` + `code` given its terminal `output` (actors' builder)."""
    from mlerl.actors import PromptConfig, improve_prompt

    return _dicts(improve_prompt(task, plan, code, output, config or PromptConfig()))


def instrument_messages(code: str) -> list[dict[str, str]]:
    """C.3, exactly as `mlerl.instrument.LMInstrumenter` asks its frozen LM."""
    from mlerl.instrument import INSTRUMENT_PROMPT

    return [{"role": "user", "content": INSTRUMENT_PROMPT.format(code=code)}]


def format_answer(plan: str, code: str) -> str:
    """The assistant turn: a 3-5 sentence plan, then ONE python code block."""
    return f"{plan.strip()}\n\n```python\n{code.strip()}\n```"


def extract_code(text: str) -> str | None:
    """The first fenced code block of a completion, or None when there is none."""
    start = text.find("```")
    if start < 0:
        return None
    body_start = text.find("\n", start)
    if body_start < 0:
        return None
    end = text.find("```", body_start + 1)
    body = text[body_start + 1 : end if end >= 0 else len(text)]
    return body if end >= 0 else None
