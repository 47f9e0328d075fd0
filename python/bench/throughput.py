"""Rows per second (wall clock, and per CPU-second as Google Benchmark counts) of ldpgraph.perturb and ldpgraph.estimate from Python.

  build/python/venv/bin/python python/bench/throughput.py [--rows N] [--dim D] [--sampled K]

Times perturb (secure noise) and estimate on an N x D array of uniform
values in [-1, 1], for each mechanism, on 1 thread and on every core; the
best of 3 runs each. Prints one line per (mechanism, threads).
"""
import argparse
import os
import time

import numpy as np

import ldpgraph

CASES = [("hds", dict(sampled=1)), ("multibit", dict(sampled=4)),
         ("piecewise", dict(sampled=4)), ("laplace", dict()), ("onebit", dict())]


def best(f, repeat=3):
    """The shortest wall time of repeat calls, its CPU time, the output."""
    runs = []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        out = f()
        runs.append((time.perf_counter() - t, time.process_time() - c))
    wall, cpu = min(runs)
    return wall, cpu, out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--sampled", type=int, default=None,
                   help="k or m for hds, multibit, piecewise (default: as listed)")
    a = p.parse_args()
    X = np.random.default_rng(1).uniform(-1, 1, size=(a.rows, a.dim))
    cores = len(os.sched_getaffinity(0))
    print(f"{a.rows} x {a.dim}, epsilon 1, {cores} cores; rows/s (best of 3)")
    for threads in sorted({1, cores}):
        for name, kw in CASES:
            if a.sampled and "sampled" in kw:
                kw = dict(sampled=a.sampled)
            tp, cp, R = best(lambda: ldpgraph.perturb(X, name, epsilon=1.0, threads=threads, **kw))
            te, ce, _ = best(lambda: ldpgraph.estimate(R, name, epsilon=1.0, threads=threads, **kw))
            print(f"{name:10s} threads {threads}: perturb {a.rows / tp:11,.0f}  "
                  f"estimate {a.rows / te:11,.0f}  both {a.rows / (tp + te):11,.0f}  "
                  f"(per CPU-second: perturb {a.rows / cp:11,.0f}, estimate {a.rows / ce:11,.0f})")


if __name__ == "__main__":
    main()
