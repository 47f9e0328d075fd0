"""ldpgraph's local randomizers on NumPy arrays, at C++ speed.

Every function runs the C++ mechanisms of ldpgraph (the same code an agent
perturbs with and the curator estimates with) over the rows of an array,
in parallel on ``threads`` threads (0: every core) with the GIL released.

Reports as arrays: :func:`perturb` returns an ``n x d`` float64 array, row
``i`` the report of row ``i`` of ``X``: the reported value of each reported
dimension, NaN for a dimension not reported (the k-of-d mechanisms report
``sampled`` dimensions per row); for the bit mechanisms ("multibit",
"onebit") each reported bit is 0.0 or 1.0. :func:`estimate` reads that
layout back.

Randomness: without ``seed`` the noise comes from OpenSSL's CSPRNG, as an
agent's does: the reports are epsilon-LDP. With ``seed`` (an integer in
[0, 2^64)) row ``i`` draws from a seeded xoshiro256** stream: reproducible
on any thread count, for tests and experiments, and NOT differentially
private (anyone who knows the seed can undo the noise).

Mechanisms (``mechanism=``): "hds" (PrivGE's high-dimensional square wave,
k of d; biased by design, see :func:`moments`), "multibit" (LPGNN, m of d
bits), "onebit" (every dimension, one bit), "piecewise" (k of d), "laplace"
(k of d, default every dimension), "square_wave" (d = 1). Values outside
``[low, high]`` are clipped to it first, as the agent does.

Errors: ``ValueError`` for a bad shape, mechanism name, epsilon, range,
``sampled`` or report, naming the row when one row is at fault.
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from . import _native
from .names import FEATURE_MECHANISMS, python_name

# The feature mechanisms' names as these functions spell them, from the
# proto (ldpgraph.names): "square_wave", "hds", "multibit", "onebit",
# "piecewise", "laplace". The dashed spellings are accepted too.
MECHANISMS = tuple(python_name(n) for n in FEATURE_MECHANISMS)


def _seed(seed: Optional[int]) -> Optional[int]:
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be None or an integer, got {seed!r}")
    if not 0 <= int(seed) < 2**64:
        raise ValueError(f"seed must be in [0, 2^64), got {seed}")
    return int(seed)


def _sampled(sampled: Optional[int]) -> Optional[int]:
    if sampled is None:
        return None
    if isinstance(sampled, bool) or not isinstance(sampled, (int, np.integer)):
        raise ValueError(f"sampled must be None or an integer, got {sampled!r}")
    return int(sampled)


def _matrix(x, what: str) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind not in "fiub":
        raise ValueError(f"{what} must hold numbers, got dtype {a.dtype}")
    return np.ascontiguousarray(a, dtype=np.float64)


def perturb(X, mechanism: str = "hds", *, epsilon: float, low: float = -1.0,
            high: float = 1.0, sampled: Optional[int] = None,
            seed: Optional[int] = None, threads: int = 0) -> np.ndarray:
    """Perturbs every row of ``X`` (n x d) with one mechanism at ``epsilon``.

    Each row spends ``epsilon`` (pure epsilon-LDP) when ``seed`` is None.
    ``low`` < ``high`` is the public range of every feature; ``sampled`` is
    k (hds, piecewise, laplace) or m (multibit), in 1..d, None for the
    mechanism's default. ``seed``: reproducible and NOT private (see the
    module). Returns the n x d report array (NaN where not reported).
    """
    return _native.perturb(_matrix(X, "X"), mechanism, float(epsilon), float(low),
                           float(high), _sampled(sampled), _seed(seed), int(threads))


def estimate(reports, mechanism: str = "hds", *, epsilon: float, low: float = -1.0,
             high: float = 1.0, sampled: Optional[int] = None,
             threads: int = 0) -> np.ndarray:
    """The curator's estimate of every row from its report (n x d).

    The parameters must be those the reports were perturbed with. Each row
    is the mechanism's estimate (unbiased for multibit, onebit, piecewise and
    laplace; hds and square_wave return the raw report in canonical
    coordinates, as the curator does). A report that the mechanism could not
    have produced raises ValueError naming its row.
    """
    return _native.estimate(_matrix(reports, "reports"), mechanism, float(epsilon),
                            float(low), float(high), _sampled(sampled), int(threads))


def estimate_mean(reports, mechanism: str = "hds", **kwargs) -> np.ndarray:
    """The unbiased estimate of the column means: ``estimate(...).mean(axis=0)``."""
    return estimate(reports, mechanism, **kwargs).mean(axis=0)


def moments(x, mechanism: str = "hds", *, epsilon: float, dimension: int,
            low: float = -1.0, high: float = 1.0,
            sampled: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray]:
    """Mean and variance of one dimension's estimate when its true value is x.

    Elementwise over ``x`` (any shape, clipped to [low, high]), over the
    mechanism's noise and its sampling of dimensions, for a ``dimension``-d
    input: the error bars of :func:`estimate`. For hds and square_wave these
    are the moments of the raw report in canonical coordinates.
    """
    return _native.moments(_matrix(x, "x"), mechanism, float(epsilon), int(dimension),
                           float(low), float(high), _sampled(sampled))


def _labels(labels, what: str) -> np.ndarray:
    a = np.asarray(labels)
    if a.dtype.kind not in "iub":
        raise ValueError(f"{what} must be integers, got dtype {a.dtype}")
    return np.ascontiguousarray(a, dtype=np.int64)


def perturb_labels(labels, *, classes: int, epsilon: float,
                   seed: Optional[int] = None, threads: int = 0) -> np.ndarray:
    """k-ary randomized response on class labels in [0, classes).

    Keeps each label with probability e^eps / (e^eps + classes - 1), else
    reports one of the others uniformly. ``seed``: reproducible and NOT
    private. Returns an int64 array of reported labels.
    """
    return _native.perturb_labels(_labels(labels, "labels"), int(classes),
                                  float(epsilon), _seed(seed), int(threads))


def estimate_label_counts(reports, *, classes: int, epsilon: float) -> np.ndarray:
    """The unbiased estimate of how many nodes hold each class (length classes).

    The sum over reports of the transition matrix's inverse applied to the
    reported one-hot vector; entries may be negative or exceed n.
    """
    return _native.estimate_label_counts(_labels(reports, "reports"), int(classes),
                                         float(epsilon))
