#!/usr/bin/env python3
"""Loads weights Tessera exported (tessera-train or tessera-predict --export-weights W.npz) into
the equivalent PyTorch Geometric model — stock GCNConv, SAGEConv, GINConv or GATConv layers (fp32)
— runs it on the graph, and compares its logits with Tessera's (--predictions P.npz of the same
weights). Exit status 0 when every logit agrees within --tolerance, 1 otherwise.

  scripts/export_pyg.py --weights W.npz --graph G.npz [--predictions P.npz] [--tolerance 1e-5]
                        [--save-logits OUT.npy]

G.npz is the graph as `tessera-convert --dataset NAME --out G.npz` writes it (adj_*, attr_* or
features). Needs torch and torch_geometric (PyG 2.3: a venv over Debian's python3-torch, see
docs/guide/inference.md); the weights file alone is read with numpy.
"""

import argparse
import json
import sys

import numpy as np


def load_graph(path):
    """edge_index (int64 [2, E], as stored: both directions), features (float32 [N, F])."""
    g = np.load(path)
    indptr, indices = g["adj_indptr"], g["adj_indices"]
    rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    edge_index = np.stack([indices, rows]).astype(np.int64)  # source -> target (row)
    if "features" in g:
        x = g["features"].astype(np.float32)
    else:
        n, f = g["attr_shape"]
        x = np.zeros((n, f), dtype=np.float32)
        a_ptr, a_idx, a_val = g["attr_indptr"], g["attr_indices"], g["attr_data"]
        a_rows = np.repeat(np.arange(n), np.diff(a_ptr))
        x[a_rows, a_idx] = a_val
    return edge_index, x


def row_normalize(x):
    sums = x.sum(axis=1, keepdims=True)
    return np.divide(x, sums, out=np.zeros_like(x), where=sums != 0)


def build(weights, meta):
    """The PyG model of `meta` with `weights`, and its forward(x, edge_index)."""
    import torch
    from torch_geometric.nn import GATConv, GCNConv, GINConv, SAGEConv

    name, sizes, cfg = meta["model_name"], meta["layer_sizes"], meta["model"]
    t = lambda key: torch.from_numpy(np.ascontiguousarray(weights[key]))
    layers, activation = [], torch.relu
    for i in range(len(sizes) - 1):
        last = i + 2 == len(sizes)
        if name == "GCN":
            conv = GCNConv(sizes[i], sizes[i + 1], bias=cfg["bias"])
            conv.lin.weight.data = t(f"conv{i}.weight").T.contiguous()
            if cfg["bias"]:
                conv.bias.data = t(f"conv{i}.bias").reshape(-1)
        elif name == "GraphSAGE":
            conv = SAGEConv(sizes[i], sizes[i + 1], aggr="mean", bias=cfg["bias"])
            conv.lin_l.weight.data = t(f"sage{i}.neighbour").T.contiguous()
            conv.lin_r.weight.data = t(f"sage{i}.self").T.contiguous()
            if cfg["bias"]:
                conv.lin_l.bias.data = t(f"sage{i}.bias").reshape(-1)
        elif name == "GIN":
            # Tessera's first GIN layer runs its Linear before the aggregation (the same
            # function): its weight is linear0's, its bias gin0's.
            # GINConv resets its nn's parameters when made: the weights go in after.
            bias_key = f"gin{i}.bias" if i == 0 else f"linear{i}.bias"
            conv = GINConv(torch.nn.Linear(sizes[i], sizes[i + 1], bias=bias_key in weights),
                           train_eps=True)
            conv.nn.weight.data = t(f"linear{i}.weight").T.contiguous()
            if bias_key in weights:
                conv.nn.bias.data = t(bias_key).reshape(-1)
            conv.eps.data = t(f"gin{i}.epsilon").reshape(-1)
        elif name == "GAT":
            heads = cfg["output_heads"] if last else cfg["heads"]
            width = sizes[i + 1]
            in_width = sizes[i] if i == 0 else cfg["heads"] * sizes[i]
            conv = GATConv(in_width, width, heads=heads, concat=not last,
                           negative_slope=cfg["negative_slope"], bias=cfg["bias"])
            conv.lin_src.weight.data = t(f"gat{i}.weight").T.contiguous()
            conv.att_src.data = t(f"gat{i}.att_src").reshape(1, heads, width)
            conv.att_dst.data = t(f"gat{i}.att_dst").reshape(1, heads, width)
            if cfg["bias"]:
                conv.bias.data = t(f"gat{i}.bias").reshape(-1)
            activation = torch.nn.functional.elu
        else:
            sys.exit(f"export_pyg.py: model '{name}' has no stock PyG equivalent here "
                     "(GCN, GraphSAGE, GIN and GAT do)")
        layers.append(conv)

    def forward(x, edge_index):
        with torch.no_grad():
            for i, conv in enumerate(layers):
                x = conv(x, edge_index)
                if i + 1 < len(layers):
                    x = activation(x)
        return x

    return forward


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", required=True)
    parser.add_argument("--graph", required=True)
    parser.add_argument("--predictions")
    parser.add_argument("--tolerance", type=float, default=1e-5)
    parser.add_argument("--save-logits")
    args = parser.parse_args()

    weights = dict(np.load(args.weights))
    if "tessera_model" not in weights:
        sys.exit(f"export_pyg.py: {args.weights} holds no 'tessera_model': not an export of "
                 "Tessera's --export-weights")
    meta = json.loads(weights.pop("tessera_model").tobytes())
    import torch
    torch.set_num_threads(1)
    edge_index, x = load_graph(args.graph)
    if meta.get("row_normalize_features"):
        x = row_normalize(x)
    forward = build(weights, meta)
    logits = forward(torch.from_numpy(x), torch.from_numpy(edge_index)).numpy()
    print(f"{meta['model_name']} {'-'.join(map(str, meta['layer_sizes']))} in PyG: logits "
          f"{logits.shape}")
    if args.save_logits:
        np.save(args.save_logits, logits)
    if args.predictions:
        p = np.load(args.predictions)
        theirs = p["logits"]
        ours = logits[p["node_id"]]
        diff = np.abs(ours - theirs)
        scale = np.maximum(np.abs(theirs), 1.0)
        worst = float((diff / scale).max())
        agree = float((ours.argmax(1) == p["predicted"]).mean())
        print(f"max |PyG - Tessera| = {diff.max():.3g} ({worst:.3g} relative to max(|logit|, 1)); "
              f"predicted classes agree on {100 * agree:.2f}% of {len(theirs)} nodes")
        if worst > args.tolerance:
            print(f"export_pyg.py: logits differ by more than {args.tolerance:g}",
                  file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
