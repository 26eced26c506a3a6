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
- ``predicted test labels``: after ``.predict``/``.predict_proba``/``.decision_function`` on a
  proven model whose arguments do not look like training or validation data. Only when the
  program has no ``.predict``-like call at all, after the statement writing the submission
  (``.to_csv``, ``np.savetxt``, ``.writerows``).

Provenance (what stops a fake ``pd.read_csv`` or ``TinyModel.fit`` from earning markers): a
call counts only if the AST proves it is the library's. What the whole program proves (import
resolution, proven models, methods the program defines) is :mod:`mlerl.instrument._context`.

Placement: a marker goes on a new line after the statement, at its indentation. Never inside a
loop body: a trigger inside a loop moves to after the outermost loop of its function (no
per-iteration output flood). Consecutive statements triggering the same marker get one marker
after the last of them. A statement sharing its line with a compound header
(``if x: df = pd.read_csv(p)``) gets no marker.

The position check of an LM's answer (a marker justified by a statement dominating it) applies
these rules: :mod:`mlerl.instrument._position`.
"""

from __future__ import annotations

import ast
import re

from mlerl.instrument._context import (
    _BOOST_ROOTS,
    Context,
    _is_model_call,
    _is_model_value,
    _lib_call,
    walk_scope,
)

_LOADS = frozenset(
    [
        "read_csv",
        "read_json",
        "read_parquet",
        "read_excel",
        "read_table",
        "read_feather",
        "read_pickle",
        "read_hdf",
        "read_sql",
        "loadtxt",
        "genfromtxt",
        "fromfile",
        "imread",
        "load_dataset",
        "load_img",
        "read_image",
        "load_files",
        "load_iris",
        "load_digits",
        "load_svmlight_file",
    ]
)
_METRICS = frozenset(
    [
        "accuracy_score",
        "log_loss",
        "roc_auc_score",
        "mean_squared_error",
        "mean_absolute_error",
        "root_mean_squared_error",
        "f1_score",
        "r2_score",
        "precision_score",
        "recall_score",
        "balanced_accuracy_score",
        "matthews_corrcoef",
        "cohen_kappa_score",
        "mean_squared_log_error",
        "median_absolute_error",
        "average_precision_score",
        "cross_val_score",
        "cross_validate",
        "hamming_loss",
        "zero_one_loss",
        "hinge_loss",
        "brier_score_loss",
        "pearsonr",
        "spearmanr",
        "kendalltau",
    ]  # scipy's correlations (numpy's: _is_metric)
)
_PREDICTS = frozenset({"predict", "predict_proba", "predict_log_proba", "decision_function"})
_FITS = frozenset({"fit", "partial_fit", "train_on_batch", "fit_generator"})
_WRITES = frozenset({"to_csv", "savetxt", "writerows"})
_HELDOUT = frozenset({"val", "dev", "holdout", "oof", "eval", "validation", "cv"})

DATA_LIBS = frozenset(
    [
        "pandas",
        "numpy",
        "json",
        "pickle",
        "joblib",
        "PIL",
        "cv2",
        "datasets",
        "h5py",
        "scipy",
        "torchvision",
        "tensorflow",
        "keras",
        "sklearn",
        "imageio",
        "skimage",
        "polars",
        "pyarrow",
        "librosa",
        "soundfile",
    ]
)
_LOAD_ROOTS = frozenset({"numpy", "json", "pickle", "joblib", "PIL", "h5py"})
_LOSSY = re.compile(r"loss|criterion|entropy")


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
    val = any(
        t in _HELDOUT or (t.endswith("val") and len(t) <= 5) or t.startswith("valid") for t in toks
    )
    test = any("test" in t or t in ("te", "tst") for t in toks)
    return train, val, test


def _is_train(words: list[str]) -> bool:
    train, val, test = _split(words)
    return train and not (val or test)


def _trusted_method(call: ast.Call, names: frozenset[str], ctx: Context) -> bool:
    """``<model>.<name>(...)`` on a proven model, ``name`` not defined by any program class."""
    f = call.func
    return (
        isinstance(f, ast.Attribute)
        and f.attr in names
        and f.attr not in ctx.fake_methods
        and _is_model_value(f.value, ctx)
    )


def _is_fit(call: ast.Call, ctx: Context) -> bool:
    q = _lib_call(call, ctx)
    if q is not None and q.split(".")[0] in _BOOST_ROOTS and q.endswith(".train"):
        return True
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr == "train" and "train" not in ctx.fake_methods:
        root = _root(f.value)
        return (
            isinstance(root, ast.Name) and root.id in ctx.lib_vars and "trainer" in root.id.lower()
        )
    return _trusted_method(call, _FITS, ctx)


def _is_metric(call: ast.Call, ctx: Context) -> bool:
    q = _lib_call(call, ctx)
    np_q = _lib_call(call, ctx, frozenset({"numpy"})) if q is None else None
    if np_q is not None:  # numpy is a data library; of its functions only corrcoef is a metric
        return np_q.rsplit(".", 1)[-1] == "corrcoef"
    if q is not None:
        last = q.rsplit(".", 1)[-1]
        return last in _METRICS or bool(_LOSSY.search(last.lower()))
    f = call.func
    if isinstance(f, ast.Name) and f.id in ctx.lib_vars:
        return bool(_LOSSY.search(f.id.lower()))
    return bool(call.args) and _trusted_method(call, frozenset({"score", "evaluate"}), ctx)


def _is_load(call: ast.Call, ctx: Context) -> bool:
    q = _lib_call(call, ctx, DATA_LIBS)
    if q is None:
        return False
    last, root = q.rsplit(".", 1)[-1], q.split(".")[0]
    return last in _LOADS or (last in ("load", "open") and root in _LOAD_ROOTS)


def _is_write(call: ast.Call, ctx: Context) -> bool:
    _, name = _callee(call)
    if name == "to_csv":
        return any(q.split(".")[0] in ("pandas", "polars") for q in ctx.imported.values())
    if name == "writerows":
        return any(q.split(".")[0] == "csv" for q in ctx.imported.values())
    q = _lib_call(call, ctx, DATA_LIBS)
    return q is not None and q.rsplit(".", 1)[-1] == "savetxt"


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
        _, name = _callee(n)
        if _is_load(n, ctx):
            found.add("loaded data")
        if _is_model_call(n, ctx):
            found.add("defined model")
        if _is_fit(n, ctx):
            found.add("trained model")
        if _trusted_method(n, _PREDICTS, ctx):
            train, val, test = _split(_words([*n.args, *n.keywords]))
            if test or not (train or val):
                found.add("predicted test labels")
        if _is_metric(n, ctx):
            words = _words([*n.args, *targets]) + ([name.lower()] if name else [])
            found.add("training loss:" if _is_train(words) else "testing loss:")
        if is_backward(n, ctx):
            found.add("training loss:")
        if ctx.submission_fallback and _is_write(n, ctx):
            found.add("predicted test labels")
    return found


def is_backward(node: ast.AST, ctx: Context) -> bool:
    """``x.backward()`` counts only in a torch program with no program class defining it."""
    return (
        ctx.torch
        and "backward" not in ctx.fake_methods
        and isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "backward"
    )


def value_name(stmt: ast.stmt) -> str | None:
    """The variable a loss marker after ``stmt`` may print: the single name it assigns."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        t = stmt.targets[0]
        return t.id if isinstance(t, ast.Name) else None
    if (
        isinstance(stmt, ast.AnnAssign)
        and stmt.value is not None
        and isinstance(stmt.target, ast.Name)
    ):
        return stmt.target.id
    return None


def has_predict_calls(tree: ast.AST) -> bool:
    """Any ``.predict``-like call at all: then writing a submission proves no prediction."""
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _PREDICTS
        for n in ast.walk(tree)
    )
