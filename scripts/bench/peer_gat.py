#!/usr/bin/env python3
"""The GAT users would otherwise pick, for Tessera's side-by-side benchmark: PyG's GATConv and
DGL's dgl.nn.GATConv, built as PyG's examples/gat.py builds it for Cora (Veličković et al. 2018):

  Dropout(p) -> GATConv(in, hidden, heads=H, concat) -> ELU -> Dropout(p)
             -> GATConv(H*hidden, classes, heads=out_heads, mean of heads) -> log_softmax,

attention dropout p and LeakyReLU slope 0.2 in both layers, NLL on the training nodes, Adam with
weight decay on all parameters (as the PyG example), full graph.

Usage: python scripts/bench/peer_gat.py --framework F --npz FILE.npz [--threads T]
           [--mode accuracy|timing] [--epochs 200] [--warmup 5] [--hidden 8] [--heads 8]
           [--out-heads 1] [--dropout 0.6] [--lr 0.005] [--weight-decay 5e-4]
           [--seed 0] [--seeds 1] [--no-normalize]
  F: pyg  torch_geometric.nn.GATConv(add_self_loops=True) given edge_index
     dgl  dgl.nn.GATConv(feat_drop=0, attn_drop=p) on the graph with self-loops added (the
          input dropout is applied outside the layer, as in PyG)

The npz layouts are pytorch_gcn.py's. The graph is the stored one, binarized, symmetrized and
without self-loops (as peer_gcn.py); each layer adds one self-loop per node. Features are dense
and row-normalized (PyG's NormalizeFeatures) unless --no-normalize. Run with OMP_NUM_THREADS=T
too so that DGL's own kernels use T threads.

--mode accuracy: for each seed S..S+N-1 (N = --seeds), trains --epochs epochs and evaluates val
  and test accuracy after each (eval mode); a seed's result is the test accuracy at the first
  epoch of best validation accuracy. Last stdout line: JSON {"framework", "seeds",
  "test_accuracy_mean", "test_accuracy_std" (population), "per_seed": [test accuracy, ...]}.
--mode timing: one seed (--seed), no evaluation while training; each epoch (forward, backward,
  step) is timed, the first --warmup left out. Last stdout line: JSON {"framework",
  "epoch_ms_median", "peak_rss_bytes", "test_accuracy", "threads", "nodes", "edges"} (edges:
  directed edges without self-loops; peak RSS is the process's, data loading included).
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
from peer_gcn import edges_without_loops  # noqa: E402
from pytorch_gcn import accuracy, load_npz, row_normalize, timed_training  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--framework", required=True, choices=("pyg", "dgl"))
    p.add_argument("--npz", required=True)
    p.add_argument("--threads", type=int, default=0,
                   help="torch.set_num_threads(T); 0 keeps PyTorch's default")
    p.add_argument("--mode", choices=("accuracy", "timing"), default="accuracy")
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--warmup", type=int, default=5, help="first epochs left out of the timing")
    p.add_argument("--hidden", type=int, default=8, help="features per head in the first layer")
    p.add_argument("--heads", type=int, default=8, help="heads of the first layer")
    p.add_argument("--out-heads", type=int, default=1, help="heads of the output layer")
    p.add_argument("--dropout", type=float, default=0.6, help="input and attention dropout")
    p.add_argument("--lr", type=float, default=0.005)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", type=int, default=1, help="accuracy mode: seeds S..S+N-1")
    p.add_argument("--no-normalize", action="store_true", help="keep the features as stored")
    args = p.parse_args()
    if not 0 <= args.warmup < args.epochs:
        p.error("need 0 <= --warmup < --epochs")
    if args.seeds < 1:
        p.error("--seeds must be at least 1")
    return args


class PygGat(torch.nn.Module):
    def __init__(self, features, hidden, classes, heads, out_heads, dropout):
        super().__init__()
        from torch_geometric.nn import GATConv
        self.conv1 = GATConv(features, hidden, heads=heads, concat=True, negative_slope=0.2,
                             dropout=dropout, add_self_loops=True)
        self.conv2 = GATConv(hidden * heads, classes, heads=out_heads, concat=False,
                             negative_slope=0.2, dropout=dropout, add_self_loops=True)
        self.dropout = dropout

    def forward(self, x, edge_index):
        x = F.dropout(x, self.dropout, self.training)
        x = F.elu(self.conv1(x, edge_index))
        x = F.dropout(x, self.dropout, self.training)
        return F.log_softmax(self.conv2(x, edge_index), dim=1)


class DglGat(torch.nn.Module):
    def __init__(self, features, hidden, classes, heads, out_heads, dropout):
        super().__init__()
        from dgl.nn.pytorch import GATConv
        self.conv1 = GATConv(features, hidden, heads, feat_drop=0.0, attn_drop=dropout,
                             negative_slope=0.2)
        self.conv2 = GATConv(hidden * heads, classes, out_heads, feat_drop=0.0,
                             attn_drop=dropout, negative_slope=0.2)
        self.dropout = dropout

    def forward(self, x, graph):
        x = F.dropout(x, self.dropout, self.training)
        x = F.elu(self.conv1(graph, x).flatten(1))  # [N, heads, hidden] -> concatenated heads
        x = F.dropout(x, self.dropout, self.training)
        return F.log_softmax(self.conv2(graph, x).mean(1), dim=1)  # mean of the output heads


def build_graph(framework, edge_index, n):
    """(the graph argument of the model, library version)."""
    if framework == "pyg":
        import torch_geometric
        return edge_index, torch_geometric.__version__  # GATConv adds the self-loops
    os.environ.setdefault("DGLBACKEND", "pytorch")
    import dgl
    graph = dgl.add_self_loop(dgl.graph((edge_index[0], edge_index[1]), num_nodes=n))
    return graph, dgl.__version__


def new_model(args, seed, features, classes):
    torch.manual_seed(seed)
    np.random.seed(seed)
    cls = PygGat if args.framework == "pyg" else DglGat
    model = cls(features, args.hidden, classes, args.heads, args.out_heads, args.dropout)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr,
                                 weight_decay=args.weight_decay)
    return model, optimizer


def evaluate(model, x, graph, y, index):
    model.eval()
    with torch.no_grad():
        out = model(x, graph)
    return [accuracy(out, y, i) for i in index]


def best_val_test_accuracy(args, seed, x, graph, y, train, val, test, classes):
    """Test accuracy at the first epoch of best validation accuracy."""
    model, optimizer = new_model(args, seed, x.shape[1], classes)
    best_val, best_test = -1.0, 0.0
    for _ in range(args.epochs):
        model.train()
        optimizer.zero_grad()
        F.nll_loss(model(x, graph)[train], y[train]).backward()
        optimizer.step()
        val_acc, test_acc = evaluate(model, x, graph, y, (val, test))
        if val_acc > best_val:
            best_val, best_test = val_acc, test_acc
    return best_test


def main():
    args = parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    rows, cols, features, labels, num_classes, train, val, test = load_npz(args.npz)
    n = labels.shape[0]
    x = torch.from_numpy(features if args.no_normalize else row_normalize(features))
    y = torch.from_numpy(labels)
    train, val, test = (torch.from_numpy(i) for i in (train, val, test))
    classes = num_classes if num_classes else int(labels.max()) + 1
    edge_index = edges_without_loops(rows, cols)
    graph, version = build_graph(args.framework, edge_index, n)
    print(f"peer_gat: {args.framework} {version}, {os.path.basename(args.npz)}: {n} nodes, "
          f"{edge_index.shape[1]} edges, {torch.get_num_threads()} threads, "
          f"torch {torch.__version__}, mode {args.mode}", file=sys.stderr)

    if args.mode == "accuracy":
        seeds = list(range(args.seed, args.seed + args.seeds))
        per_seed = []
        for seed in seeds:
            per_seed.append(best_val_test_accuracy(args, seed, x, graph, y, train, val, test,
                                                   classes))
            print(f"peer_gat: seed {seed}: test accuracy {per_seed[-1]:.4f}", file=sys.stderr)
        result = {
            "framework": args.framework,
            "seeds": seeds,
            "test_accuracy_mean": float(np.mean(per_seed)),
            "test_accuracy_std": float(np.std(per_seed)),
            "per_seed": per_seed,
        }
    else:
        model, optimizer = new_model(args, args.seed, x.shape[1], classes)
        epoch_ms, _ = timed_training(model, (x, graph), y, train, optimizer, args.epochs,
                                     args.warmup)
        (test_acc,) = evaluate(model, x, graph, y, (test,))
        result = {
            "framework": args.framework,
            "epoch_ms_median": statistics.median(epoch_ms),
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "test_accuracy": test_acc,
            "threads": torch.get_num_threads(),
            "nodes": n,
            "edges": int(edge_index.shape[1]),
        }
    result.update(version=version, torch=torch.__version__)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
