"""Programs for span-extraction tasks (word Jaccard, like tweet-sentiment-extraction).

No sklearn estimator predicts a span, so these programs use the classic baselines: copy the
whole text, copy the last words, or keep the words that the training spans select often
(optionally per sentiment). Chunks follow `_programs.render`'s marker conventions.
"""

from __future__ import annotations

import random

from mlerl.embedded._families import Model

SPAN_FAMILIES = ("full_text", "last_words", "word_scores", "sentiment_word_scores")


def make_span_model(family: str, rng: random.Random, params: dict) -> Model:
    k, thr = params["k"], params["thr"]
    if family == "full_text":
        return Model(family, (), "", "the whole text as the span", False)
    if family == "last_words":
        return Model(
            family,
            (),
            "",
            f"the whole text for neutral rows and otherwise its last {k} words",
            False,
        )
    per = "per sentiment, " if family == "sentiment_word_scores" else ""
    return Model(
        family,
        ("from collections import Counter",),
        "",
        f"word scores learned from the training spans ({per}the fraction of times a word "
        f"lies inside the selected span), keeping words scoring at least {thr}",
        False,
    )


def span_params(rng: random.Random) -> dict:
    return {
        "k": rng.choice([2, 3, 4, 6]),
        "thr": rng.choice([0.3, 0.4, 0.5, 0.6, 0.7]),
        "short": rng.choice([2, 3, 4]),
    }


def span_chunks(x) -> list[tuple[str, tuple[str, ...]]]:
    """Feature, model, (train score) and predict chunks of a span program."""
    n, c, v = x.n, x.c, x.view
    tr, te, y = n["train"], n["test"], n["y"]
    ctx = f'"{v.context_column}"' if v.context_column else None
    fam, p = c.model.family, c.params
    chunks: list[tuple[str, tuple[str, ...]]] = []
    sent = "sentiment" if ctx else "_"
    if fam == "full_text":
        define = ["def predict_span(text, sentiment=None):", "    return str(text)"]
        chunks.append(("\n".join(define), ("defined model",)))
    elif fam == "last_words":
        cond = 'sentiment == "neutral" or ' if ctx else ""
        define = [
            "def predict_span(text, sentiment=None):",
            "    words = str(text).split()",
            f"    if {cond}len(words) <= {p['k']}:",
            "        return str(text)",
            f'    return " ".join(words[-{p["k"]}:])',
        ]
        chunks.append(("\n".join(define), ("defined model",)))
    else:
        keyed = fam == "sentiment_word_scores" and ctx
        key = "(s, w)" if keyed else "w"
        rows = (
            f"zip({tr}[{x.TEXT}], {tr}[{ctx}], {y})"
            if ctx
            else f"zip({tr}[{x.TEXT}], {tr}[{x.TEXT}], {y})"
        )
        learn = [
            f'{y} = {tr}[{x.LABEL}].fillna("").astype(str)',
            "inside, total = Counter(), Counter()",
            f"for text, s, span in {rows}:",
            "    chosen = set(str(span).lower().split())",
            "    for w in str(text).lower().split():",
            f"        total[{key}] += 1",
            "        if w in chosen:",
            f"            inside[{key}] += 1",
            "word_score = {k: inside[k] / total[k] for k in total}",
        ]
        neutral = 'sentiment == "neutral" or ' if ctx else ""
        lookup = "(sentiment, w.lower())" if keyed else "w.lower()"
        define = [
            "def predict_span(text, sentiment=None):",
            "    words = str(text).split()",
            f"    if {neutral}len(words) <= {p['short']}:",
            "        return str(text)",
            f"    keep = [w for w in words if word_score.get({lookup}, 0.0) >= {p['thr']}]",
            '    return " ".join(keep) if keep else str(text)',
        ]
        chunks.append(("\n".join(learn), ("trained model",)))
        chunks.append(("\n".join(define), ("defined model",)))
    if c.train_score:
        args = f"{tr}[{x.TEXT}], {tr}[{ctx}]" if ctx else f"{tr}[{x.TEXT}], {tr}[{x.TEXT}]"
        score = [
            "def jaccard(a, b):",
            "    a, b = set(str(a).lower().split()), set(str(b).lower().split())",
            "    return len(a & b) / max(1, len(a | b))",
            "",
            f"train_score = sum(jaccard(predict_span(t, {sent if ctx else 'None'}), s) for t, "
            f"{sent}, s in "
            f"zip({args}, {tr}[{x.LABEL}])) / len({tr})",
            'print(f"train jaccard: {train_score:.4f}")',
        ]
        chunks.append(("\n".join(score), ("training loss:",)))
    call = (
        f"predict_span(t, s) for t, s in zip({te}[{x.TEXT}], {te}[{ctx}])"
        if ctx
        else f"predict_span(t) for t in {te}[{x.TEXT}]"
    )
    chunks.append((f"{n['pred']} = [{call}]", ("predicted test labels",)))
    return chunks
