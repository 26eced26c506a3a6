import ast

import pytest

from mlerl.embedded import corpus_hash, corpus_stats, generate_corpus
from mlerl.embedded._prompts import MARKERS, extract_code

from .conftest import SMALL


def test_same_seed_same_corpus_other_seed_differs(views):
    a = generate_corpus(views, seed=3, **SMALL)
    b = generate_corpus(views, seed=3, **SMALL)
    c = generate_corpus(views, seed=4, **SMALL)
    assert a == b and corpus_hash(a) == corpus_hash(b)
    assert corpus_hash(a) != corpus_hash(c)


def test_corpus_is_diverse(views):
    ex = generate_corpus(views, seed=0, **SMALL)
    stats = corpus_stats(ex)
    drafts = [e for e in ex if e.kind == "draft"]
    # 12 drafts per task; duplicates would have been dropped, and none should exist
    assert stats["distinct_programs"] == len(drafts) == 12 * len(views)
    assert len(stats["families"]) >= 10
    for view in views:
        fams = {e.family for e in drafts if e.task_id == view.id}
        assert len(fams) >= 3, (view.id, fams)
    assert {e.kind for e in ex} == {"draft", "improve", "instrument"}
    # distinct plans, not only distinct code
    assert len({e.answer.split("```")[0] for e in drafts}) > 0.8 * len(drafts)


def test_every_answer_is_a_plan_then_one_python_block(views):
    for e in generate_corpus(views, seed=1, **SMALL):
        if e.kind == "instrument":
            assert e.answer.startswith("```python\n") and e.answer.endswith("```")
            continue
        plan, _, rest = e.answer.partition("```python\n")
        assert rest.count("```") == 1 and rest.endswith("```")
        assert 3 <= plan.count(". ") + 1 <= 8, plan
        code = extract_code(e.answer)
        assert code == e.code
        ast.parse(code)


def test_mistakes_are_a_minority_and_marked(views):
    ex = generate_corpus(
        views,
        seed=0,
        drafts_per_task=40,
        improves_per_task=0,
        instruments_per_task=0,
        mistake_rate=0.25,
    )
    bad = [e for e in ex if not e.correct]
    assert 0.1 * len(ex) < len(bad) < 0.4 * len(ex)
    assert len({e.mistake for e in bad}) >= 4
    assert all(e.mistake is None for e in ex if e.correct)


def test_improve_prompts_carry_previous_solution_and_crash_output(views):
    ex = [e for e in generate_corpus(views, seed=0, **SMALL) if e.kind == "improve"]
    assert all("Previous solution:" in e.messages[-1][1] for e in ex)
    crashed = [e for e in ex if "Traceback (most recent call last)" in e.messages[-1][1]]
    assert crashed and all(e.answer.startswith("The previous solution failed") for e in crashed)


def test_instrumentation_examples_round_trip(views):
    ex = [e for e in generate_corpus(views, seed=2, **SMALL) if e.kind == "instrument"]
    assert ex
    marker_lines = {f'print("{m}")' for m in MARKERS}
    for e in ex:
        instrumented = extract_code(e.answer)
        ast.parse(instrumented)
        kept = [ln for ln in instrumented.splitlines() if ln not in marker_lines]
        assert "\n".join(kept) + "\n" == e.code
        inserted = [ln[7:-2] for ln in instrumented.splitlines() if ln in marker_lines]
        assert inserted[0] == "imported packages" and "loaded data" in inserted
        if "sklearn" in e.code:  # a library model: its prediction stage is claimed too
            assert "predicted test labels" in inserted


def test_bad_mistake_rate_is_rejected(views):
    with pytest.raises(ValueError, match="mistake_rate"):
        generate_corpus(views, mistake_rate=1.5)


def test_prompts_are_the_actors_and_instrumenters_own(views):
    from mlerl.actors import PromptConfig, improve_prompt, scratch_prompt
    from mlerl.instrument import INSTRUMENT_PROMPT

    ex = generate_corpus(views[:2], seed=0, **SMALL)
    view = views[0]
    draft = next(e for e in ex if e.kind == "draft" and e.task_id == view.id)
    assert draft.chat() == [
        {"role": m.role, "content": m.content} for m in scratch_prompt(view.task, PromptConfig())
    ]
    inst = next(e for e in ex if e.kind == "instrument")
    assert inst.chat() == [{"role": "user", "content": INSTRUMENT_PROMPT.format(code=inst.code)}]
    imp = next(e for e in ex if e.kind == "improve" and e.task_id == view.id)
    user = imp.messages[-1][1]
    previous = user.split("Previous solution:\n", 1)[1].split("\n\nTerminal output", 1)[0]
    plan, code = previous.split("\n\n```python\n", 1)
    output = user.split("Terminal output of the previous solution:\n```\n", 1)[1][:-5]
    rebuilt = improve_prompt(view.task, plan, code[:-3], output, PromptConfig())
    assert imp.chat() == [{"role": m.role, "content": m.content} for m in rebuilt]


def test_lm_instrumenter_accepts_the_instrumentation_answers(views):
    from mlerl.instrument import judge
    from mlerl.protocol import Completion

    for e in [e for e in generate_corpus(views, seed=5, **SMALL) if e.kind == "instrument"]:
        done = judge(
            e.code,
            Completion(
                prompt_ids=[], token_ids=[], logprobs=[], text=e.answer, finish_reason="stop"
            ),
        )
        assert done.path == "lm", (done.reason, done.detail)
        inserted = [ln for ln in e.answer.splitlines() if ln in {f'print("{m}")' for m in MARKERS}]
        # a library-model program keeps its stage markers; a rule-based one (no library model:
        # the tweets stand-in's families) keeps only imports and data loading
        assert done.n_markers == len(inserted) >= (4 if "sklearn" in e.code else 2)


