"""Code chunks of a generated program (see `_programs.render`); pure string building."""

from __future__ import annotations

# name used in the body -> the import line it needs (checked in this order)
_IMPORTS = (
    ("os.", "import os"),
    ("np.", "import numpy as np"),
    ("Path(", "from pathlib import Path"),
    ("Image.", "from PIL import Image"),
    ("make_pipeline(", "from sklearn.pipeline import make_pipeline"),
    ("StandardScaler", "from sklearn.preprocessing import StandardScaler"),
    ("train_test_split(", "from sklearn.model_selection import train_test_split"),
    ("cross_val_score(", "from sklearn.model_selection import cross_val_score"),
    ("roc_auc_score(", "from sklearn.metrics import roc_auc_score"),
    ("log_loss(", "from sklearn.metrics import log_loss"),
    ("accuracy_score(", "from sklearn.metrics import accuracy_score"),
    ("cohen_kappa_score(", "from sklearn.metrics import cohen_kappa_score"),
    ("mean_squared_error(", "from sklearn.metrics import mean_squared_error"),
    ("TfidfVectorizer", "from sklearn.feature_extraction.text import TfidfVectorizer"),
    ("CountVectorizer", "from sklearn.feature_extraction.text import CountVectorizer"),
)


def imports_chunk(x, body: str) -> str:
    """Imports for everything `body` uses: pandas first, then stdlib/numpy, then sklearn."""
    lines = ["import pandas as pd"] + [line for key, line in _IMPORTS if key in body]
    lines = list(dict.fromkeys(lines + list(x.c.model.imports)))
    if x.c.names % 2:
        lines = sorted(lines, key=lambda s: (s.startswith("from"), s))
    return "\n".join(lines)


def features_chunk(x) -> str:
    n, v = x.n, x.view
    lines = []
    if v.modality == "text":
        lines += _text_features(x)
    elif v.modality == "image":
        lines += _image_features(x)
    else:
        lines += _tabular_features(x)
    if not _multi(x):
        lines.append(f"{n['y']} = {n['train']}[{x.LABEL}]")
    return "\n".join(lines)


def _multi(x) -> bool:
    return len(x.view.target_columns) > 1 and x.view.problem in ("binary", "regression")


def _tabular_features(x) -> list[str]:
    n, c = x.n, x.c
    X, Xt, tr, te = n["X"], n["Xt"], n["train"], n["test"]
    out = []
    if c.features == "drop":
        dropped = f"[{x.ID}] + {x.TARGETS}" if _multi(x) else f"[{x.ID}, {x.LABEL}]"
        out += [f"{X} = {tr}.drop(columns={dropped})", f"{Xt} = {te}[{X}.columns]"]
    else:
        if c.features == "numeric":
            out.append(
                f'feature_cols = {te}.drop(columns=[{x.ID}]).select_dtypes("number").columns'
            )
        else:
            out.append(f"feature_cols = [col for col in {te}.columns if col != {x.ID}]")
        out += [f"{X} = {tr}[feature_cols]", f"{Xt} = {te}[feature_cols]"]
    if c.features == "rowstats":
        out = [
            "def add_row_stats(df):",
            "    df = df.copy()",
            "    values = df.values",
            '    df["row_mean"] = values.mean(axis=1)',
            '    df["row_std"] = values.std(axis=1)',
            "    return df",
            "",
            *out,
            f"{X} = add_row_stats({X})",
            f"{Xt} = add_row_stats({Xt})",
        ]
    if c.fill == "zero":
        out += [f"{X} = {X}.fillna(0)", f"{Xt} = {Xt}.fillna(0)"]
    elif c.fill == "median":
        out += [
            f"medians = {X}.median()",
            f"{X} = {X}.fillna(medians)",
            f"{Xt} = {Xt}.fillna(medians)",
        ]
    return out


