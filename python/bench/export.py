"""Seconds to export a result into NumPy with ldpgraph.Admin.export.

  python python/bench/export.py WORK/ldpctl.conf [RESULT]

RESULT defaults to the newest result with a matrix. Prints the shape, the
best of 5 exports and MB/s (float32 payload).
"""
import sys
import time

import ldpgraph


def main():
    admin = ldpgraph.Admin.from_config(sys.argv[1])
    result = sys.argv[2] if len(sys.argv) > 2 else next(
        r.id for r in admin.results() if r.rows)
    times = []
    for _ in range(5):
        t = time.perf_counter()
        ids, X = admin.export(result)
        times.append(time.perf_counter() - t)
    best = min(times)
    print(f"{result}: {X.shape[0]} x {X.shape[1]} float32 ({X.nbytes / 1e6:.1f} MB), "
          f"ids {ids.shape}; best of 5 {best * 1000:.0f} ms, {X.nbytes / 1e6 / best:.0f} MB/s")


if __name__ == "__main__":
    main()
