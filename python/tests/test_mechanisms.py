"""The C++ mechanisms through the bindings: statistics, seeds, errors."""
import numpy as np
import pytest

import ldpgraph

RNG = np.random.default_rng(20240611)  # the test data (public), not noise


def _data(n, d, low=-1.0, high=1.0):
    return RNG.uniform(low, high, size=(n, d))


@pytest.mark.parametrize("mechanism,kwargs", [
    ("multibit", dict(epsilon=2.0, sampled=2)),
    ("piecewise", dict(epsilon=1.0, sampled=1, low=0.0, high=4.0)),
    ("laplace", dict(epsilon=4.0)),
])
def test_estimate_of_the_mean_is_unbiased(mechanism, kwargs):
    low, high = kwargs.get("low", -1.0), kwargs.get("high", 1.0)
    n, d = 40000, 6
    # Column means spread over the range (not all at its centre, where a
    # wrong scale of the estimate would go unseen).
    u = np.clip(RNG.normal(np.linspace(0.1, 0.9, d), 0.15, size=(n, d)), 0, 1)
    X = low + (high - low) * u
    reports = ldpgraph.perturb(X, mechanism, **kwargs)  # secure noise
    rows = ldpgraph.estimate(reports, mechanism, **kwargs)
    assert rows.shape == (n, d)
    truth = X.mean(axis=0)
    se = rows.std(axis=0, ddof=1) / np.sqrt(n)
    # 5 standard errors on 6 columns: a false alarm about once in 10^6 runs.
    assert np.all(np.abs(rows.mean(axis=0) - truth) < 5 * se), (rows.mean(axis=0), truth, se)
    # The spread is the mechanism's: moments() predicts each row's variance.
    _, var = ldpgraph.moments(X, mechanism, dimension=d, **kwargs)
    predicted_se = np.sqrt(var.mean(axis=0) / n)
    np.testing.assert_allclose(se, predicted_se, rtol=0.1)


def test_hds_is_biased_as_moments_says():
    n, d, eps = 40000, 4, 2.0
    X = np.tile([[-0.8, -0.2, 0.3, 0.9]], (n, 1))
    rows = ldpgraph.estimate(ldpgraph.perturb(X, "hds", epsilon=eps, seed=3), "hds", epsilon=eps)
    mean, var = ldpgraph.moments(X[0], "hds", epsilon=eps, dimension=d)
    assert np.all(np.abs(rows.mean(axis=0) - mean) < 5 * np.sqrt(var / n))
    assert np.all(np.abs(mean) < np.abs(X[0]))  # shrunk towards 0, not unbiased


def test_report_layout():
    X = _data(500, 10)
    hds = ldpgraph.perturb(X, "hds", epsilon=1.0, sampled=3, seed=1)
    assert np.all(np.sum(~np.isnan(hds), axis=1) == 3)
    onebit = ldpgraph.perturb(X, "onebit", epsilon=1.0, seed=1)
    assert not np.isnan(onebit).any() and set(np.unique(onebit)) <= {0.0, 1.0}
    multibit = ldpgraph.perturb(X, "multibit", epsilon=1.0, sampled=4, seed=1)
    reported = multibit[~np.isnan(multibit)]
    assert reported.size == 500 * 4 and set(np.unique(reported)) <= {0.0, 1.0}
    wave = ldpgraph.perturb(X[:, :1], "square_wave", epsilon=1.0, seed=1)
    assert wave.shape == (500, 1) and not np.isnan(wave).any()


