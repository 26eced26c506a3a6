"""The deterministic instrumenter: marker placement rules, verified output."""

from __future__ import annotations

import ast

import pytest

from mlerl.instrument import instrument_ast
from mlerl.instrument._markers import marker_of
from mlerl.instrument._verify import finalize

PIZZA = """\
import pandas as pd
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.ensemble import RandomForestClassifier
import numpy as np

train_data = pd.read_json("input/train.json")
test_data = pd.read_json("input/test.json")

tfidf_vectorizer = TfidfVectorizer(stop_words="english", max_features=1000)
X_train_tfidf = tfidf_vectorizer.fit_transform(train_data["text"])
X_test_tfidf = tfidf_vectorizer.transform(test_data["text"])
rf_classifier = RandomForestClassifier(n_estimators=100, random_state=42)
rf_classifier.fit(X_train_tfidf, train_data["label"])
y_pred_proba = rf_classifier.predict_proba(X_test_tfidf)[:, 1]
submission = pd.DataFrame({"id": test_data["id"], "label": y_pred_proba})
submission.to_csv("./submission.csv", index=False)
"""


def _after(code: str) -> list[tuple[str, str]]:
    """(marker, the source line of the statement it follows) for every marker statement."""
    lines = [ln.strip() for ln in code.splitlines()]
    marks = [_marker_line(ln) for ln in lines]
    out = []
    for i, m in enumerate(marks):
        if m is not None:
            j = i - 1
            while marks[j] is not None:
                j -= 1
            out.append((m, lines[j]))
    return out


def _marker_line(line: str) -> str | None:
    if not line.startswith("print("):
        return None
    return marker_of(ast.parse(line).body[0])


def test_paper_example_gets_the_papers_placement() -> None:
    # Figure 12 of the paper: the same five markers after the same operations.
    got = _after(instrument_ast(PIZZA))
    assert got == [
        ("imported packages", "import numpy as np"),
        ("loaded data", 'test_data = pd.read_json("input/test.json")'),
        (
            "defined model",
            "rf_classifier = RandomForestClassifier(n_estimators=100, random_state=42)",
        ),
        ("trained model", 'rf_classifier.fit(X_train_tfidf, train_data["label"])'),
        ("predicted test labels", "y_pred_proba = rf_classifier.predict_proba(X_test_tfidf)[:, 1]"),
    ]


def test_output_is_the_original_plus_markers() -> None:
    out = instrument_ast(PIZZA)
    assert finalize(PIZZA, out) == out


def test_metrics_split_into_training_and_testing_loss_with_values() -> None:
    code = (
        "from sklearn.metrics import accuracy_score, log_loss\n"
        "from sklearn.linear_model import LogisticRegression\n"
        "model = LogisticRegression()\n"
        "train_acc = accuracy_score(y_train, model.predict(X_train))\n"
        "x = 1\n"
        "val_loss = log_loss(y_val, model.predict_proba(X_val))\n"
        "y = 2\n"
        "print(model.score(X_valid, y_valid))\n"
        "print(model.score(X_val, y_val))\n"  # consecutive: one marker after the last
    )
    got = _after(instrument_ast(code))
    assert ("training loss:", "train_acc = accuracy_score(y_train, model.predict(X_train))") in got
    assert ("testing loss:", "val_loss = log_loss(y_val, model.predict_proba(X_val))") in got
    assert ("testing loss:", "print(model.score(X_val, y_val))") in got
    assert ("testing loss:", "print(model.score(X_valid, y_valid))") not in got
    out = instrument_ast(code)
    assert 'print("training loss:", train_acc)' in out
    assert 'print("testing loss:", val_loss)' in out
    # predictions on training / validation data are not "predicted test labels"
    assert "predicted test labels" not in out


def test_no_marker_inside_a_loop_training_loop_marks_after_it() -> None:
    code = (
        "import torch\n"
        "for epoch in range(3):\n"
        "    for xb, yb in loader:\n"
        "        loss = criterion(model(xb), yb)\n"
        "        loss.backward()\n"
        "        opt.step()\n"
        "x = 1\n"
    )
    out = instrument_ast(code)
    body = ast.parse(out).body
    loop_i = next(i for i, s in enumerate(body) if isinstance(s, ast.For))
    after = [marker_of(s) for s in body[loop_i + 1 : loop_i + 3]]
    assert after == ["training loss:", "trained model"]
    assert not any(marker_of(s) for s in ast.walk(body[loop_i]) if isinstance(s, ast.stmt))


def test_markers_inside_functions_and_branches() -> None:
    code = (
        "import pandas as pd\n"
        "def load(path):\n"
        "    if path:\n"
        "        df = pd.read_csv(path)\n"
        "        return df\n"
        "    return None\n"
    )
    out = instrument_ast(code)
    assert '        df = pd.read_csv(path)\n        print("loaded data")\n        return df' in out


def test_submission_write_marks_predictions_only_without_predict_calls() -> None:
    code = "import numpy as np\npreds = net(X_test)\nnp.savetxt('submission.csv', preds)\n"
    got = _after(instrument_ast(code))
    assert ("predicted test labels", "np.savetxt('submission.csv', preds)") in got


def test_programs_own_marker_prints_do_not_stay_marker_statements() -> None:
    code = 'import os\nprint("loaded data")\nprint("trained model")\n'
    out = instrument_ast(code)
    markers = [marker_of(s) for s in ast.parse(out).body]
    assert markers == [None, "imported packages", None, None]


def test_statement_sharing_a_line_with_a_header_gets_no_marker() -> None:
    code = "import pandas as pd\nif True: df = pd.read_csv('x')\n"
    assert "loaded data" not in instrument_ast(code)


def test_no_trailing_newline_and_semicolons() -> None:
    code = "import pandas as pd; import numpy as np\ndf = pd.read_csv('x'); y = 1"
    out = instrument_ast(code)
    assert out.endswith("df = pd.read_csv('x'); y = 1\nprint(\"loaded data\")\n")
    assert finalize(code, out) == out


def test_unparsable_input_raises_syntax_error() -> None:
    with pytest.raises(SyntaxError):
        instrument_ast("def broken(:\n")


def test_correlation_metrics_count_but_other_numpy_calls_do_not() -> None:
    """Pearson via numpy's corrcoef (or scipy's pearsonr) is a metric computation; numpy's other
    functions (a mean, a sum) are not, whatever the variable is called."""
    code = (
        "import numpy as np\n"
        "from scipy.stats import pearsonr\n"
        "train_r = np.corrcoef(y, pred)[0, 1]\n"
        "x = 1\n"
        "val_r, _ = pearsonr(y_val, pred_val)\n"
        "y2 = 2\n"
        "val_loss = np.mean(np.abs(y_val - pred_val))\n"
    )
    got = _after(instrument_ast(code))
    assert ("training loss:", "train_r = np.corrcoef(y, pred)[0, 1]") in got
    assert ("testing loss:", "val_r, _ = pearsonr(y_val, pred_val)") in got
    assert not any(line.startswith("val_loss = np.mean") for _, line in got)
