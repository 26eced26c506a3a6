"""The decision probe: shares of each settings-block decision among sampled answers."""

import torch

from mlerl.learner import answer_decisions
from mlerl.learner._probe import decision_shares, decisions, probe_decisions, settings_of

BEST = """Plan: log1p target, LightGBM, the basal-area product.
```python
import numpy as np
LOG_TARGET = True
ONE_HOT = ["spacegroup"]
PRODUCTS = ["lattice_vector_1_ang*lattice_vector_2_ang"]
MODEL = "lightgbm"
PARAMS = {"n_estimators": 400, "learning_rate": 0.05}
def main():
    X = 1
```"""
RIDGE = """Ridge.
```python
LOG_TARGET = False
ONE_HOT = []
PRODUCTS = []
MODEL = "ridge"
PARAMS = {"alpha": 1.0}
x = LOG_TARGET
```"""
BROKEN = "```python\nLOG_TARGET = True\nMODEL = (\n```"


def test_settings_are_the_top_level_upper_case_literals():
    s = settings_of(BEST)
    assert s == {
        "LOG_TARGET": True,
        "ONE_HOT": ["spacegroup"],
        "PRODUCTS": ["lattice_vector_1_ang*lattice_vector_2_ang"],
        "MODEL": "lightgbm",
        "PARAMS": {"n_estimators": 400, "learning_rate": 0.05},
    }
    assert settings_of(BROKEN) is None  # a syntax error: not parsed, no decision counted
    assert settings_of("NGRAMS = (2, 5)\nlower = 3\nX = f(1)") == {"NGRAMS": (2, 5)}


def test_decision_keys_of_lists_dicts_and_scalars():
    assert decisions({"ONE_HOT": [], "NGRAMS": (2, 5), "PARAMS": {"C": 10.0}}) == {
        "ONE_HOT=[]",
        "NGRAMS=(2, 5)",
        "PARAMS.C=10.0",
    }


def test_one_answer_s_decisions_or_none_when_its_program_does_not_parse():
    keys = answer_decisions(BEST)
    assert {"LOG_TARGET=True", "MODEL=lightgbm"} <= keys and "MODEL=ridge" not in keys
    assert answer_decisions(BROKEN) is None


def test_shares_are_over_all_answers():
    # 4 answers: two of the best configuration, one ridge, one that does not parse
    shares = decision_shares([BEST, RIDGE, BEST, BROKEN])
    assert shares["parsed"] == 0.75
    assert shares["LOG_TARGET=True"] == 0.5 and shares["LOG_TARGET=False"] == 0.25
    assert shares["MODEL=lightgbm"] == 0.5 and shares["MODEL=ridge"] == 0.25
    assert shares["PRODUCTS[]=lattice_vector_1_ang*lattice_vector_2_ang"] == 0.5
    assert shares["PRODUCTS=[]"] == 0.25 and shares["PARAMS.n_estimators=400"] == 0.5
    assert decision_shares([]) == {}


def test_probe_samples_n_answers_per_task_and_leaves_the_rng_alone(tiny_model):
    model = tiny_model()
    model.train()
    decoded = []

    def decode(ids):
        decoded.append(ids)
        return BEST if len(decoded) % 2 else RIDGE  # alternate: shares of 1/2 each

    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    out = probe_decisions(model, decode, {"t": ([5, 6, 7], 0.9)}, n=4, max_new_tokens=3, seed=0)
    assert torch.equal(torch.rand(1), before)  # the global RNG is where it was
    assert model.training  # mode restored
    assert len(decoded) == 4 and all(1 <= len(ids) <= 3 for ids in decoded)
    assert out["t/parsed"] == 1.0 and out["t/MODEL=lightgbm"] == 0.5
    # the same seed draws the same answers
    again = []
    probe_decisions(
        model,
        lambda ids: again.append(ids) or "",
        {"t": ([5, 6, 7], 0.9)},
        n=4,
        max_new_tokens=3,
        seed=0,
    )
    assert again == decoded
