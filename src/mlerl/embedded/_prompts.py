"""The paper's prompts (appendix C.1 draft, C.2 improve, C.3 instrument) as chat messages.

The SFT corpus and RL sampling must format prompts identically, or the bootstrap trains the
policy on a distribution it never sees again: RL actors should build prompts with these
functions. The wording follows C.1/C.2/C.3 with the data path adapted to the program contract
(`./input/`) and the task's description.md as the task text.
Messages are plain `{"role", "content"}` dicts, the shape `apply_chat_template` takes.
"""

from __future__ import annotations

SYSTEM = (
    "You are given a machine learning task. You must solve the task by training a model and "
    "running the model on the test set to produce a submission file."
)

_DRAFT = (
    "First outline your proposed solution in natural language (3-5 sentences), followed by a "
    "single markdown code block (wrapped in ```) which implements this solution. Note:\n"
    "- The task's data files are available in `./input/`.\n"
    "- You MUST produce a submission file at `./submission.csv` by running your model on the "
    "test split.\n"
    "- You can use pre-installed packages such as: `pandas`, `numpy`, `scikit-learn`, "
    "`lightgbm`, `scipy`, `torch`, `Pillow`.\n"
    "- You can't access the internet so don't use any pre-trained models needing downloading.\n"
    "\n{description}"
)

_IMPROVE = (
    "You have implemented a previous solution. Revise the solution to improve the performance "
    "on the test set. First outline your proposed solution in natural language (3-5 sentences), "
    "followed by a single markdown code block (wrapped in ```) which implements this solution. "
    "If you reuse parts of the example code, include those sections again in your final "
    "solution. Previous solution:\n```\n{previous}\n```\n"
)
_OUTPUT = "Terminal output of the previous solution:\n```\n{output}\n```\n"

MARKERS = (
    "imported packages", "loaded data", "defined model", "training loss:", "trained model",
    "testing loss:", "predicted test labels",
)

_INSTRUMENT = (
    "Please insert print statements in the given python script. The print statements are "
    "supposed to reflect the progress of executing a script that solves a Kaggle challenge "
    "machine learning benchmark. These print statements will be used to debug the python script "
    "so it needs to capture the progress of execution.\n\nPrint Statements:\n"
    + "".join(f'- print("{m}")\n' for m in MARKERS)
    + "\nRequirements:\n"
    "- Only insert print statement AFTER an operation is actually performed (e.g., data have "
    "actually been loaded).\n"
    '- Insert print statements for "training loss:" and "testing loss:" if applicable (i.e., '
    "the code actually computes training or testing losses).\n"
    "- Output the entire python script after inserting print statements in a single markdown "
    "code block (wrapped in ```).\n"
    "- Do not modify the original python code, other than inserting print statements.\n\n"
    "Now please insert print statements for this python script:\n```python\n{code}\n```"
)


def draft_messages(description: str) -> list[dict[str, str]]:
    """C.1: solve the task described by `description` (the task's description.md)."""
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": _DRAFT.format(description=description.strip())},
    ]


def improve_messages(previous: str, output: str | None = None) -> list[dict[str, str]]:
    """C.2: revise `previous` (plan + code); `output` is its terminal output, if any."""
    user = _IMPROVE.format(previous=previous.strip())
    if output:
        user += _OUTPUT.format(output=output.strip())
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def instrument_messages(code: str) -> list[dict[str, str]]:
    """C.3: insert the progress print statements into `code`."""
    return [{"role": "user", "content": _INSTRUMENT.format(code=code.strip())}]


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
