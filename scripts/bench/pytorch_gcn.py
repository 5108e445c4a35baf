#!/usr/bin/env python3
"""Plain-PyTorch GCN baseline for Tessera's benchmarks, written the way a careful user
writes one (tkipf/pygcn style, no PyG/DGL): full-graph training of a Kipf & Welling GCN.

Usage: /usr/bin/python3 scripts/bench/pytorch_gcn.py --npz FILE.npz [--threads T]
           [--epochs 200] [--warmup 5] [--hidden 16] [--layers 2] [--dropout 0.5]
           [--lr 0.01] [--weight-decay 5e-4] [--seed 0] [--sparse-format coo|csr]
           [--sparse-features]

The npz holds numpy arrays (no pickles):
  graph     adj_indptr [N+1], adj_indices [nnz] (CSR, optional adj_data),
            or edges [E, 2], each undirected edge once (the reverse is added)
  features  attr_indptr, attr_indices, attr_data, attr_shape (CSR, as Planetoid),
            or features / node_features [N, F] dense
  labels    labels / node_labels [N]; optional num_classes (else max label + 1)
  split     train_idx, val_idx, test_idx, or train_mask, val_mask, test_mask
            ([N] or [splits, N]; the first split is used)

What it does: Â = D^-1/2 (A + I) D^-1/2 as a coalesced torch sparse tensor (the graph
as stored, binarized, self-loops replaced by I); dense float32 features, row-normalized
as Kipf does (by the L1 norm: the same for non-negative features); layers H' = Â (H W) + b with ReLU between them and dropout on the input
of every layer; log_softmax + nll_loss on the training nodes; Adam with weight decay
on the first layer (Kipf & Welling; --decay-all-layers applies it to all, as pygcn).
With --sparse-features the input stays a sparse COO tensor (bag-of-words features): the
first layer's dropout acts on its values and its product is torch.sparse.mm — the
strongest honest plain-PyTorch baseline for sparse inputs.

Each epoch (forward + backward + optimizer step, no evaluation) is timed with
time.perf_counter; the first --warmup of the --epochs training epochs are not timed.
The last stdout line is JSON: {"epoch_ms_median", "test_accuracy", "threads", ...}.
"""

import argparse
import json
import os
import resource
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def parse_args():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--npz", required=True, help="dataset file (see above)")
    p.add_argument("--threads", type=int, default=0,
                   help="torch.set_num_threads(T); 0 keeps PyTorch's default")
    p.add_argument("--epochs", type=int, default=200, help="training epochs, warmup included")
    p.add_argument("--warmup", type=int, default=5, help="first epochs left out of the timing")
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--layers", type=int, default=2, help="number of GCN layers")
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--decay-all-layers", action="store_true",
                   help="weight decay on every layer (pygcn) instead of the first (Kipf)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sparse-format", choices=("coo", "csr"), default="coo",
                   help="layout of Â given to torch.sparse.mm")
    p.add_argument("--sparse-features", action="store_true",
                   help="keep the input features sparse (torch.sparse.mm in the first layer)")
    args = p.parse_args()
    if args.layers < 1:
        p.error("--layers must be at least 1")
    if not 0 <= args.warmup < args.epochs:
        p.error("need 0 <= --warmup < --epochs")
    return args


def first_key(z, *names):
    for name in names:
        if name in z.files:
            return z[name]
    raise KeyError(f"none of {names} in the npz (it has {sorted(z.files)})")


def split_index(z, name, n):
    if f"{name}_idx" in z.files:
        return z[f"{name}_idx"].astype(np.int64)
    mask = first_key(z, f"{name}_mask", f"{name}_masks").astype(bool)
    if mask.ndim == 2:
        mask = mask[0]
    if mask.shape != (n,):
        raise ValueError(f"{name} mask has shape {mask.shape}, expected ({n},)")
    return np.flatnonzero(mask)


def load_npz(path):
    """Returns (rows, cols, features [N, F] float32, labels [N] int64, num_classes or 0,
    train, val, test)."""
    with np.load(path, allow_pickle=False) as z:
        labels = first_key(z, "labels", "node_labels").astype(np.int64)
        n = labels.shape[0]

        if "adj_indptr" in z.files:
            indptr = z["adj_indptr"].astype(np.int64)
            cols = z["adj_indices"].astype(np.int64)
            if indptr.shape != (n + 1,):
                raise ValueError(f"adj_indptr has shape {indptr.shape}, expected ({n + 1},)")
            rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
            if "adj_data" in z.files:
                keep = z["adj_data"] != 0
                rows, cols = rows[keep], cols[keep]
        else:
            edges = z["edges"].astype(np.int64)
            rows = np.concatenate([edges[:, 0], edges[:, 1]])
            cols = np.concatenate([edges[:, 1], edges[:, 0]])

        if "attr_indptr" in z.files:
            f_rows, f_cols = (int(s) for s in z["attr_shape"])
            a_indptr = z["attr_indptr"].astype(np.int64)
            features = np.zeros((f_rows, f_cols), dtype=np.float32)
            r = np.repeat(np.arange(f_rows), np.diff(a_indptr))
            features[r, z["attr_indices"].astype(np.int64)] = z["attr_data"]
        else:
            features = np.ascontiguousarray(
                first_key(z, "features", "node_features"), dtype=np.float32)
        if features.shape[0] != n:
            raise ValueError(f"features have {features.shape[0]} rows, labels {n}")

        num_classes = int(z["num_classes"]) if "num_classes" in z.files else 0
        splits = [split_index(z, name, n) for name in ("train", "val", "test")]
    return (rows, cols, features, labels, num_classes, *splits)


