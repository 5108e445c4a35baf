#!/usr/bin/env python3
"""The GCN users would otherwise pick, for Tessera's side-by-side benchmark: PyG's GCNConv and
DGL's GraphConv, trained exactly as tessera-train and pytorch_gcn.py train (Kipf & Welling:
dropout on the input of every layer, ReLU between layers, log_softmax + NLL on the training
nodes, Adam with weight decay on the first layer, full graph, no evaluation while timing).

Usage: python scripts/bench/peer_gcn.py --framework F --npz FILE.npz [--threads T]
           [--epochs 200] [--warmup 5] [--hidden 16] [--layers 2] [--dropout 0.5]
           [--lr 0.01] [--weight-decay 5e-4] [--seed 0]
  F: pyg-csr         GCNConv(cached=True) given Â's pattern as a torch sparse CSR tensor
                     (adj_t): PyG's fast path (SpMM)
     pyg-edge-index  GCNConv(cached=True) given edge_index (gather/scatter message passing)
     dgl             dgl.nn.GraphConv(norm="both") on the graph with self-loops

The npz layouts are pytorch_gcn.py's. Features are row-normalized and dense (as PyG's
NormalizeFeatures leaves them). The last stdout line is JSON: {"epoch_ms_median",
"test_accuracy", "peak_rss_bytes", ...}; peak RSS is the process's (getrusage), data loading
included.
"""

import argparse
import json
import os
import resource
import statistics
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_gcn import accuracy, load_npz, row_normalize, timed_training  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--framework", required=True, choices=("pyg-csr", "pyg-edge-index", "dgl"))
    p.add_argument("--npz", required=True)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if not 0 <= args.warmup < args.epochs:
        p.error("need 0 <= --warmup < --epochs")
    return args


def edges_without_loops(rows, cols):
    """The stored graph, binarized, symmetrized, without self-loops (what Tessera trains on)."""
    keep = rows != cols
    both = np.concatenate([np.stack([rows[keep], cols[keep]]), np.stack([cols[keep], rows[keep]])],
                          axis=1)
    return torch.from_numpy(np.unique(both, axis=1))


class PygGcn(torch.nn.Module):
    def __init__(self, widths, dropout):
        super().__init__()
        from torch_geometric.nn import GCNConv
        self.convs = torch.nn.ModuleList(GCNConv(a, b, cached=True)
                                         for a, b in zip(widths[:-1], widths[1:]))
        self.dropout = dropout

    def forward(self, x, graph):
        for i, conv in enumerate(self.convs):
            x = F.dropout(x, self.dropout, self.training)
            x = conv(x, graph)
            if i + 1 < len(self.convs):
                x = F.relu(x)
        return F.log_softmax(x, dim=1)


class DglGcn(torch.nn.Module):
    def __init__(self, widths, dropout):
        super().__init__()
        from dgl.nn import GraphConv
        self.convs = torch.nn.ModuleList(GraphConv(a, b, norm="both")
                                         for a, b in zip(widths[:-1], widths[1:]))
        self.dropout = dropout

    def forward(self, x, graph):
        for i, conv in enumerate(self.convs):
            x = F.dropout(x, self.dropout, self.training)
            x = conv(graph, x)
            if i + 1 < len(self.convs):
                x = F.relu(x)
        return F.log_softmax(x, dim=1)


def build(framework, edge_index, n, widths, dropout):
    """(model, graph argument, library version)."""
    if framework.startswith("pyg"):
        import torch_geometric
        model = PygGcn(widths, dropout)
        if framework == "pyg-edge-index":
            return model, edge_index, torch_geometric.__version__
        # adj_t: Â's pattern as sparse CSR (symmetric, so its own transpose); GCNConv adds the
        # self-loops and normalizes it once (cached).
        adj = torch.sparse_coo_tensor(edge_index, torch.ones(edge_index.shape[1]), (n, n))
        return model, adj.coalesce().to_sparse_csr(), torch_geometric.__version__
    import dgl
    graph = dgl.add_self_loop(dgl.graph((edge_index[0], edge_index[1]), num_nodes=n))
    return DglGcn(widths, dropout), graph, dgl.__version__


def main():
    args = parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rows, cols, features, labels, num_classes, train, val, test = load_npz(args.npz)
    n = labels.shape[0]
    x = torch.from_numpy(row_normalize(features))
    y = torch.from_numpy(labels)
    train, val, test = (torch.from_numpy(i) for i in (train, val, test))
    classes = num_classes if num_classes else int(labels.max()) + 1
    widths = [x.shape[1]] + [args.hidden] * (args.layers - 1) + [classes]
    model, graph, version = build(args.framework, edges_without_loops(rows, cols), n, widths,
                                  args.dropout)
    decayed = list(model.convs[0].parameters())
    rest = [p for conv in model.convs[1:] for p in conv.parameters()]
    groups = [{"params": decayed, "weight_decay": args.weight_decay}]
    if rest:
        groups.append({"params": rest, "weight_decay": 0.0})
    optimizer = torch.optim.Adam(groups, lr=args.lr)
    print(f"peer_gcn: {args.framework} {version}, {os.path.basename(args.npz)}: {n} nodes, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}", file=sys.stderr)

    epoch_ms, _ = timed_training(model, (x, graph), y, train, optimizer, args.epochs, args.warmup)

    model.eval()
    with torch.no_grad():
        out = model(x, graph)
    print(json.dumps({
        "framework": args.framework,
        "version": version,
        "epoch_ms_median": statistics.median(epoch_ms),
        "test_accuracy": accuracy(out, y, test),
        "val_accuracy": accuracy(out, y, val),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
