"""What the whole program proves, for the placement rules (:mod:`mlerl.instrument._rules`):
:class:`Context`, built once per program by :func:`make_context`.

Provenance (what stops a fake ``pd.read_csv`` or ``TinyModel.fit`` from earning markers): a
call counts only if the AST proves it is the library's. Names resolve through imports
(:func:`mlerl.instrument._trust.imports`; a name rebound anywhere is not resolved); ``.fit``,
``.predict``, ``.score`` count only on a *proven model* (a name every binding of which is a
library estimator constructor, a program class deriving from a library model class, a program
function returning one, or ``.fit(...)``/``.to(...)`` of one) and only if no program class
defines a method of that name; ``.backward()`` only in a torch program with no program-defined
``backward``; loss names (``*loss*``, ``criterion``) only when resolved to a library or bound to a
library call.

The context is flow-insensitive: every binding of a name must agree. :func:`_is_model_value`
and :func:`_is_model_call` (is this expression a proven model / a model constructor) live here
because the context's fixpoint needs them; the rules use them too.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from mlerl.instrument._trust import bindings, imports, qualified

ML_LIBS = frozenset(
    [
        "sklearn",
        "lightgbm",
        "xgboost",
        "catboost",
        "torch",
        "torchvision",
        "tensorflow",
        "keras",
        "tf_keras",
        "transformers",
        "statsmodels",
        "timm",
        "sentence_transformers",
        "imblearn",
        "scipy",
        "pytorch_lightning",
        "lightning",
    ]
)
"""Libraries whose estimators, losses and metrics earn markers (resolved through imports)."""
_CHAIN = frozenset(
    {
        "fit",
        "partial_fit",
        "to",
        "cuda",
        "cpu",
        "eval",
        "double",
        "float",
        "half",
        "set_params",
        "best_estimator_",
    }
)
_BOOST_ROOTS = frozenset({"lightgbm", "xgboost", "catboost"})
_MODEL_CLASS = re.compile(
    r"(Classifier|Regressor|Regression|SVC|SVR|NB|Net|Model|Pipeline|Booster|Ridge|Lasso|"
    r"ElasticNet|Perceptron|KMeans|Sequential|SearchCV|Forest|RidgeCV|LassoCV)$"
)


@dataclass
class Context:
    """What the whole program proves (flow-insensitive: every binding of a name must agree)."""

    imported: dict[str, str] = field(default_factory=dict)
    """``{name: qualified}`` for names bound only by imports (``pd`` -> ``pandas``)."""
    model_classes: set[str] = field(default_factory=set)
    """Program classes deriving from a library model class (``class Net(nn.Module)``)."""
    fake_methods: set[str] = field(default_factory=set)
    """Method names some program class defines: calls of them prove nothing."""
    model_vars: set[str] = field(default_factory=set)
    """Names bound only to models (library / model-class constructors, ``.fit(...)`` results)."""
    model_funcs: set[str] = field(default_factory=set)
    """Program functions every ``return`` of which returns a model."""
    lib_vars: set[str] = field(default_factory=set)
    """Names bound only to results of library calls (``criterion = nn.CrossEntropyLoss()``)."""
    torch: bool = False
    submission_fallback: bool = False


def _qual(node: ast.expr, ctx: Context) -> str | None:
    return qualified(node, ctx.imported)


def _lib_call(call: ast.expr, ctx: Context, libs: frozenset[str] = ML_LIBS) -> str | None:
    """The qualified name of a call into ``libs`` (through imports), else None."""
    if not isinstance(call, ast.Call):
        return None
    q = _qual(call.func, ctx)
    return q if q is not None and q.split(".")[0] in libs else None


def _is_model_value(node: ast.expr, ctx: Context) -> bool:
    if isinstance(node, ast.Name):
        return node.id in ctx.model_vars
    if isinstance(node, ast.Attribute) and node.attr == "best_estimator_":
        return _is_model_value(node.value, ctx)
    if not isinstance(node, ast.Call):
        return False
    if _is_model_call(node, ctx):
        return True
    q = _lib_call(node, ctx)
    if q is not None and q.rsplit(".", 1)[-1] == "train" and q.split(".")[0] in _BOOST_ROOTS:
        return True
    f = node.func
    return isinstance(f, ast.Attribute) and f.attr in _CHAIN and _is_model_value(f.value, ctx)


def _is_model_call(call: ast.Call, ctx: Context) -> bool:
    """Constructing a library estimator/network, or a program class deriving from one."""
    f = call.func
    if isinstance(f, ast.Name) and (f.id in ctx.model_classes or f.id in ctx.model_funcs):
        return True
    q = _lib_call(call, ctx)
    if q is None:
        return False
    last = q.rsplit(".", 1)[-1]
    if last == "make_pipeline" or _MODEL_CLASS.search(last):
        return True
    return last == "from_pretrained" and "Model" in q


def make_context(tree: ast.AST) -> Context:
    """Import provenance, program model classes, model variables and functions of ``tree``."""
    ctx = Context(imported=imports(tree))
    ctx.torch = any(q.split(".")[0] == "torch" for q in ctx.imported.values())
    classes = [c for c in ast.walk(tree) if isinstance(c, ast.ClassDef)]
    for c in classes:
        for item in c.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                ctx.fake_methods.add(item.name)
    binds = bindings(tree)
    once = {name for name, nodes in binds.items() if len(nodes) == 1}
    for _ in range(3):  # derived-from-derived classes
        for c in classes:
            lib_base = any(
                (q := _qual(b, ctx)) is not None
                and q.split(".")[0] in ML_LIBS
                and bool(re.search(r"(Module|Model|Estimator|Classifier|Regressor)$", q))
                for b in c.bases
            )
            if c.name in once and (
                lib_base
                or any(isinstance(b, ast.Name) and b.id in ctx.model_classes for b in c.bases)
            ):
                ctx.model_classes.add(c.name)
    values: dict[int, ast.expr] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign | ast.AnnAssign | ast.NamedExpr) and n.value is not None:
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    values[id(t)] = n.value
    funcs = {
        f.name: f
        for f in ast.walk(tree)
        if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and f.name in once
    }
    for _ in range(4):  # fixpoint: model variables, functions returning models
        for name, nodes in binds.items():
            if all(id(b) in values and _is_model_value(values[id(b)], ctx) for b in nodes):
                ctx.model_vars.add(name)
            if all(id(b) in values and _lib_call(values[id(b)], ctx) for b in nodes):
                ctx.lib_vars.add(name)
        for name, f in funcs.items():
            rets = [r for r in walk_scope(f) if isinstance(r, ast.Return)]
            if rets and all(r.value is not None and _is_model_value(r.value, ctx) for r in rets):
                ctx.model_funcs.add(name)
    return ctx


def walk_scope(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` that does not enter nested functions, classes or lambdas."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        for child in ast.iter_child_nodes(n):
            if not isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda
            ):
                stack.append(child)
