"""The statistics against values worked out by hand on small fixed inputs."""

from __future__ import annotations

import math

import pytest

from pytest_super import stats


# -- pass@k and pass^k: C(n, k) by hand -------------------------------------------------------------
@pytest.mark.parametrize(
    ("n", "c", "k", "at_k", "hat_k"),
    [
        # 3 runs, 1 pass, k=2: pairs {12,13,23}, one pass in run 1: 2 of 3 pairs hold it; none all-pass
        (3, 1, 2, 2 / 3, 0.0),
        # 3 runs, 2 passes, k=2: every pair holds a pass; 1 of 3 pairs is both passes
        (3, 2, 2, 1.0, 1 / 3),
        # k=1 is the pass rate itself
        (4, 1, 1, 1 / 4, 1 / 4),
        # 5 runs, 2 passes, k=3: C(3,3)/C(5,3) = 1/10 triples without a pass; C(2,3) = 0
        (5, 2, 3, 1 - 1 / 10, 0.0),
        # 5 runs, 4 passes, k=3: every triple has a pass; C(4,3)/C(5,3) = 4/10 all pass
        (5, 4, 3, 1.0, 4 / 10),
        (2, 0, 2, 0.0, 0.0),
        (2, 2, 2, 1.0, 1.0),
    ],
)
def test_pass_at_k_and_pass_hat_k_by_hand(n, c, k, at_k, hat_k):
    assert stats.pass_at_k(n, c, k) == pytest.approx(at_k)
    assert stats.pass_hat_k(n, c, k) == pytest.approx(hat_k)


def test_pass_at_k_averages_over_tasks_and_skips_tasks_with_too_few_runs():
    outcomes = [[True, False, False], [True, True, False], [False, False, False], [True]]
    # k=2: tasks 1-3 only (task 4 ran once): (2/3 + 1 + 0) / 3 and (0 + 1/3 + 0) / 3
    assert stats.mean_pass_at_k(outcomes, 2) == pytest.approx((2 / 3 + 1 + 0) / 3)
    assert stats.mean_pass_hat_k(outcomes, 2) == pytest.approx((1 / 3) / 3)
    assert stats.mean_pass_at_k(outcomes, 4) is None


def test_bad_counts_are_refused():
    with pytest.raises(ValueError, match="n=2, c=3"):
        stats.pass_at_k(2, 3, 1)
    with pytest.raises(ValueError, match="k=3"):
        stats.pass_hat_k(2, 1, 3)


# -- the percentile rule ---------------------------------------------------------------------------
def test_percentile_interval_nearest_rank():
    # 40 samples 0..39: a = 0.025, floor(40*a) = 1 -> 2nd smallest; ceil(40*0.975) = 39 -> 39th
    assert stats.percentile_interval(list(range(40))) == (1, 38)
    # 2000 samples: the 51st and the 1950th
    assert stats.percentile_interval(list(range(2000))) == (50, 1949)


# -- bootstrap intervals -----------------------------------------------------------------------------
def test_constant_scores_have_no_width():
    est = stats.bootstrap_mean([[1.0], [1.0], [1.0]])
    assert (est.mean, est.low, est.high) == (1.0, 1.0, 1.0)


def test_two_tasks_zero_and_one():
    # resampled means 0, 0.5, 1 with chances 1/4, 1/2, 1/4: both tails (25%) exceed 2.5%
    est = stats.bootstrap_mean([[0.0], [1.0]])
    assert (est.mean, est.low, est.high) == (0.5, 0.0, 1.0)


def test_ten_tasks_half_passed_matches_the_binomial_quantiles():
    # a resampled mean is X/10 with X ~ Binomial(10, 1/2): P(X <= 1) = 11/1024 = 1.1% < 2.5%,
    # P(X <= 2) = 56/1024 = 5.5% > 2.5%, so the 2.5th percentile is 0.2 and (by symmetry) the
    # 97.5th is 0.8. With 2000 resamples the 50th-ranked one sits well inside those bounds.
    assert math.comb(10, 0) + math.comb(10, 1) == 11
    assert sum(math.comb(10, i) for i in range(3)) == 56
    est = stats.bootstrap_mean([[1.0]] * 5 + [[0.0]] * 5)
    assert (est.mean, est.low, est.high) == (0.5, 0.2, 0.8)


def test_repeats_are_resampled_within_a_task():
    # one task, runs [1, 0]: a resample draws two runs: mean 0, 0.5, 1 with 1/4, 1/2, 1/4
    est = stats.bootstrap_mean([[1.0, 0.0]])
    assert (est.mean, est.low, est.high) == (0.5, 0.0, 1.0)
    # runs [1, 1] and [0, 0]: repeats never vary, tasks do: as with two single runs
    est = stats.bootstrap_mean([[1.0, 1.0], [0.0, 0.0]])
    assert (est.mean, est.low, est.high) == (0.5, 0.0, 1.0)


def test_the_mean_weighs_tasks_not_runs():
    # task A ran three times (1, 1, 0), task B once (0): (2/3 + 0) / 2, not 2/4
    est = stats.bootstrap_mean([[1.0, 1.0, 0.0], [0.0]])
    assert est.mean == pytest.approx(1 / 3)


def test_seeded_and_reproducible():
    values = [[0.3], [0.9], [0.1], [0.5], [0.75], [0.2]]
    first = stats.bootstrap_mean(values)
    assert stats.bootstrap_mean(values) == first
    other = stats.bootstrap_mean(values, seed=1)
    assert other.mean == first.mean
    assert first.low < first.mean < first.high


def test_no_values_no_estimate():
    assert stats.bootstrap_mean([]) is None
    assert stats.bootstrap_mean([[], []]) is None
