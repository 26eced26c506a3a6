"""How rare is a text task's best known composition under the corpus generator, and how far
does best-of-N of the generator's draws fall short of it? (insults data version 3)

``python benchmarks/experiments/settings_best_of_n.py --data-dir DATA
[--task standin-insults-auc-tiny] [--draws 1000] [--seed 0] [--subsets 2000]
[--name settings_best_of_n]``

Draws ``--draws`` settings blocks of the corpus generator (`mlerl.embedded.draw_settings`) for a
text classification stand-in and scores each in process, the way its settings-block program
makes its submission (TF-IDF fit on all train rows, the model seeded and fit on all rows, test
probabilities graded on the public and private halves; the program's 20 % hold-out print does
not change the submission): fast enough for a thousand draws where the sandbox runs a hundred.
Reports the held-out combination's share of the draws (`mlerl.embedded.held_out`: its prior
under the generator) and best-of-N for N = 16, 64, 256 (``--subsets`` random subsets of the
draws each; chosen on public, reported on private) against the task's best known configuration
(`embedded_prior.BEST`), over all draws and over the draws a corpus may hold (held-out
combination excluded), as the relative gap in 1 - AUC. Writes ``benchmarks/results/NAME.json``.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common
from _common import RESULTS, command_line, git_commit, machine_info
from embedded_prior import BEST

SIZES = (16, 64, 256)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", required=True, type=Path)
    p.add_argument("--task", default="standin-insults-auc-tiny")
    p.add_argument("--draws", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--subsets", type=int, default=2000)
    p.add_argument("--name", default="settings_best_of_n")
    args = p.parse_args()

    import lightgbm as lgb
    import pandas as pd
    from sklearn import linear_model, naive_bayes
    from sklearn.feature_extraction.text import TfidfVectorizer
    from threadpoolctl import threadpool_limits

    from mlerl.bench import Registry, load_answers, part_scores, prepare, score_frame
    from mlerl.embedded import Settings, draw_settings, held_out, task_views

    t0 = time.time()
    prepare(args.task, args.data_dir)
    task = Registry.load(data_dir=args.data_dir).get(args.task)
    view = task_views(args.data_dir, [args.task])[0]
    if view.modality != "text" or view.problem != "binary":
        raise SystemExit(f"{args.task}: a text binary classification stand-in is needed")
    train = pd.read_csv(task.public_dir / "train.csv")
    test = pd.read_csv(task.public_dir / "test.csv")
    answers = load_answers(task)
    text, label = view.text_column, view.label_column
    families = {
        "logistic": linear_model.LogisticRegression,
        "naive_bayes": naive_bayes.MultinomialNB,
        "sgd": linear_model.SGDClassifier,
        "lightgbm": lgb.LGBMClassifier,
    }
    features: dict[tuple[str, ...], tuple] = {}

    def score(s: Settings) -> tuple[float, float]:
        d = dict(s.lines)
        key = (d["ANALYZER"], d["NGRAMS"], d["MAX_FEATURES"])
        if key not in features:
            vec = TfidfVectorizer(
                analyzer=ast.literal_eval(d["ANALYZER"]),
                ngram_range=ast.literal_eval(d["NGRAMS"]),
                max_features=ast.literal_eval(d["MAX_FEATURES"]),
                sublinear_tf=True,
            )
            x = vec.fit_transform(train[text].fillna("").astype(str))
            features[key] = (x, vec.transform(test[text].fillna("").astype(str)))
        x, x_test = features[key]
        model = families[ast.literal_eval(d["MODEL"])](**ast.literal_eval(d["PARAMS"]))
        if "random_state" in model.get_params():
            model.set_params(random_state=0)
        model.fit(x, train[label])
        sub = test[[view.id_column]].assign(**{label: model.predict_proba(x_test)[:, 1]})
        public, private, _ = part_scores(task, sub, answers, score_frame(task, sub, answers))
        return public, private

    rng = random.Random(f"best_of_n:{args.seed}")
    scores: dict[Settings, tuple[float, float]] = {}
    drawn = []
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(args.draws):
            s = draw_settings(view, rng)
            if s not in scores:
                scores[s] = score(s)
            drawn.append(s)
        best = Settings(BEST[args.task])
        best_public, best_private = score(best)
    public = np.array([scores[s][0] for s in drawn])
    private = np.array([scores[s][1] for s in drawn])
    held = np.array([held_out(view, s) for s in drawn])
    boot = np.random.default_rng(args.seed)
    best_of: dict[str, dict] = {}
    for pool, mask in (("all", np.ones_like(held)), ("corpus", ~held)):
        pool_idx = np.flatnonzero(mask)
        for n in SIZES:
            chosen = np.empty(args.subsets)
            for k in range(args.subsets):
                idx = boot.choice(pool_idx, size=n, replace=True)
                chosen[k] = private[idx[np.argmax(public[idx])]]
            gap = ((1 - chosen) - (1 - best_private)) / (1 - best_private)
            best_of[f"{pool}:{n}"] = {
                "private_mean": round(float(chosen.mean()), 5),
                "private_median": round(float(np.median(chosen)), 5),
                "gap_mean": round(float(gap.mean()), 4),
                "gap_median": round(float(np.median(gap)), 4),
                "share_gap_at_least_10pct": round(float((gap >= 0.1).mean()), 4),
            }
    top = sorted(scores.items(), key=lambda kv: -kv[1][1])[:10]
    result = {
        "command": command_line(),
        "commit": git_commit(),
        "machine": machine_info(),
        "task": args.task,
        "draws": args.draws,
        "distinct": len(scores),
        "best_known": {
            "settings": dict(best.lines),
            "public": best_public,
            "private": best_private,
        },
        "held_out_share": round(float(held.mean()), 4),
        "held_out_private_mean": round(float(private[held].mean()), 5) if held.any() else None,
        "other_private_max": round(float(private[~held].max()), 5),
        "private_quantiles": [
            round(float(q), 5) for q in np.quantile(private, [0, 0.25, 0.5, 0.75, 1])
        ],
        "best_of": best_of,
        "top_private": [
            {"settings": dict(s.lines), "public": pu, "private": pr, "held_out": held_out(view, s)}
            for s, (pu, pr) in top
        ],
        "seconds": round(time.time() - t0, 1),
    }
    out = RESULTS / f"{args.name}.json"
    out.write_text(json.dumps(result, indent=1))
    print(
        f"{args.draws} draws ({len(scores)} distinct); held-out share {result['held_out_share']}; "
        f"best known public {best_public} private {best_private}; held-out draws' private mean "
        f"{result['held_out_private_mean']}, best other draw {result['other_private_max']}; "
        f"private quantiles {result['private_quantiles']}"
    )
    for key, row in best_of.items():
        print(f"best-of-{key}: {row}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