def normalized_adjacency(rows, cols, n, sparse_format):
    """Â = D^-1/2 (A + I) D^-1/2 with A binarized and its own self-loops dropped."""
    off_diagonal = rows != cols
    loops = np.arange(n, dtype=np.int64)
    index = torch.from_numpy(np.stack([np.concatenate([rows[off_diagonal], loops]),
                                       np.concatenate([cols[off_diagonal], loops])]))
    a = torch.sparse_coo_tensor(index, torch.ones(index.shape[1]), (n, n)).coalesce()
    index = a.indices()
    values = torch.ones(index.shape[1])  # duplicates were summed: binarize again
    degree = torch.zeros(n).index_add_(0, index[0], values)
    d_inv_sqrt = degree.pow(-0.5)
    values = d_inv_sqrt[index[0]] * values * d_inv_sqrt[index[1]]
    adj = torch.sparse_coo_tensor(index, values, (n, n)).coalesce()
    return adj.to_sparse_csr() if sparse_format == "csr" else adj


def row_normalize(features):
    """Divides each row by its L1 norm, as tessera-train does (for non-negative features, such
    as bag-of-words, this is Kipf's and PyG's NormalizeFeatures; the absolute value keeps rows
    of generated features with negative entries from dividing by a sum near zero)."""
    sums = np.abs(features).sum(axis=1, keepdims=True)
    sums[sums == 0] = 1
    return features / sums


class GraphConvolution(torch.nn.Module):
    """H' = Â (H W) + b, Glorot-initialized weight and zero bias (as Kipf's code)."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(in_features, out_features))
        self.bias = torch.nn.Parameter(torch.zeros(out_features))
        torch.nn.init.xavier_uniform_(self.weight)

    def forward(self, x, adj):
        support = torch.sparse.mm(x, self.weight) if x.is_sparse else x @ self.weight
        return torch.sparse.mm(adj, support) + self.bias


class GCN(torch.nn.Module):
    def __init__(self, in_features, hidden, classes, layers, dropout):
        super().__init__()
        widths = [in_features] + [hidden] * (layers - 1) + [classes]
        self.convs = torch.nn.ModuleList(
            GraphConvolution(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.dropout = dropout

    def forward(self, x, adj):
        for i, conv in enumerate(self.convs):
            if x.is_sparse:  # dropout on the stored values only
                x = torch.sparse_coo_tensor(x.indices(),
                                            F.dropout(x.values(), self.dropout, self.training),
                                            x.shape)
            else:
                x = F.dropout(x, self.dropout, self.training)
            x = conv(x, adj)
            if i + 1 < len(self.convs):
                x = F.relu(x)
        return F.log_softmax(x, dim=1)


def accuracy(log_probs, labels, index):
    return (log_probs[index].argmax(dim=1) == labels[index]).double().mean().item()


def timed_training(model, inputs, y, train, optimizer, epochs, warmup):
    """Trains `epochs` full-graph steps (forward, NLL on `train`, backward, optimizer step) and
    returns (ms of each step after the first `warmup`, the last loss)."""
    epoch_ms = []
    for epoch in range(epochs):
        start = time.perf_counter()
        model.train()
        optimizer.zero_grad()
        out = model(*inputs)
        loss = F.nll_loss(out[train], y[train])
        loss.backward()
        optimizer.step()
        elapsed = time.perf_counter() - start
        if epoch >= warmup:
            epoch_ms.append(1e3 * elapsed)
    return epoch_ms, loss


def main():
    args = parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    rows, cols, features, labels, num_classes, train, val, test = load_npz(args.npz)
    n = labels.shape[0]
    adj = normalized_adjacency(rows, cols, n, args.sparse_format)
    x = torch.from_numpy(row_normalize(features))
    if args.sparse_features:
        x = x.to_sparse().coalesce()
    y = torch.from_numpy(labels)
    train, val, test = (torch.from_numpy(i) for i in (train, val, test))
    classes = num_classes if num_classes else int(labels.max()) + 1

    model = GCN(x.shape[1], args.hidden, classes, args.layers, args.dropout)
    decayed = model.convs if args.decay_all_layers else model.convs[:1]
    undecayed = list(model.convs[len(decayed):].parameters())
    groups = [{"params": list(decayed.parameters()), "weight_decay": args.weight_decay}]
    if undecayed:
        groups.append({"params": undecayed, "weight_decay": 0.0})
    optimizer = torch.optim.Adam(groups, lr=args.lr)

    print(f"pytorch_gcn: {os.path.basename(args.npz)}: {n} nodes, {adj._nnz()} nnz in Â, "
          f"{x.shape[1]} features, {classes} classes, {torch.get_num_threads()} threads, "
          f"torch {torch.__version__}", file=sys.stderr)

    epoch_ms, loss = timed_training(model, (x, adj), y, train, optimizer, args.epochs,
                                    args.warmup)

    model.eval()
    with torch.no_grad():
        out = model(x, adj)
    result = {
        "epoch_ms_median": statistics.median(epoch_ms),
        "test_accuracy": accuracy(out, y, test),
        "threads": torch.get_num_threads(),
        "val_accuracy": accuracy(out, y, val),
        "final_loss": loss.item(),
        "epoch_ms_mean": statistics.fmean(epoch_ms),
        "timed_epochs": len(epoch_ms),
        "nodes": n,
        "adj_nnz": adj._nnz(),
        "sparse_format": args.sparse_format,
        "sparse_features": args.sparse_features,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "tcmalloc": "tcmalloc" in os.environ.get("LD_PRELOAD", ""),
        "torch": torch.__version__,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
