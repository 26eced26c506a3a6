"""56 real sklearn/pandas programs failing at known stages, run in mlerl.sandbox's local backend.

Each program is instrumented by the deterministic instrumenter, run through the secure channel
with stdout streamed into a MarkerScanner, and must earn exactly the credit of its stage.
"""

from __future__ import annotations

import asyncio
import csv
from pathlib import Path

import pytest

from mlerl.instrument import (
    MARKERS,
    MarkerScanner,
    RewardConfig,
    RewardKind,
    compute_reward,
    instrument_ast,
    prepare_run,
)
from mlerl.protocol import ExecStatus
from mlerl.sandbox import ExecutionRequest, Limits, SandboxConfig, make_sandbox

IMP, LOAD, DEF, _TRAIN_LOSS, TRAINED, TEST_LOSS, PRED = MARKERS
MODELS = [
    ("sklearn.linear_model", "LogisticRegression", "max_iter=200"),
    ("sklearn.ensemble", "RandomForestClassifier", "n_estimators=5, random_state=0"),
    ("sklearn.tree", "DecisionTreeClassifier", "max_depth=3"),
    ("sklearn.neighbors", "KNeighborsClassifier", "n_neighbors=3"),
    ("sklearn.naive_bayes", "GaussianNB", ""),
    ("sklearn.ensemble", "ExtraTreesClassifier", "n_estimators=5, random_state=0"),
    ("sklearn.svm", "SVC", ""),
    ("sklearn.linear_model", "RidgeClassifier", ""),
]
PAPER = RewardConfig(kind=RewardKind.PAPER)
STAGES = ["import", "missing", "badcol", "fit", "wrongpath", "wrongname", "success"]


def make_program(stage: str, variant: int) -> tuple[str, set[str], ExecStatus]:
    """(program, markers it must reach, its execution status)."""
    module, cls, args = MODELS[variant]
    metric, in_main = variant % 2 == 0, variant % 4 < 2
    head = ["import numpy as np", "import pandas as pd", f"from {module} import {cls}"]
    if metric:
        head += ["from sklearn.metrics import accuracy_score",
                 "from sklearn.model_selection import train_test_split"]  # fmt: skip
    if stage == "import":
        head.append("import nonexistent_package_xyz")
    train_file = "missing.csv" if stage == "missing" else "train.csv"
    cols = '["f1", "f2", "nope"]' if stage == "badcol" else '["f1", "f2", "f3"]'
    y_fit = "y[:3]" if stage == "fit" else "y"
    out = {"wrongpath": "./output/submission.csv", "wrongname": "preds.csv"}.get(
        stage, "submission.csv"
    )
    body = [f'train = pd.read_csv("./input/{train_file}")', 'test = pd.read_csv("./input/test.csv")',
            f"features = {cols}", "X = train[features]", 'y = train["target"]',
            f"model = {cls}({args})"]  # fmt: skip
    if metric:
        body += ["X_tr, X_val, y_tr, y_val = train_test_split(X, y, test_size=0.25, random_state=0)",
                 "model.fit(X_tr, y_tr)", "val_acc = accuracy_score(y_val, model.predict(X_val))",
                 'print("validation accuracy", val_acc)']  # fmt: skip
    body += [f"model.fit(X, {y_fit})" if not (metric and stage == "fit") else "", 
             'preds = model.predict(test[features])',
             'sub = pd.DataFrame({"id": test["id"], "target": preds})',
             f'sub.to_csv("{out}", index=False)']  # fmt: skip
    if metric and stage == "fit":
        body[body.index("model.fit(X_tr, y_tr)")] = "model.fit(X_tr, y_tr[:3])"
    body = [b for b in body if b]
    if in_main:
        code = "\n".join(head + ["", "def main():"] + ["    " + b for b in body]
                         + ["", 'if __name__ == "__main__":', "    main()"]) + "\n"  # fmt: skip
    else:
        code = "\n".join(head + [""] + body) + "\n"
    reached = {
        "import": set(),
        "missing": {IMP},
        "badcol": {IMP, LOAD},
        "fit": {IMP, LOAD, DEF},
    }.get(stage, {IMP, LOAD, DEF, TRAINED, PRED} | ({TEST_LOSS} if metric else set()))
    ok = stage in ("wrongname", "success")
    return code, reached, ExecStatus.OK if ok else ExecStatus.PROGRAM_ERROR


def write_data(root: Path) -> list[int]:
    """train.csv (60 rows) and test.csv (20 rows); returns the test labels (for the grader)."""
    rows = [(i, i % 7, (i * 3) % 5, (i * 7) % 11, int(i % 7 + (i * 3) % 5 > 5)) for i in range(80)]
    with open(root / "train.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "f1", "f2", "f3", "target"])
        w.writerows(rows[:60])
    with open(root / "test.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "f1", "f2", "f3"])
        w.writerows(r[:4] for r in rows[60:])
    return [r[4] for r in rows[60:]]


def grade(path: Path | None, labels: list[int]) -> tuple[bool, float | None]:
    """Accuracy of a submission (id, target) over the 20 test rows; invalid when malformed."""
    if path is None:
        return False, None
    with open(path) as f:
        got = list(csv.DictReader(f))
    if len(got) != len(labels) or any(set(r) != {"id", "target"} for r in got):
        return False, None
    return True, sum(int(float(r["target"])) == y for r, y in zip(got, labels)) / len(labels)


async def _run_all(
    programs: list[str], data: Path
) -> list[tuple[ExecStatus, list[str], Path | None, str]]:
    sandbox = make_sandbox(SandboxConfig(backend="local", max_concurrency=2))
    try:

        async def one(program: str):
            prepared = prepare_run(instrument_ast(program), "secure")
            scanner = MarkerScanner(prepared.nonce)
            req = ExecutionRequest(program=prepared.program, data_dir=data,
                                   limits=Limits(wall_time_s=120.0))  # fmt: skip
            res = await sandbox.run(req, on_output=lambda s, c: s == "stdout" and scanner.feed(c))
            return res.status, scanner.close(), res.files.get("submission.csv"), res.error

        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(one(p)) for p in programs]
        return [t.result() for t in tasks]
    finally:
        await sandbox.close()


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_corpus_earns_exactly_the_expected_credit(tmp_path: Path) -> None:
    labels = write_data(tmp_path)
    cases = [(s, v, *make_program(s, v)) for s in STAGES for v in range(len(MODELS))]
    assert len(cases) >= 50
    results = asyncio.run(_run_all([c[2] for c in cases], tmp_path))
    for (stage, variant, _code, reached, status), (got_status, markers, sub, error) in zip(
        cases, results
    ):
        where = f"{stage}/{MODELS[variant][1]} (sandbox: {error!r})"
        assert got_status is status, where
        assert set(markers) == reached, where
        valid, score = grade(sub, labels)
        # the paper's raw reward: a valid run is rewarded its accuracy itself
        reward = compute_reward(markers, got_status, score, valid, False, PAPER).reward
        if stage == "success":
            assert valid and reward == score and 0.0 <= score <= 1.0, where
        else:
            assert reward == pytest.approx(-10.0 + 0.1 * len(reached)), where
