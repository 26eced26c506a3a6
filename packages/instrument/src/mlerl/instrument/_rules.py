"""Where the deterministic instrumenter puts each marker: recognisers over the program's AST.

Rules (docs/instrument.md has the full table and examples):

- ``imported packages``: after the last module-level import that precedes the first
  module-level statement doing marked work (else after the last module-level import).
- ``loaded data``: after a call reading data (``pd.read_*``, ``np.load*``, ``json.load``,
  ``pickle.load``, ``Image.open``, ``cv2.imread``, ``load_dataset`` ...).
- ``defined model``: after constructing an estimator or network (``*Classifier``,
  ``*Regressor``, ``*Regression``, ``SVC``, ``*NB``, ``*Pipeline``, ``make_pipeline``,
  ``*SearchCV``, ``nn.Sequential``, ``*.from_pretrained`` on a ``*Model*`` class, or a class of
  the program that subclasses ``*Module``/``*Model``).
- ``trained model``: after ``.fit(X, y)`` (or ``.fit`` on an estimator), ``partial_fit``,
  ``lgb.train``/``xgb.train``, ``trainer.train()``, and after any loop that calls
  ``.backward()``.
- ``training loss:`` / ``testing loss:``: after a metric or loss computation
  (``accuracy_score``, ``log_loss``, ``roc_auc_score``, ``mean_squared_error``, ... ``.score``,
  ``cross_val_score``, ``criterion(...)``, ``*loss*(...)``) and after a loop calling
  ``.backward()`` (training). "training" when the names involved mention ``train`` and none
  mentions ``val``/``test``; otherwise "testing" (a Kaggle test split has no labels, so a
  held-out loss is a validation loss). ``x = metric(...)`` prints the value: ``print(m, x)``.
- ``predicted test labels``: after ``.predict``/``.predict_proba``/``.decision_function`` whose
  arguments do not look like training or validation data. Only when the program has no such
  call, after the statement writing the submission (``.to_csv``, ``np.savetxt``, ``.writerows``).

Placement: a marker goes on a new line after the statement, at its indentation. Never inside a
loop body: a trigger inside a loop moves to after the outermost loop of its function (no
per-iteration output flood). Consecutive statements triggering the same marker get one marker
after the last of them. A statement sharing its line with a compound header
(``if x: df = pd.read_csv(p)``) gets no marker.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

_LOADS = frozenset(
    "read_csv read_json read_parquet read_excel read_table read_feather read_pickle read_hdf "
    "read_sql loadtxt genfromtxt fromfile imread load_dataset load_img read_image "
    "load_files load_iris load_digits load_svmlight_file".split()
)
_LOAD_BASES = frozenset({"np", "numpy", "json", "pickle", "joblib", "Image", "PIL", "h5py"})
_METRICS = frozenset(
    "accuracy_score log_loss roc_auc_score mean_squared_error mean_absolute_error "
    "root_mean_squared_error f1_score r2_score precision_score recall_score "
    "balanced_accuracy_score matthews_corrcoef cohen_kappa_score mean_squared_log_error "
    "median_absolute_error average_precision_score cross_val_score cross_validate "
    "hamming_loss zero_one_loss hinge_loss brier_score_loss".split()
)
_PREDICTS = frozenset({"predict", "predict_proba", "predict_log_proba", "decision_function"})
_FITS = frozenset({"fit", "partial_fit", "train_on_batch", "fit_generator"})
_WRITES = frozenset({"to_csv", "savetxt", "writerows"})
_MODEL_CLASS = re.compile(
    r"(Classifier|Regressor|Regression|SVC|SVR|NB|Net|Model|Pipeline|Booster|Ridge|Lasso|"
    r"ElasticNet|Perceptron|KMeans|Sequential|SearchCV|Forest|RidgeCV|LassoCV)$"
)
_MODELISH = re.compile(
    r"model|clf|classifier|regressor|estimator|pipe|rf|xgb|lgb|gbm|svm|svc|knn|lr|reg|net|"
    r"search|grid|booster|forest|tree|ensemble|learner|nb"
)
_BOOST_LIBS = frozenset({"lgb", "lightgbm", "xgb", "xgboost", "cb", "catboost"})
_HELDOUT = frozenset({"val", "dev", "holdout", "oof", "eval", "validation", "cv"})


@dataclass
class Context:
    model_classes: set[str] = field(default_factory=set)
    model_vars: set[str] = field(default_factory=set)
    submission_fallback: bool = False


def walk_scope(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` that does not enter nested functions, classes or lambdas."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        for child in ast.iter_child_nodes(n):
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
                stack.append(child)


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node


def _callee(call: ast.Call) -> tuple[str | None, str | None]:
    """(root name of the receiver or None, called name) of ``call``."""
    f = call.func
    if isinstance(f, ast.Name):
        return None, f.id
    if isinstance(f, ast.Attribute):
        root = _root(f.value)
        return (root.id if isinstance(root, ast.Name) else None), f.attr
    return None, None


def _words(nodes: list[ast.AST]) -> list[str]:
    out: list[str] = []
    for node in nodes:
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                out.append(n.id.lower())
            elif isinstance(n, ast.Attribute):
                out.append(n.attr.lower())
            elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                out.append(n.value.lower())
    return out


def _split(words: list[str]) -> tuple[bool, bool, bool]:
    """(mentions training data, mentions validation data, mentions test data)."""
    toks = [t for w in words for t in re.split(r"[^a-z0-9]+", w) if t]
    train = any("train" in t or t in ("tr", "fit") for t in toks)
    val = any(t in _HELDOUT or (t.endswith("val") and len(t) <= 5) or t.startswith("valid") for t in toks)
    test = any("test" in t or t in ("te", "tst") for t in toks)
    return train, val, test


def _is_train(words: list[str]) -> bool:
    train, val, test = _split(words)
    return train and not (val or test)


def _is_model_call(call: ast.Call, ctx: Context) -> bool:
    base, name = _callee(call)
    if name is None:
        return False
    if name in ctx.model_classes or name == "make_pipeline" or _MODEL_CLASS.search(name):
        return True
    return name == "from_pretrained" and base is not None and "Model" in base


def _is_fit(call: ast.Call, ctx: Context) -> bool:
    base, name = _callee(call)
    if name == "train":
        return base is not None and (base in _BOOST_LIBS or "trainer" in base.lower())
    if name not in _FITS or not isinstance(call.func, ast.Attribute):
        return False
    recv = call.func.value
    if len(call.args) >= 2 or (isinstance(recv, ast.Call) and _is_model_call(recv, ctx)):
        return True
    root = _root(recv)
    return isinstance(root, ast.Name) and (
        root.id in ctx.model_vars or bool(_MODELISH.search(root.id.lower()))
    )


def _is_metric(call: ast.Call) -> bool:
    _, name = _callee(call)
    if name is None:
        return False
    low = name.lower()
    if name in _METRICS or "loss" in low or "criterion" in low or "entropy" in low:
        return True
    return name in ("score", "evaluate") and isinstance(call.func, ast.Attribute) and bool(call.args)


def _targets(stmt: ast.AST) -> list[ast.AST]:
    if isinstance(stmt, ast.Assign):
        return list(stmt.targets)
    if isinstance(stmt, ast.AnnAssign | ast.AugAssign):
        return [stmt.target]
    return []


def triggers(node: ast.AST, ctx: Context) -> set[str]:
    """Markers the operations in ``node`` (a statement or loop, own scope only) justify."""
    found: set[str] = set()
    targets = _targets(node)
    for n in walk_scope(node):
        if not isinstance(n, ast.Call):
            continue
        base, name = _callee(n)
        if name in _LOADS or (name in ("load", "open") and base in _LOAD_BASES):
            found.add("loaded data")
        if _is_model_call(n, ctx):
            found.add("defined model")
        if _is_fit(n, ctx):
            found.add("trained model")
        if name in _PREDICTS:
            train, val, test = _split(_words([*n.args, *n.keywords]))
            if test or not (train or val):
                found.add("predicted test labels")
        if _is_metric(n):
            words = _words([*n.args, *targets]) + ([name.lower()] if name else [])
            found.add("training loss:" if _is_train(words) else "testing loss:")
        if name == "backward":
            found.add("training loss:")
        if ctx.submission_fallback and name in _WRITES:
            found.add("predicted test labels")
    return found


def value_name(stmt: ast.stmt) -> str | None:
    """The variable a loss marker after ``stmt`` may print: the single name it assigns."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        t = stmt.targets[0]
        return t.id if isinstance(t, ast.Name) else None
    if isinstance(stmt, ast.AnnAssign) and stmt.value is not None and isinstance(stmt.target, ast.Name):
        return stmt.target.id
    return None
