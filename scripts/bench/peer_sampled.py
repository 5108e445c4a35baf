#!/usr/bin/env python3
"""Sampled mini-batch GraphSAGE as users would otherwise train it, for Tessera's side-by-side
benchmark (scripts/bench/sampled.sh):

  dgl  dgl.dataloading.NeighborSampler + DataLoader (num_workers 0) + dgl.nn.SAGEConv("mean")
  pyg  torch_geometric.loader.NeighborLoader + torch_geometric.nn.SAGEConv (mean); needs
       pyg-lib or torch-sparse, which PyG 2.3.1's NeighborLoader samples with

The model is tessera-train's --model sage: Dropout(p) -> SAGEConv(in, hidden) -> ReLU ->
Dropout(p) -> SAGEConv(hidden, classes); cross-entropy over each batch's seeds, Adam (lr 0.01,
weight decay 5e-4), one step per batch. Fanouts are given seeds first (PyG's num_neighbors
order, tessera-train's --fanouts); DGL's list is their reverse. The graph is the stored one,
binarized, symmetrized and without self-loops (as peer_gcn.py); features as stored.

Usage: python scripts/bench/peer_sampled.py --framework dgl|pyg --npz FILE.npz [--threads T]
           [--fanouts 15,10] [--batch-size 1024] [--hidden 128] [--epochs 3] [--seed 0]
Each epoch is timed; the first is left out when there are more. Last stdout line: JSON
{"framework", "threads", "epoch_ms_median", "seeds_per_second", "steps", "sample_ms_median" (one
pass of the loader alone, no training), "sampled_edges_per_second", "peak_rss_bytes",
"test_accuracy" (the model after the last epoch, full-neighbourhood inference layer by layer)}.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_gcn import edges_without_loops  # noqa: E402
from pytorch_gcn import load_npz  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--framework", required=True, choices=("dgl", "pyg"))
    p.add_argument("--npz", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--fanouts", default="15,10")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


class Sage(torch.nn.Module):
    def __init__(self, conv, widths, dropout, graph_first):
        super().__init__()
        self.convs = torch.nn.ModuleList(conv(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.dropout = dropout
        self.graph_first = graph_first  # DGL's conv(graph, x); PyG's conv(x, edge_index)

    def forward(self, graphs, x):
        """graphs: per layer what its conv takes (DGL blocks, or PyG edge_index of each hop)."""
        for i, (conv, g) in enumerate(zip(self.convs, graphs)):
            x = F.dropout(x, self.dropout, self.training)
            x = conv(g, x) if self.graph_first else conv(x, g)
            if i + 1 < len(self.convs):
                x = F.relu(x)
        return x


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    fanouts = [int(f) for f in args.fanouts.split(",")]
    rows, cols, features, labels, num_classes, train, val, test = load_npz(args.npz)
    n = labels.shape[0]
    classes = num_classes or int(labels.max()) + 1
    edges = edges_without_loops(rows, cols)
    x_all = torch.from_numpy(features)
    y_all = torch.from_numpy(labels)
    train_t = torch.from_numpy(train)
    widths = [features.shape[1], args.hidden, classes]

    if args.framework == "dgl":
        import dgl
        from dgl.nn import SAGEConv
        graph = dgl.graph((edges[0], edges[1]), num_nodes=n)
        model = Sage(lambda a, b: SAGEConv(a, b, "mean"), widths, args.dropout, True)
        sampler = dgl.dataloading.NeighborSampler(list(reversed(fanouts)))

        def loader():
            return dgl.dataloading.DataLoader(graph, train_t, sampler, batch_size=args.batch_size,
                                              shuffle=True, drop_last=False, num_workers=0)

        def batches():
            for input_nodes, seeds, blocks in loader():
                yield input_nodes, seeds, blocks, sum(b.num_edges() for b in blocks)

        def layer_graphs(blocks):
            return blocks

        def full_graphs():
            return [graph] * len(widths[1:])
    else:
        from torch_geometric.data import Data
        from torch_geometric.loader import NeighborLoader
        from torch_geometric.nn import SAGEConv
        data = Data(x=x_all, y=y_all, edge_index=edges, num_nodes=n)
        model = Sage(lambda a, b: SAGEConv(a, b, aggr="mean"), widths, args.dropout, False)

        def batches():
            for batch in NeighborLoader(data, num_neighbors=fanouts, batch_size=args.batch_size,
                                        input_nodes=train_t, shuffle=True):
                seeds = batch.n_id[:batch.batch_size]
                yield batch.n_id, seeds, batch.edge_index, batch.edge_index.shape[1]

        def layer_graphs(edge_index):
            return [edge_index] * len(widths[1:])

        def full_graphs():
            return [edges] * len(widths[1:])

    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)

    # The loader alone: what sampling costs.
    start = time.perf_counter()
    sampled_edges = 0
    for _, _, _, m in batches():
        sampled_edges += m
    sample_s = time.perf_counter() - start

    epoch_ms, steps = [], 0
    for _ in range(args.epochs):
        model.train()
        start = time.perf_counter()
        steps = 0
        for input_nodes, seeds, graphs, _ in batches():
            x = x_all[input_nodes]
            if args.framework == "pyg":  # PyG's batch keeps every hop in one subgraph
                out = model(layer_graphs(graphs), x)[:seeds.shape[0]]
            else:
                out = model(layer_graphs(graphs), x)
            loss = F.cross_entropy(out, y_all[seeds])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            steps += 1
        epoch_ms.append(1e3 * (time.perf_counter() - start))
    timed = epoch_ms[1:] if len(epoch_ms) > 1 else epoch_ms
    median_ms = statistics.median(timed)

    model.eval()
    with torch.no_grad():
        logits = model(full_graphs(), x_all)
    test_t = torch.from_numpy(test)
    test_accuracy = (logits[test_t].argmax(dim=1) == y_all[test_t]).double().mean().item()
    print(json.dumps({
        "framework": args.framework, "threads": args.threads,
        "epoch_ms_median": median_ms,
        "seeds_per_second": len(train) / (median_ms / 1e3),
        "steps": steps,
        "sample_ms_median": 1e3 * sample_s,
        "sampled_edges_per_second": sampled_edges / sample_s,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "test_accuracy": test_accuracy,
    }))


if __name__ == "__main__":
    main()