def _text_features(x) -> list[str]:
    n, p = x.n, x.c.params
    if x.c.features == "tfidf_char":
        vec = (
            'TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), '
            f"max_features={p['max_features']})"
        )
    elif x.c.features == "count":
        vec = f"CountVectorizer(ngram_range=(1, {p['ngram']}), max_features={p['max_features']})"
    else:
        vec = (
            f"TfidfVectorizer(ngram_range=(1, {p['ngram']}), max_features={p['max_features']}, "
            "sublinear_tf=True)"
        )
    return [
        f"vectorizer = {vec}",
        f'{n["X"]} = vectorizer.fit_transform({n["train"]}[{x.TEXT}].fillna("").astype(str))',
        f'{n["Xt"]} = vectorizer.transform({n["test"]}[{x.TEXT}].fillna("").astype(str))',
    ]


def _image_path(x) -> str:
    suffix = "" if x.view.image_column else ".png"
    return {
        0: f'f"input/images/{{name}}{suffix}"',
        1: f'f"./input/images/{{name}}{suffix}"',
        2: f'os.path.join(DATA_DIR, "images", f"{{name}}{suffix}")',
        3: f'INPUT / "images" / f"{{name}}{suffix}"',
    }[x.c.path_style]


def _image_features(x) -> list[str]:
    n, c = x.n, x.c
    size = c.params["size"]
    body = [
        "def load_images(names):",
        "    rows = []",
        "    for name in names:",
        f'        img = Image.open({_image_path(x)}).convert("L")',
    ]
    if c.features == "resize":
        body.append(f"        img = img.resize(({size}, {size}))")
    body.append("        arr = np.asarray(img, dtype=np.float32) / 255.0")
    if c.features == "projections":
        body.append(
            "        rows.append(np.concatenate([arr.ravel(), arr.mean(axis=0), arr.mean(axis=1)]))"
        )
    else:
        body.append("        rows.append(arr.ravel())")
    body += ["    return np.stack(rows)", ""]
    col = f'"{x.view.image_column}"' if x.view.image_column else x.ID
    body += [
        f"{n['X']} = load_images({n['train']}[{col}])",
        f"{n['Xt']} = load_images({n['test']}[{col}])",
    ]
    return body


def model_expr(x) -> str:
    m = x.c.model
    return f"make_pipeline(StandardScaler(), {m.ctor})" if m.scaled else m.ctor


def _metric(x, y: str, X: str) -> tuple[str, str]:
    """(expression scoring the model on X against y, metric label)."""
    model, problem, metric = x.n["model"], x.view.problem, x.view.metric.lower()
    if problem == "binary":
        return f"roc_auc_score({y}, {model}.predict_proba({X})[:, 1])", "auc"
    if problem == "proba":
        return f"log_loss({y}, {model}.predict_proba({X}))", "log loss"
    if problem == "label":
        if "kappa" in metric or "qwk" in metric:
            return f'cohen_kappa_score({y}, {model}.predict({X}), weights="quadratic")', "qwk"
        return f"accuracy_score({y}, {model}.predict({X}))", "accuracy"
    if metric == "pearson":
        return f"np.corrcoef({y}, {model}.predict({X}))[0, 1]", "pearson"
    return f"mean_squared_error({y}, {model}.predict({X})) ** 0.5", "rmse"


def fit_chunks(x) -> list[tuple[str, tuple[str, ...]]]:
    n, c = x.n, x.c
    X, y, model = n["X"], n["y"], n["model"]
    chunks: list[tuple[str, tuple[str, ...]]] = [(f"{model} = {model_expr(x)}", ("defined model",))]
    fit = (f"{model}.fit({X}, {y})", ("trained model",))
    if c.validation == "holdout":
        strat = f", stratify={y}" if x.view.problem != "regression" else ""
        score, label = _metric(x, "y_va", "X_va")
        text = (
            f"X_tr, X_va, y_tr, y_va = train_test_split({X}, {y}, test_size=0.2, "
            f"random_state={c.seed}{strat})\n{model}.fit(X_tr, y_tr)\n"
            f'val_score = {score}\nprint(f"validation {label}: {{val_score:.4f}}")'
        )
        chunks.append((text, ("testing loss:",) if c.refit else ("trained model", "testing loss:")))
        if c.refit:
            chunks.append(fit)
    elif c.validation == "cv":
        folds = 3 if c.budget == 0 else 5
        scoring = {
            "binary": "roc_auc",
            "proba": "neg_log_loss",
            "label": "accuracy",
            "regression": "r2",
        }[x.view.problem]
        text = (
            f'scores = cross_val_score({model}, {X}, {y}, cv={folds}, scoring="{scoring}")\n'
            f'print(f"cv {scoring}: {{scores.mean():.4f}} +/- {{scores.std():.4f}}")'
        )
        chunks += [(text, ("testing loss:",)), fit]
    else:
        chunks.append(fit)
    if c.train_score:
        score, label = _metric(x, y, X)
        chunks.append(
            (
                f'train_score = {score}\nprint(f"train {label}: {{train_score:.4f}}")',
                ("training loss:",),
            )
        )
    return chunks


