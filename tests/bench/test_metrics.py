"""Metric functions against scikit-learn / scipy on random inputs, plus hand-derived cases."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import pearsonr
from sklearn.metrics import accuracy_score, cohen_kappa_score, log_loss, roc_auc_score

from mlerl.bench import _metrics as m

SETTINGS = settings(max_examples=60, deadline=None)
seeds = st.integers(0, 2**32 - 1)
sizes = st.integers(2, 60)


@SETTINGS
@given(seeds, sizes, st.booleans())
def test_roc_auc_matches_sklearn(seed, n, ties):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    y[0], y[1] = 0, 1  # both classes present
    s = rng.integers(0, 4, n).astype(float) if ties else rng.random(n)
    assert m.roc_auc(y, s) == pytest.approx(roc_auc_score(y, s), abs=1e-12)


def test_roc_auc_hand_example_and_errors():
    # positives score 0.8, 0.4; negatives 0.4, 0.1: pairs (0.8>0.4)=1, (0.8>0.1)=1,
    # (0.4=0.4)=0.5, (0.4>0.1)=1 -> 3.5 / 4 = 0.875
    assert m.roc_auc([1, 1, 0, 0], [0.8, 0.4, 0.4, 0.1]) == 0.875
    with pytest.raises(ValueError):
        m.roc_auc([1, 1], [0.2, 0.3])
    with pytest.raises(ValueError):
        m.roc_auc([1, 0], [np.nan, 0.3])


@SETTINGS
@given(seeds, sizes, st.integers(2, 7))
def test_qwk_matches_sklearn(seed, n, k):
    rng = np.random.default_rng(seed)
    a, b = rng.integers(1, k + 1, n), rng.integers(1, k + 1, n)
    a[0], a[1] = 1, 2  # at least two labels so kappa is defined
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = cohen_kappa_score(a, b, weights="quadratic")
    got = m.quadratic_weighted_kappa(a, b)
    assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want, abs=1e-12)


def test_qwk_rejects_non_integer_labels_and_keeps_whole_floats():
    # scikit-learn's target-type check: a float array with a value != its int cast is
    # "continuous", which cannot be mixed with integer classes (MLE-bench: invalid).
    for pred in ([2, 2.5], [2.0, np.nan], [2.0, np.inf], [1.2, 3.7]):
        with pytest.raises(ValueError):
            m.quadratic_weighted_kappa(np.array(pred), np.array([2, 3]))
    # 3.0 is the class 3: pred [2., 3.] vs true [2, 3] agree exactly -> kappa 1
    assert m.quadratic_weighted_kappa(np.array([2.0, 3.0]), np.array([2, 3])) == 1.0
    # constant prediction: O equals E (one row of the confusion matrix), kappa 0
    assert m.quadratic_weighted_kappa([3, 3, 3], [1, 2, 3]) == 0.0


def test_accuracy_target_checks():
    true = np.array([1, 2, 3, 2])
    for pred in ([1, 2, 3, np.nan], [1.5, 2, 3, 2], [1, 2, 3, np.inf]):
        with pytest.raises(ValueError):
            m.accuracy(true, np.array(pred, dtype=float))
    assert m.accuracy(true, np.array([1.0, 2.0, 3.0, 3.0])) == 0.75  # 3 of 4 by hand
    # strings against 3+ integer classes compare unequal (0.0); against 2 classes they raise
    assert m.accuracy(true, np.array(["a", "b", "c", "d"], dtype=object)) == 0.0
    with pytest.raises(ValueError):
        m.accuracy(np.array([1, 2]), np.array(["a", "b"], dtype=object))


@SETTINGS
@given(seeds, sizes)
def test_pearson_matches_scipy(seed, n):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=n), rng.normal(size=n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = pearsonr(a, b)[0]
    assert m.pearson(a, b) == pytest.approx(want, abs=1e-9)


def test_pearson_constant_and_nan_give_nan():
    assert math.isnan(m.pearson([1.0, 2.0, 3.0], [0.5, 0.5, 0.5]))
    assert math.isnan(m.pearson([1.0, 2.0, 3.0], [0.5, np.nan, 0.1]))


@SETTINGS
@given(seeds, st.integers(1, 40), st.integers(2, 6))
def test_log_loss_matches_sklearn(seed, n, k):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    labels[:k] = np.arange(k)[: min(k, n)] if n >= k else labels[:k]
    onehot = np.eye(k)[labels]
    p = rng.random((n, k)) + 1e-3
    p /= p.sum(axis=1, keepdims=True)
    want = log_loss(onehot, p)
    assert m.multiclass_log_loss(onehot, p) == pytest.approx(want, rel=1e-9)


def test_log_loss_uniform_is_log_k():
    # uniform over k classes: -ln(1/k) = ln k for every row
    assert m.multiclass_log_loss(np.eye(3), np.full((3, 3), 1 / 3)) == pytest.approx(math.log(3))
    with pytest.raises(ValueError):
        m.multiclass_log_loss(np.eye(2), np.array([[1.2, -0.2], [0.5, 0.5]]))


@SETTINGS
@given(seeds, sizes)
def test_accuracy_and_rmsle_match_sklearn(seed, n):
    from sklearn.metrics import root_mean_squared_log_error

    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, 3, n), rng.integers(0, 3, n)
    assert m.accuracy(a, b) == pytest.approx(accuracy_score(a, b))
    t, p = rng.random(n) * 5, rng.random(n) * 5
    assert m.rmsle(t, p) == pytest.approx(root_mean_squared_log_error(t, p), rel=1e-9)


def test_rmsle_rejects_negative_predictions():
    with pytest.raises(ValueError):
        m.rmsle([1.0, 2.0], [-0.01, 2.0])


def test_word_jaccard_hand_examples():
    # {"hello","world"} vs {"hello"}: 1 / (2 + 1 - 1) = 0.5; case-insensitive, whitespace split
    assert m.word_jaccard("Hello  world", "hello") == 0.5
    assert m.word_jaccard("", "a") == 0.0
    with pytest.raises(ZeroDivisionError):
        m.word_jaccard("", " ")


def test_columnwise_metrics_average_columns():
    t = np.array([[0, 1], [1, 0], [1, 1], [0, 0]])
    s = np.array([[0.1, 0.9], [0.9, 0.2], [0.8, 0.3], [0.2, 0.4]])
    # column 0 is perfectly ranked (AUC 1); column 1: positives .9, .3 vs negatives .2, .4:
    # pairs .9>.2, .9>.4, .3>.2, .3<.4 -> 3/4. Mean 0.875.
    assert m.columnwise_roc_auc(t, s) == pytest.approx(0.875)


@SETTINGS
@given(seeds, sizes)
def test_average_ranks_match_scipy(seed, n):
    from scipy.stats import rankdata

    x = np.random.default_rng(seed).integers(0, 5, n).astype(float)
    assert np.array_equal(m.average_ranks(x), rankdata(x))


# Mutation survivors (benchmarks/tools/mutation.py): hand-derived edges the comparisons above missed.


def test_word_jaccard_union_of_unequal_sets():
    # {"a","b","c"} vs {"a","d"}: 1 shared of 3 + 2 - 1 = 4 distinct words
    assert m.word_jaccard("a b c", "a d") == 0.25
    with pytest.raises(ValueError):
        m.mean_word_jaccard([], [])


def test_qwk_refuses_numbers_against_strings():
    with pytest.raises(ValueError):
        m.quadratic_weighted_kappa([1, 2, 3], ["a", "b", "c"])


def test_rmse_by_hand():
    # errors [2, 0]: sqrt((4 + 0) / 2) = sqrt 2
    assert m.rmse([1.0, 2.0], [3.0, 2.0]) == pytest.approx(math.sqrt(2.0))


def test_label_type_of_nothing_is_unknown():
    assert m.label_type(np.array([]), "y") == "unknown"
    assert m.label_type(np.array([], dtype=np.int64), "y") == "unknown"


def test_roc_auc_refuses_labels_other_than_0_and_1():
    with pytest.raises(ValueError, match="binary"):
        m.roc_auc([0, 2, 1], [0.1, 0.9, 0.5])


def test_log_loss_of_perfect_predictions_is_the_clipped_epsilon():
    # p = 1 is clipped to 1 - eps (as sklearn): -log(1 - 2.22e-16) = 2.22e-16, not 0.
    # scikit-learn promises no bits here (1.9 returns eps itself, one ulp from -log(1 - eps));
    # MLE-bench reports 5 decimals, so a relative 1e-9 is far tighter than anything graded.
    t = np.array([[1.0, 0.0], [0.0, 1.0]])
    eps = np.finfo(np.float64).eps
    ours = m.multiclass_log_loss(t, t)
    assert ours > 0.0
    assert ours == pytest.approx(-math.log(1 - eps), rel=1e-9)
    assert ours == pytest.approx(log_loss(t, t), rel=1e-9)


def test_columnwise_rmsle_refuses_a_shape_mismatch():
    with pytest.raises(ValueError, match="same shape"):
        m.columnwise_rmsle(np.ones((2, 3)), np.ones((2, 2)))


def test_every_metric_refuses_mismatched_or_empty_inputs():
    with pytest.raises(ValueError, match="equal length"):
        m.rmsle([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="equal length"):
        m.rmsle([], [])
    with pytest.raises(ValueError, match="equal length"):
        m.accuracy([1, 0], [1])
    with pytest.raises(ValueError, match="equal length"):
        m.accuracy([], [])
    with pytest.raises(ValueError, match="equal length"):
        m.quadratic_weighted_kappa([], [])
    for t, s in (([0, 1, 0], [0.1, 0.2]), ([0, 1], [0.1, 0.2, 0.3])):
        with pytest.raises(ValueError, match="length"):
            m.roc_auc(t, s)
    for a, b in ((np.ones((2, 2)), np.ones((2, 3))), (np.ones((2, 3)), np.ones((2, 2)))):
        with pytest.raises(ValueError, match="same shape"):
            m.columnwise_roc_auc(a, b)
        with pytest.raises(ValueError, match="same shape"):
            m.columnwise_rmsle(a, b)
        with pytest.raises(ValueError, match="same shape"):
            m.multiclass_log_loss(a, b)
    with pytest.raises(ValueError, match="2-D"):
        m.multiclass_log_loss(np.array([1.0, 0.0]), np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="2-D"):
        m.multiclass_log_loss(np.ones((0, 2)), np.ones((0, 2)))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        m.multiclass_log_loss(np.array([[1.0, 0.0]]), np.array([[1.5, -0.5]]))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        m.multiclass_log_loss(np.array([[1.0, 0.0]]), np.array([[1.5, 0.5]]))


def test_small_valid_inputs_are_accepted():
    assert m.rmsle([1.0], [1.0]) == 0.0  # one value
    # zeros allowed: log1p differences [0, 1] -> sqrt(1 / 2)
    assert m.rmsle([0.0, 0.0], [0.0, np.e - 1]) == pytest.approx(math.sqrt(0.5))
    with pytest.raises(ValueError, match="one class"):
        m.roc_auc([0, 0], [0.1, 0.2])
    assert m.label_type(np.array([1, 1, 1]), "y") == "binary"  # one class: at most two values


def test_qwk_refuses_strings_against_numbers_too():
    with pytest.raises(ValueError):
        m.quadratic_weighted_kappa(["a", "b", "c"], [1, 2, 3])


def test_pearson_of_a_constant_that_does_not_average_exactly_is_nan():
    # mean([0.1] * 3) = 0.10000000000000002: the deviations are not 0, but the input is constant
    assert math.isnan(m.pearson([0.1, 0.1, 0.1], [1.0, 2.0, 3.0]))
    assert math.isnan(m.pearson([1.0, 2.0, 3.0], [0.1, 0.1, 0.1]))


# Mutation survivors of the complete _metrics run (docs/experiments/test-quality.md): no test called these two with
# valid input, so a check that refused every input survived.


def test_columnwise_rmsle_averages_the_columns_rmsle():
    e = math.e
    t = np.zeros((2, 3))  # more columns than rows: the mean runs over columns
    p = np.array([[e - 1, 0.0, 0.0], [e - 1, e * e - 1, 0.0]])
    # log1p differences per column: [1, 1] -> 1; [0, 2] -> sqrt((0 + 4) / 2) = sqrt 2; [0, 0] -> 0
    assert m.columnwise_rmsle(t, p) == pytest.approx((1.0 + math.sqrt(2.0)) / 3)
    for shape in ((3,), (2, 2, 2)):
        with pytest.raises(ValueError, match="2-D"):
            m.columnwise_rmsle(np.ones(shape), np.ones(shape))
        with pytest.raises(ValueError, match="2-D"):
            m.columnwise_roc_auc(np.ones(shape), np.ones(shape))


def test_mean_word_jaccard_averages_aligned_pairs_of_equal_length_only():
    # "a b c" / "a d": 1 / 4; "x" / "X": 1 (case-insensitive) -> mean 0.625
    assert m.mean_word_jaccard(["a b c", "x"], ["a d", "X"]) == 0.625
    for preds, answers in ((["a"], ["a", "b"]), (["a", "b"], ["a"])):
        with pytest.raises(ValueError, match="equal length"):
            m.mean_word_jaccard(preds, answers)


def test_lengths_beyond_the_small_int_cache_are_equal_lengths():
    # CPython caches the ints up to 256: `len(a) is not len(b)` would refuse equal lengths of 300
    n = 300
    assert m.mean_word_jaccard(["a b"] * n, ["a"] * n) == 0.5
    assert m.quadratic_weighted_kappa([0, 1, 2] * 100, [0, 1, 2] * 100) == 1.0
    assert m.rmsle([1.0] * n, [1.0] * n) == 0.0
    assert m.accuracy([0, 1, 2] * 100, [0, 1, 1] * 100) == pytest.approx(2 / 3)
    assert m.roc_auc([0, 1] * 150, [0.1, 0.9] * 150) == 1.0
    assert m.pearson([0.0, 1.0] * 150, [0.0, 2.0] * 150) == 1.0


def test_a_shorter_first_input_is_refused_too():
    with pytest.raises(ValueError, match="equal length"):
        m.accuracy([1], [1, 0])
    with pytest.raises(ValueError, match="equal length"):
        m.rmsle([1.0], [1.0, 2.0])
    for a, b in (([1, 2], [1, 2, 1]), ([1, 2, 1], [1, 2])):
        with pytest.raises(ValueError, match="equal length"):
            m.quadratic_weighted_kappa(a, b)
        with pytest.raises(ValueError, match="equal length"):
            m.pearson(a, b)
    with pytest.raises(ValueError, match=">= 2"):
        m.pearson([1.0], [2.0])  # one value: no correlation, refused (not NaN)


def test_only_one_dimensional_inputs_are_columns_and_two_dimensional_ones_tables():
    for x in (3.0, [[1.0, 2.0]]):  # a scalar, a row of a table
        with pytest.raises(ValueError, match="one-dimensional"):
            m.rmsle(x, x)
    with pytest.raises(ValueError, match="2-D"):
        m.multiclass_log_loss(np.full((1, 2, 2), 0.5), np.full((1, 2, 2), 0.5))


def test_label_type_by_hand():
    assert m.label_type(np.array([0.5, 1.0]), "y") == "continuous"
    with pytest.raises(ValueError, match="NaN or infinity"):
        m.label_type(np.array([0.5, np.nan]), "y")
    assert m.label_type(np.array([1, 2, 3]), "y") == "multiclass"  # three values
    assert m.label_type(np.array([1.0, 3.0]), "y") == "binary"  # whole floats are classes
    # unsigned labels are classes whatever their size (2**64 - 1 has no int64 equal)
    assert m.label_type(np.array([0, 2**64 - 1], dtype=np.uint64), "y") == "binary"
    # an object column whose first value is not a string (NaN in a text column): unknown, even
    # when a later value is a string
    assert m.label_type(np.array([np.nan, "a"], dtype=object), "y") == "unknown"


def test_binary_labels_whose_union_has_three_values_are_multiclass():
    targets = lambda a, b: m.check_class_targets(np.array(a), np.array(b))  # noqa: E731
    assert targets([0, 1], [1, 2]) == "multiclass"
    assert targets([0, 1], [1, 0]) == "binary"
    assert targets([1, 1], [1, 1]) == "binary"


def test_roc_auc_refuses_a_negative_label():
    # -1 is neither 0 nor 1 (one positive, three others: were -1 a negative, AUC would exist)
    with pytest.raises(ValueError, match="binary"):
        m.roc_auc([0, 1, -1, 0], [0.1, 0.9, 0.5, 0.2])


def test_negatives_above_minus_one_are_refused():
    with pytest.raises(ValueError, match="negative"):
        m.rmsle([-0.5, 1.0], [1.0, 1.0])  # a negative target (log1p(-0.5) exists)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        m.multiclass_log_loss(np.array([[1.0, 0.0]]), np.array([[-0.5, 0.5]]))


def test_qwk_of_text_labels_and_of_booleans_against_integers():
    # text: labels a < b < c (indices 0, 1, 2); pairs (a,a) (b,c) (c,c) (c,b)
    # observed off-diagonal: (1,2) and (2,1), weight 1 each -> sum W O = 2
    # marginals r = c = [1, 1, 2], E_ij = r_i c_j / 4: sum W E = sum over i != j of
    #   (i - j)^2 r_i c_j / 4 = (1 + 8 + 1 + 2 + 8 + 2) / 4 = 5.5 -> kappa = 1 - 2 / 5.5 = 7 / 11
    assert m.quadratic_weighted_kappa(["a", "b", "c", "c"], ["a", "c", "c", "b"]) == pytest.approx(
        7 / 11
    )
    assert m.quadratic_weighted_kappa(np.array(["a", "b"], dtype=object), ["a", "b"]) == 1.0
    # booleans are the classes 0 and 1: O = [[2, 0], [1, 1]], marginals [2, 2] and [3, 1],
    # sum W O = 1, sum W E = (2*1 + 2*3) / 4 = 2 -> kappa = 1 - 1 / 2
    assert m.quadratic_weighted_kappa([True, False, True, False], [1, 0, 0, 0]) == 0.5


def test_qwk_refuses_numbers_against_text_either_way_as_such():
    for a, b in (([1, 2, 3], ["a", "b", "c"]), (["a", "b", "c"], [1, 2, 3])):
        with pytest.raises(ValueError, match="mix of numeric and non-numeric"):
            m.quadratic_weighted_kappa(a, b)


def test_qwk_refuses_nan_among_numeric_labels_of_either_input():
    # complex labels pass label_type's float check: the finite check is what refuses NaN here
    nan = np.array([1, 2, complex("nan")])
    for a, b in ((nan, [1, 2, 3]), ([1, 2, 3], nan)):
        with pytest.raises(ValueError, match="NaN or infinity"):
            m.quadratic_weighted_kappa(a, b)


def test_pearson_when_the_denominator_is_exactly_one():
    # [0, 2] and [0, 1]: deviations [-1, 1] and [-0.5, 0.5], sqrt(2 * 0.5) = 1 -> r = 1
    assert m.pearson([0.0, 2.0], [0.0, 1.0]) == 1.0
    # deviations of +-0.5: sqrt(1 * 1) = 1; products .25 - .25 - .25 + .25 = 0 -> r = 0
    assert m.pearson([0.0, 0.0, 1.0, 1.0], [0.0, 1.0, 0.0, 1.0]) == 0.0


def test_pearson_is_clipped_to_plus_or_minus_one():
    # p = 1.6 t: the ratio rounds to 1 + 2**-52 (and -1 - 2**-52 for -p); a correlation is in [-1, 1]
    t, p = [7.3, 1.8, 8.6, 5.4], [11.68, 2.88, 13.76, 8.64]
    assert m.pearson(t, p) == 1.0
    assert m.pearson(t, [-x for x in p]) == -1.0
