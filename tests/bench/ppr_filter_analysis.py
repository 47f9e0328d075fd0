#!/usr/bin/env python3
"""Why PrivGE's PPR loses the classes as the graph grows, and K steps do not.

Reads a dataset folder (meta.json, edges.txt, nodes.svm; binary or [0, 1]
features), draws HDS reports (k = 1, eps 1, features scaled to [-1, 1], as
PrivGE's defaults) with numpy's generator, and propagates the reports'
expectation S = C x and their noise N = report - S separately, with an exact
PPR (the power series, P = D^-(1-r) A D^-r, r = 0.5) and with K steps of P.
For each filter it prints the accuracy of a linear discriminant (trained on
a random half of the nodes, tested on the other) on the propagated reports,
and on them with the noise's class means removed: what is left of the
classes once the noise's class fingerprint, which shrinks as 1/n, is gone.
Neither ldpgraph's push nor its MLP is involved: this isolates the filter.

Usage: ppr_filter_analysis.py DATASET [--alphas 0.2,0.05,0.01]
                              [--steps 2,4,8,16] [--seed 1]
Needs python3-numpy. 30,000 nodes take about a minute per filter.
"""
import argparse
import json
import os

import numpy as np


def load(folder):
    meta = json.load(open(os.path.join(folder, "meta.json")))
    n, d = meta["nodes"], meta["features"]
    lo, hi = meta.get("feature_range", [0.0, 1.0])
    x = np.zeros((n, d))
    y = np.zeros(n, dtype=np.int64)
    for i, line in enumerate(open(os.path.join(folder, "nodes.svm"))):
        parts = line.split()
        y[i] = int(parts[0])
        for token in parts[1:]:
            j, v = token.split(":")
            x[i, int(j) - 1] = float(v)
    edges = np.loadtxt(os.path.join(folder, "edges.txt"), dtype=np.int64,
                       ndmin=2)
    return edges, y, (x - lo) / (hi - lo)


def walk_operator(edges, n, r=0.5):
    u = np.concatenate([edges[:, 0], edges[:, 1]])
    v = np.concatenate([edges[:, 1], edges[:, 0]])
    deg = np.bincount(u, minlength=n).astype(float)
    deg[deg == 0] = 1
    w = deg[u] ** (r - 1) * deg[v] ** (-r)

    def step(m):
        t = w[:, None] * m[v]
        return np.stack([np.bincount(u, weights=t[:, j], minlength=n)
                         for j in range(m.shape[1])], 1)
    return step


def hds(x01, rng, eps=1.0):
    """Expectation and one draw of HDS (k = 1) on features scaled to [-1, 1]."""
    n, d = x01.shape
    xs = 2 * x01 - 1
    e = np.exp(eps)
    b = (eps * e - e + 1) / (e * (e - eps - 1))
    c = (1 / d) * b * (e - 1) / (b * e + 1)
    j = rng.integers(0, d, n)
    x = xs[np.arange(n), j]
    inside = rng.random(n) < 2 * b * e / (2 * b * e + 2)
    t = rng.random(n) * 2
    left = x - b - (-1 - b)
    out = np.where(inside, x - b + 2 * b * rng.random(n),
                   np.where(t < left, -1 - b + t, x + b + (t - left)))
    report = np.zeros((n, d))
    report[np.arange(n), j] = out
    return c * xs, report


def lda_accuracy(z, y, seed=0):
    n = len(y)
    p = np.random.default_rng(seed).permutation(n)
    tr, te = p[: n // 2], p[n // 2:]
    mu, sd = z[tr].mean(0), z[tr].std(0)
    sd[sd == 0] = 1
    z = (z - mu) / sd
    classes = y.max() + 1
    means = np.stack([z[tr][y[tr] == k].mean(0) for k in range(classes)])
    resid = z[tr] - means[y[tr]]
    cov = resid.T @ resid / len(tr) + 1e-6 * np.eye(z.shape[1])
    w = np.linalg.solve(cov, means.T)
    bias = -0.5 * np.sum(means.T * w, 0)
    return float((np.argmax(z[te] @ w + bias, 1) == y[te]).mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("--alphas", default="0.2,0.05,0.01")
    ap.add_argument("--steps", default="2,4,8,16")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    edges, y, x = load(a.dataset)
    n, classes = len(y), y.max() + 1
    signal, report = hds(x, np.random.default_rng(a.seed))
    noise = report - signal
    step = walk_operator(edges, n)

    def ppr(m, alpha):
        terms = int(np.ceil(np.log(1e-6) / np.log(1 - alpha)))
        z, term = alpha * m, m
        for length in range(1, terms + 1):
            term = step(term)
            z = z + alpha * (1 - alpha) ** length * term
        return z

    def power(m, k):
        for _ in range(k):
            m = step(m)
        return m

    def between(z):
        means = np.stack([z[y == k].mean(0) for k in range(classes)])
        return float(((means - means.mean(0)) ** 2).mean()), means

    print(f"# {a.dataset}: {n} nodes, {classes} classes; HDS k=1 eps=1, seed {a.seed}")
    print(f"{'filter':<14} {'lda':>7} {'lda w/o noise class means':>26} "
          f"{'signal between':>15} {'noise between':>14} {'noise per node':>15}")
    filters = [(f"ppr a={al}", lambda m, al=float(al): ppr(m, al))
               for al in a.alphas.split(",") if al]
    filters += [(f"P^{k}", lambda m, k=int(k): power(m, k))
                for k in a.steps.split(",") if k]
    for name, f in filters:
        zs, zn = f(signal), f(noise)
        sb, _ = between(zs)
        nb, noise_means = between(zn)
        print(f"{name:<14} {lda_accuracy(zs + zn, y):>7.4f} "
              f"{lda_accuracy(zs + zn - noise_means[y], y):>26.4f} "
              f"{sb:>15.3e} {nb:>14.3e} {float(zn.var(0).mean()):>15.3e}",
              flush=True)


if __name__ == "__main__":
    main()