def predict_chunk(x) -> str:
    n, problem = x.n, x.view.problem
    pred, model, Xt = n["pred"], n["model"], n["Xt"]
    if problem == "binary":
        return f"{pred} = {model}.predict_proba({Xt})[:, 1]"
    if problem == "proba":
        out = f"{pred} = {model}.predict_proba({Xt})"
        if x.c.clip:
            out += (
                f"\n{pred} = np.clip({pred}, 1e-6, 1 - 1e-6)\n"
                f"{pred} = {pred} / {pred}.sum(axis=1, keepdims=True)"
            )
        return out
    out = f"{pred} = {model}.predict({Xt})"
    if "rmsle" in x.view.metric.lower():
        out += f"\n{pred} = np.clip({pred}, 0, None)"
    return out


def multi_chunk(x) -> str:
    n, v = x.n, x.view
    call = "predict_proba({Xt})[:, 1]" if v.problem == "binary" else "predict({Xt})"
    clip = "rmsle" in v.metric.lower()
    lines = [
        f"{n['sub']} = pd.DataFrame({{{x.ID}: {n['test']}[{x.ID}]}})",
        f"for col in {x.TARGETS}:",
        f"    {n['model']} = {model_expr(x)}",
        f"    {n['model']}.fit({n['X']}, {n['train']}[col])",
        f"    {n['sub']}[col] = {n['model']}.{call.format(Xt=n['Xt'])}",
    ]
    if clip:
        lines.append(f"    {n['sub']}[col] = {n['sub']}[col].clip(lower=0)")
    return "\n".join(lines)


def write_chunk(x) -> str:
    n, v, c = x.n, x.view, x.c
    sub, pred, te = n["sub"], n["pred"], n["test"]
    target = v.target_columns[0] if v.target_columns else v.label_column
    col = "TARGET" if c.constants and target == v.label_column else f'"{target}"'
    lines: list[str] = []
    if _multi(x):
        pass
    elif v.problem == "proba":
        lines += {
            0: [
                f"{sub} = pd.DataFrame({pred}, columns={x.TARGETS})",
                f"{sub}.insert(0, {x.ID}, {te}[{x.ID}].values)",
            ],
            1: [
                f"{sub} = pd.read_csv({x.path('sample_submission.csv')})",
                f"{sub}[{x.TARGETS}] = {pred}",
            ],
            2: [
                f"{sub} = pd.DataFrame({{{x.ID}: {te}[{x.ID}]}})",
                f"for i, col in enumerate({x.TARGETS}):",
                f"    {sub}[col] = {pred}[:, i]",
            ],
        }[c.write_style]
    else:
        lines += {
            0: [f"{sub} = pd.DataFrame({{{x.ID}: {te}[{x.ID}], {col}: {pred}}})"],
            1: [
                f"{sub} = pd.read_csv({x.path('sample_submission.csv')})",
                f"{sub}[{col}] = {pred}",
            ],
            2: [f"{te}[{col}] = {pred}", f"{sub} = {te}[[{x.ID}, {col}]]"],
        }[c.write_style]
    dest = '"submission.csv"' if c.names % 2 == 0 else '"./submission.csv"'
    lines.append(f"{sub}.to_csv({dest}, index=False)")
    if c.seed % 2:
        lines.append(f'print("wrote", len({sub}), "rows")')
    return "\n".join(lines)
