"""The paper's reported numbers, kept as data with their source (raw metric values).

Source: "Reinforcement Learning for Machine Learning Engineering Agents" (the paper this repo
implements), Table 1 (AIDE scaffold with several models; last column Qwen2.5-3B trained with
RL) and Table 2 (GPT-4o with three scaffolds). Mean over 3 runs; None = no valid submission
(N/A in the paper), NaN = reported as NaN.
"""

from __future__ import annotations

SOURCE = "rl-for-mle-agents paper, Table 1 and Table 2 (mean of 3 runs, raw metric values)"
NAN = float("nan")

TASKS = (
    "detecting-insults-in-social-commentary",
    "learning-agency-lab-automated-essay-scoring-2",
    "random-acts-of-pizza",
    "tweet-sentiment-extraction",
    "tabular-playground-series-may-2022",
    "tabular-playground-series-dec-2021",
    "us-patent-phrase-to-phrase-matching",
    "plant-pathology-2020-fgvc7",
    "leaf-classification",
    "nomad2018-predict-transparent-conductors",
    "spooky-author-identification",
    "lmsys-chatbot-arena",
)

TABLE1_COLUMNS = (
    "Qwen2.5-3B AIDE",
    "Llama3.1-405B AIDE",
    "Claude3.5-Sonnet AIDE",
    "GPT-4o AIDE 100h",
    "Qwen2.5-3B RL",
)
_T1 = (
    (0.870, None, None, None, 0.895),
    (0.331, 0.777, 0.794, 0.759, 0.746),
    (0.589, 0.619, 0.627, 0.638, 0.663),
    (0.027, None, 0.448, 0.283, 0.596),
    (0.787, 0.939, 0.743, 0.883, 0.913),
    (0.827, 0.771, 0.645, 0.957, 0.951),
    (0.065, None, 0.805, 0.588, 0.527),
    (0.628, 0.968, 0.990, 0.970, 0.970),
    (0.884, 6.747, 0.436, 0.846, 0.124),
    (0.178, 0.166, 0.083, 0.072, 0.059),
    (0.596, 0.487, 0.701, 0.546, 0.404),
    (11.48, 1.269, 2.211, 1.451, 1.081),
)
TABLE2_COLUMNS = ("GPT-4o AIDE", "GPT-4o OpenHands", "GPT-4o MLAB", "Qwen2.5-3B RL")
_T2 = (
    (NAN, 0.867, 0.749, 0.895),
    (0.720, 0.681, 0.533, 0.746),
    (0.645, 0.591, 0.520, 0.663),
    (0.294, 0.415, 0.158, 0.596),
    (0.884, 0.882, 0.711, 0.913),
    (0.957, 0.957, 0.828, 0.951),
    (0.756, 0.366, NAN, 0.527),
    (0.980, 0.680, 0.735, 0.970),
    (0.656, 0.902, 4.383, 0.124),
    (0.144, 0.183, 0.294, 0.059),
    (0.576, 0.582, 0.992, 0.404),
    (1.323, 1.131, 10.324, 1.081),
)
TABLE1: dict[str, dict[str, float | None]] = {
    t: dict(zip(TABLE1_COLUMNS, r, strict=True)) for t, r in zip(TASKS, _T1, strict=True)
}
TABLE2: dict[str, dict[str, float | None]] = {
    t: dict(zip(TABLE2_COLUMNS, r, strict=True)) for t, r in zip(TASKS, _T2, strict=True)
}

# MLE-bench medal rates (% any medal; all 75 tasks / lite 22 tasks) quoted in the paper.
MEDAL_RATES = {
    "AIDE o1-preview": (17.12, 35.91),
    "AIDE gpt-4o": (8.63, 18.55),
    "AIDE claude-3.5-sonnet": (7.56, 19.70),
    "OpenHands gpt-4o": (4.89, 12.12),
    "AIDE llama-3.1-405b": (3.33, 10.23),
    "MLAB gpt-4o": (1.60, 4.55),
}