def test_seeded_noise_is_reproducible_on_any_thread_count():
    X = _data(3000, 16)  # several tasks of rows
    a = ldpgraph.perturb(X, "piecewise", epsilon=1.0, sampled=4, seed=42, threads=1)
    b = ldpgraph.perturb(X, "piecewise", epsilon=1.0, sampled=4, seed=42, threads=4)
    np.testing.assert_array_equal(a, b)
    c = ldpgraph.perturb(X, "piecewise", epsilon=1.0, sampled=4, seed=43)
    assert not np.array_equal(np.isnan(a), np.isnan(c))
    # Without a seed: the secure generator, a new draw every call.
    s1 = ldpgraph.perturb(X, "laplace", epsilon=1.0)
    s2 = ldpgraph.perturb(X, "laplace", epsilon=1.0)
    assert not np.array_equal(s1, s2)
    la = ldpgraph.perturb_labels(np.arange(3000) % 5, classes=5, epsilon=1.0, seed=9, threads=1)
    lb = ldpgraph.perturb_labels(np.arange(3000) % 5, classes=5, epsilon=1.0, seed=9, threads=3)
    np.testing.assert_array_equal(la, lb)


def test_label_counts_are_unbiased():
    classes, eps = 4, 1.0
    truth = np.array([25000, 15000, 7000, 3000])
    labels = np.repeat(np.arange(classes), truth)
    reports = ldpgraph.perturb_labels(labels, classes=classes, epsilon=eps)
    assert reports.dtype == np.int64 and reports.shape == labels.shape
    counts = ldpgraph.estimate_label_counts(reports, classes=classes, epsilon=eps)
    e = np.exp(eps)
    p, q = e / (e + classes - 1), 1 / (e + classes - 1)
    sd_bound = np.sqrt(labels.size) * 0.5 / (p - q)  # Var(1{r=j}) <= 1/4
    assert np.all(np.abs(counts - truth) < 5 * sd_bound), counts
    # The raw histogram is far off: the correction is doing the work.
    assert np.abs(np.bincount(reports, minlength=classes)[0] - truth[0]) > 5 * sd_bound


@pytest.mark.parametrize("call,message", [
    (lambda: ldpgraph.perturb(np.zeros(5), "hds", epsilon=1.0), "2-D"),
    (lambda: ldpgraph.perturb(np.zeros((2, 3)), "hds", epsilon=0.0), "epsilon"),
    (lambda: ldpgraph.perturb(np.zeros((2, 3)), "hds", epsilon=float("nan")), "epsilon"),
    (lambda: ldpgraph.perturb(np.zeros((2, 3)), "hds", epsilon=1.0, low=1.0, high=1.0), "alpha"),
    (lambda: ldpgraph.perturb(np.zeros((2, 3)), "gauss", epsilon=1.0), "gauss"),
    (lambda: ldpgraph.perturb(np.zeros((2, 3)), "hds", epsilon=1.0, sampled=4), "sampled"),
    (lambda: ldpgraph.perturb(np.zeros((2, 3)), "square_wave", epsilon=1.0), "square"),
    (lambda: ldpgraph.perturb(np.zeros((2, 3)), "hds", epsilon=1.0, seed=-1), "seed"),
    (lambda: ldpgraph.perturb(np.array([["a", "b"]]), "hds", epsilon=1.0), "numbers"),
    (lambda: ldpgraph.perturb(np.array([[0.0, 0.0], [0.0, np.nan]]), "hds", epsilon=1.0),
     "row 1"),
    (lambda: ldpgraph.estimate(np.array([[0.0, 2.0]]), "multibit", epsilon=1.0, sampled=2),
     "0, 1 or NaN"),
    (lambda: ldpgraph.estimate(np.array([[0.0, np.nan]]), "onebit", epsilon=1.0),
     "every dimension"),
    (lambda: ldpgraph.estimate(np.array([[0.1, 0.2]]), "hds", epsilon=1.0, sampled=1),
     "indices"),
    (lambda: ldpgraph.perturb_labels([0, 3], classes=3, epsilon=1.0), "outside [0, 3)"),
    (lambda: ldpgraph.perturb_labels([0, 1], classes=1, epsilon=1.0), "class"),
    (lambda: ldpgraph.estimate_label_counts([0.5], classes=3, epsilon=1.0), "integers"),
])
def test_bad_input_raises_value_error(call, message):
    with pytest.raises(ValueError, match=None) as info:
        call()
    assert message in str(info.value), str(info.value)