def test_one_style_corpus_varies_only_what_changes_the_score(views):
    ex = generate_corpus(views, seed=0, **SMALL, styles=False)
    drafts = [e for e in ex if e.kind == "draft"]
    other_styles = (
        "train_df",
        "df_train",
        "tr = pd",
        "DATA_DIR",
        "INPUT /",
        "ID_COL",
        "clf",
        "estimator =",
    )
    for e in drafts:
        assert not any(s in e.code for s in other_styles), e.code
        assert e.mistake == "wrong_path" or 'pd.read_csv("./input/train.csv")' in e.code
    for view in views:
        assert len({e.family for e in drafts if e.task_id == view.id}) >= 3
    styled = [e for e in generate_corpus(views, seed=0, **SMALL) if e.kind == "draft"]
    assert any(any(s in e.code for s in other_styles) for e in styled)


def test_with_real_outputs_rerenders_each_improve_prompt_with_its_parents_output(views):
    from mlerl.embedded._corpus import with_real_outputs

    ex = generate_corpus(views[:2], seed=0, **SMALL)
    calls = []

    def run(items):
        calls.extend(items)
        return [f"REAL-OUTPUT-{i}" for i in range(len(items))]

    out = with_real_outputs(ex, views[:2], run)
    improve = [i for i, e in enumerate(ex) if e.kind == "improve"]
    assert len(calls) == len(improve) > 0
    for n, i in enumerate(improve):
        prompt = out[i].messages[-1][1]
        assert f"REAL-OUTPUT-{n}\n```" in prompt
        assert (
            ex[i].parent[1].strip() in prompt and calls[n][1] == ex[i].parent[1]
        )  # the parent ran
        assert out[i].answer == ex[i].answer
    assert all(out[i] == ex[i] for i in range(len(ex)) if i not in improve)
    with pytest.raises(ValueError, match="outputs for"):
        with_real_outputs(ex, views[:2], lambda items: [])


def test_fix_share_sets_how_many_improve_examples_revise_a_bug(views):
    def fixes(share):
        ex = [
            e
            for e in generate_corpus(
                views,
                seed=0,
                drafts_per_task=1,
                improves_per_task=12,
                instruments_per_task=0,
                fix_share=share,
            )
            if e.kind == "improve"
        ]
        return sum(
            e.answer.startswith("The previous solution failed")
            or e.answer.startswith("The previous solution had a bug")
            for e in ex
        ) / len(ex)

    assert fixes(0.0) == 0.0
    assert 0.0 < fixes(0.25) < fixes(0.75)
    with pytest.raises(ValueError, match="fix_share"):
        generate_corpus(views, fix_share=1.5)


def test_edit_format_improve_answers_are_one_change_that_the_actor_applies_to_the_parent(views):
    from mlerl.actors import PromptConfig
    from mlerl.actors._parse import parse_response
    from mlerl.protocol import ParseStatus

    prompts = PromptConfig(improve_format="edit")
    improves = [
        e
        for e in generate_corpus(
            views,
            seed=0,
            drafts_per_task=1,
            improves_per_task=16,
            instruments_per_task=0,
            prompts=prompts,
            fix_share=0.25,
        )
        if e.kind == "improve"
    ]
    assert len(improves) > 16 * len(views) // 2
    edits = 0
    for ex in improves:
        assert "<<<<<<< SEARCH" in ex.messages[-1][1] and ex.parent[1] in ex.messages[-1][1]
        parsed = parse_response(ex.answer, "stop", parent=ex.parent[1])
        assert parsed.status is ParseStatus.OK, (ex.task_id, parsed.detail)
        assert (
            parsed.code == ex.code != ex.parent[1]
        )  # the answer turns the parent into the revision
        if "<<<<<<< SEARCH" in ex.answer:
            edits += 1
            # one change: the edits touch a few lines, not the whole program
            changed = sum(line.startswith("=======") for line in ex.answer.splitlines())
            assert changed <= 3 and len(ex.answer) < len(ex.code)
    assert edits >= 0.8 * len(improves)
    # revisions both switch model families and keep them (new settings), so RL can choose
    assert any(ex.family != _family_of(ex.parent[1]) for ex in improves)
    assert any(ex.family == _family_of(ex.parent[1]) and "settings" in ex.answer for ex in improves)


def _family_of(code: str) -> str:
    from mlerl.embedded._families import FAMILIES  # noqa: F401  (names only)

    for needle, family in (
        ("HistGradientBoosting", "hist_gb"),
        ("lgb.", "lightgbm"),
        ("RandomForest", "random_forest"),
        ("ExtraTrees", "extra_trees"),
        ("GradientBoosting", "grad_boost"),
        ("KNeighbors", "knn"),
        ("MLP", "mlp"),
        ("SVR", "svm"),
        ("SVC", "svm"),
        ("SGD", "sgd"),
        ("LogisticRegression", "logistic"),
        ("Ridge", "ridge"),
        ("LinearRegression", "linear"),
        ("NB(", "naive_bayes"),
    ):
        if needle in code:
            return family
    return "?"
