#!/usr/bin/python3
"""LPGNN's GraphSAGE rebuilt in PyTorch: the reference for
tests/bench/sage_epoch_bench.cc on the same dataset folder (both driven by
tests/bench/sage_bench.sh).

What it measures: wall time of exactly N full-batch epochs, each a forward
over every node with dropout, cross-entropy on the training rows, backward
and an Adam step, then an inference forward with the validation accuracy,
loss and best-checkpoint copy ldpgraph's trainer also does. Loading the
data and scoring the test set are not timed.

Model, as in ldpgraph: two layers H' = H W_self + A_mean (H W_neigh) + b
(the aggregate formed at the narrower output width, the cheaper order for a
wide input; PyG's SAGEConv aggregates first, at the input's width), hidden
16, SELU, dropout 0.5 between the layers, xavier_uniform_ weights, zero
biases; float32; Adam(lr=0.01, weight_decay=1e-3).
--input dense multiplies a dense n x d feature tensor (what PyG's loaders
hand a model); --input sparse keeps the features in a torch sparse COO
tensor and multiplies with torch.sparse.mm.

Usage: torch_sage.py --dataset DIR [--input dense|sparse] [--epochs 100]
                     [--hidden 16] [--threads 1] [--seed 1]
Split (sage_epoch_bench uses the same): labelled nodes with even ids train;
of the others the first 500 (ascending id) validate, the rest test.
Prints one JSON line with "framework": "pytorch".
"""
import argparse
import copy
import json
import os
import time
import warnings

import numpy as np
import torch

VALIDATION_SIZE = 500


def load(folder):
    meta = json.load(open(os.path.join(folder, "meta.json")))
    n, d = meta["nodes"], meta["features"]
    labels = np.empty(n, dtype=np.int64)
    rows, cols, vals = [], [], []
    with open(os.path.join(folder, "nodes.svm")) as f:
        for v, line in enumerate(f):
            parts = line.split()
            labels[v] = int(parts[0])
            for item in parts[1:]:
                i, x = item.split(":")
                rows.append(v)
                cols.append(int(i) - 1)  # 1-based in the file
                vals.append(float(x))
    edges = np.loadtxt(os.path.join(folder, "edges.txt"), dtype=np.int64,
                       ndmin=2)
    return n, d, labels, (np.array(rows), np.array(cols),
                          np.array(vals, dtype=np.float32)), edges


def mean_operator(n, edges):
    """D^-1 A over the undirected edge list, a node without neighbours
    getting a zero row (as ldpgraph's operator)."""
    u = np.concatenate([edges[:, 0], edges[:, 1]])
    v = np.concatenate([edges[:, 1], edges[:, 0]])
    keep = u != v
    u, v = u[keep], v[keep]
    deg = np.bincount(u, minlength=n).astype(np.float32)
    w = 1.0 / deg[u]
    a = torch.sparse_coo_tensor(np.stack([u, v]), torch.from_numpy(w),
                                (n, n)).coalesce()
    return a.to_sparse_csr()


class Sage(torch.nn.Module):
    def __init__(self, d, hidden, classes, sparse):
        super().__init__()
        self.sparse = sparse
        self.self_w = torch.nn.ParameterList()
        self.neigh_w = torch.nn.ParameterList()
        self.bias = torch.nn.ParameterList()
        for fan_in, fan_out in ((d, hidden), (hidden, classes)):
            for plist in (self.self_w, self.neigh_w):
                w = torch.empty(fan_in, fan_out)
                torch.nn.init.xavier_uniform_(w)
                plist.append(torch.nn.Parameter(w))
            self.bias.append(torch.nn.Parameter(torch.zeros(fan_out)))

    def layer(self, l, h, a, first):
        if first and self.sparse:
            own = torch.sparse.mm(h, self.self_w[l])
            neigh = torch.sparse.mm(h, self.neigh_w[l])
        else:
            own = h @ self.self_w[l]
            neigh = h @ self.neigh_w[l]
        return own + torch.sparse.mm(a, neigh) + self.bias[l]

    def forward(self, x, a):
        h = torch.nn.functional.selu(self.layer(0, x, a, True))
        h = torch.nn.functional.dropout(h, 0.5, self.training)
        return self.layer(1, h, a, False)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", required=True)
    p.add_argument("--input", choices=("dense", "sparse"), default="dense")
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support")
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    n, d, labels, (r, c, v), edges = load(a.dataset)
    if a.input == "sparse":
        x = torch.sparse_coo_tensor(np.stack([r, c]), torch.from_numpy(v),
                                    (n, d)).coalesce()
    else:
        x = torch.zeros(n, d)
        x[torch.from_numpy(r), torch.from_numpy(c)] = torch.from_numpy(v)
    adj = mean_operator(n, edges)
    labelled = np.flatnonzero(labels >= 0)
    train = labelled[labelled % 2 == 0]
    rest = labelled[labelled % 2 == 1]
    val, test = rest[:VALIDATION_SIZE], rest[VALIDATION_SIZE:]
    y = torch.from_numpy(labels)
    train_t, val_t, test_t = (torch.from_numpy(i) for i in (train, val, test))
    classes = int(labels.max()) + 1

    model = Sage(d, a.hidden, classes, a.input == "sparse")
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    best, best_acc = None, -1.0
    start = time.perf_counter()
    for _ in range(a.epochs):
        model.train()
        opt.zero_grad()
        loss = loss_fn(model(x, adj)[train_t], y[train_t])
        loss.backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            out = model(x, adj)
            val_loss = loss_fn(out[val_t], y[val_t]).item()
            acc = (out[val_t].argmax(1) == y[val_t]).float().mean().item()
        if acc > best_acc:
            best_acc, best = acc, copy.deepcopy(model.state_dict())
    seconds = time.perf_counter() - start
    del val_loss
    model.load_state_dict(best)
    model.eval()
    with torch.no_grad():
        test_acc = (model(x, adj)[test_t].argmax(1) ==
                    y[test_t]).float().mean().item()
    print(json.dumps({
        "framework": "pytorch", "torch": torch.__version__,
        "input": a.input, "threads": a.threads,
        "seconds_per_epoch": seconds / a.epochs, "epochs": a.epochs,
        "seconds": seconds, "test_accuracy": round(test_acc, 4)}))


if __name__ == "__main__":
    main()
