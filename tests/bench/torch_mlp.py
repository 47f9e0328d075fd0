#!/usr/bin/python3
"""Training speed of the curator's node MLP rebuilt in PyTorch: the reference
for tests/bench/mlp_epoch_bench.cc on the same data (both driven by
tests/bench/training_bench.sh).

What it measures: wall time of exactly N epochs, each one full-batch step on
the training rows (forward with dropout, cross-entropy, backward, Adam step)
followed by an inference forward on the validation rows with the accuracy,
loss and best-checkpoint copy ldpgraph's trainer also does. Loading the data
and scoring the test set are not timed.

Model, as in ldpgraph: Linear(d, H) (xavier_uniform_ weights, zero bias),
ReLU, Dropout(0.5), Linear(H, c); float32; Adam(lr=0.01, weight_decay=5e-4).

Usage: torch_mlp.py --z Z.npy --labels LABELS.txt --train TRAIN.txt
                    [--epochs 200] [--hidden 64] [--threads 1] [--seed 1]
Validation: the first 500 labelled nodes (ascending id) not in TRAIN; test:
the remaining labelled nodes not in TRAIN (the rule mlp_epoch_bench uses).
Prints one JSON line with "framework": "pytorch".
"""
import argparse
import copy
import json
import os
import time

import numpy as np
import torch

VALIDATION_SIZE = 500


def blas_in_use():
    """The BLAS libraries this process mapped (Debian's torch calls whichever
    libblas.so.3 the system provides)."""
    libs = set()
    for line in open("/proc/self/maps"):
        path = line.split()[-1]
        name = os.path.basename(path)
        if "blas" in name or "mkl" in name:
            libs.add(os.path.realpath(path))
    return ",".join(sorted(libs)) or "unknown"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--z", required=True)
    p.add_argument("--labels", required=True)
    p.add_argument("--train", required=True)
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    x = torch.from_numpy(np.ascontiguousarray(np.load(a.z), dtype=np.float32))
    labels = np.loadtxt(a.labels, dtype=np.int64, ndmin=1)
    train = np.loadtxt(a.train, dtype=np.int64, ndmin=1)
    assert len(labels) == x.shape[0], "labels and Z disagree on the node count"
    classes = int(labels.max()) + 1
    rest = np.setdiff1d(np.flatnonzero(labels >= 0), train)  # ascending
    val, test = rest[:VALIDATION_SIZE], rest[VALIDATION_SIZE:]
    y = torch.from_numpy(labels)
    train_t, val_t, test_t = (torch.from_numpy(i) for i in (train, val, test))
    x_train, y_train, y_val = x[train_t], y[train_t], y[val_t]

    model = torch.nn.Sequential(
        torch.nn.Linear(x.shape[1], a.hidden), torch.nn.ReLU(),
        torch.nn.Dropout(0.5), torch.nn.Linear(a.hidden, classes))
    for m in model:
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight)
            torch.nn.init.zeros_(m.bias)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    loss_fn = torch.nn.CrossEntropyLoss()

    best = None
    start = time.perf_counter()
    for _ in range(a.epochs):
        model.train()
        opt.zero_grad()
        loss_fn(model(x_train), y_train).backward()
        opt.step()
        model.eval()
        with torch.no_grad():  # the trainer's per-epoch validation
            logits = model(x[val_t])
            score = ((logits.argmax(1) == y_val).float().mean().item(),
                     -loss_fn(logits, y_val).item())
            if best is None or score > best[0]:
                best = (score, copy.deepcopy(model.state_dict()))
    seconds = time.perf_counter() - start

    model.load_state_dict(best[1])
    model.eval()
    with torch.no_grad():
        acc = (model(x[test_t]).argmax(1) == y[test_t]).float().mean().item()
    print(json.dumps({"framework": "pytorch", "threads": a.threads,
                      "threads_used": torch.get_num_threads(),
                      "seconds_per_epoch": seconds / a.epochs,
                      "epochs": a.epochs, "seconds": seconds,
                      "test_accuracy": round(acc, 4),
                      "torch": torch.__version__, "blas": blas_in_use()}))


if __name__ == "__main__":
    main()
