#!/usr/bin/env python3
"""PyG's graph autoencoder (examples/autoencoder.py: GAE with a GCNEncoder of GCNConv(in, 2·d)
-> ReLU -> GCNConv(2·d, d), recon_loss with negative_sampling, Adam) on the edge splits Tessera
drew and recorded (tessera-train --task link --link-split-out FILE.npz), for the side-by-side
link-prediction comparison: the same held-out edges and negatives, each seed's split its own.

Usage: python scripts/bench/peer_gae.py --npz GRAPH.npz --splits S0.npz S1.npz ...
           [--epochs 200] [--eval-every 10] [--out 16] [--lr 0.01] [--threads 1]
           [--no-normalize] [--mode accuracy|timing] [--warmup 3]

GRAPH.npz: the graph as tessera-convert writes it (pytorch_gcn.py's layouts). Features are
row-normalized (NormalizeFeatures, as the PyG example) unless --no-normalize. For each split:
trains --epochs epochs on its train_pos edges (message passing and positives), evaluates the
validation and test ROC-AUC and AP (PyG's GAE.test: scikit-learn) every --eval-every epochs and
keeps the test metrics at the first epoch of best validation ROC-AUC, as Tessera selects.
Last stdout line: JSON {"framework": "pyg-gae", "seeds", "test_roc_auc_mean", "test_roc_auc_std",
"test_ap_mean", "test_ap_std", "per_seed": [[auc, ap], ...]} (population std).
--mode timing: the first split only, no evaluation; each epoch (encode, recon_loss with its
negative sampling, backward, step) timed, the first --warmup left out. Last stdout line: JSON
{"framework", "epoch_ms_median", "peak_rss_bytes", "threads"} (peak RSS: the process's, data
loading included).
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_gcn import load_npz, row_normalize  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--npz", required=True)
    p.add_argument("--splits", nargs="+", required=True)
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--eval-every", type=int, default=10)
    p.add_argument("--out", type=int, default=16)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--no-normalize", action="store_true")
    p.add_argument("--mode", choices=("accuracy", "timing"), default="accuracy")
    p.add_argument("--warmup", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    from torch_geometric.nn import GAE, GCNConv

    _, _, features, *_ = load_npz(args.npz)
    if not args.no_normalize:
        features = row_normalize(features)
    x = torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32))

    class GCNEncoder(torch.nn.Module):
        def __init__(self, in_channels, out_channels):
            super().__init__()
            self.conv1 = GCNConv(in_channels, 2 * out_channels, cached=True)
            self.conv2 = GCNConv(2 * out_channels, out_channels, cached=True)

        def forward(self, x, edge_index):
            return self.conv2(self.conv1(x, edge_index).relu(), edge_index)

    if args.mode == "timing":
        torch.manual_seed(0)
        train_pos = torch.from_numpy(np.load(args.splits[0])["train_pos"].astype(np.int64))
        edge_index = torch.cat([train_pos, train_pos.flip(0)], dim=1)
        model = GAE(GCNEncoder(x.shape[1], args.out))
        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
        epoch_ms = []
        for epoch in range(args.epochs):
            start = time.perf_counter()
            model.train()
            optimizer.zero_grad()
            loss = model.recon_loss(model.encode(x, edge_index), train_pos)
            loss.backward()
            optimizer.step()
            if epoch >= args.warmup:
                epoch_ms.append(1e3 * (time.perf_counter() - start))
        print(json.dumps({"framework": "pyg-gae", "epoch_ms_median": statistics.median(epoch_ms),
                          "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                          * 1024, "threads": args.threads, "loss": float(loss)}))
        return

    per_seed = []
    for seed, path in enumerate(args.splits):
        torch.manual_seed(seed)
        s = {k: torch.from_numpy(v.astype(np.int64)) for k, v in np.load(path).items()}
        train_pos = s["train_pos"]
        edge_index = torch.cat([train_pos, train_pos.flip(0)], dim=1)
        model = GAE(GCNEncoder(x.shape[1], args.out))
        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
        best_val, result = -1.0, None
        for epoch in range(1, args.epochs + 1):
            model.train()
            optimizer.zero_grad()
            z = model.encode(x, edge_index)
            loss = model.recon_loss(z, train_pos)
            loss.backward()
            optimizer.step()
            if epoch % args.eval_every == 0 or epoch == args.epochs:
                model.eval()
                with torch.no_grad():
                    z = model.encode(x, edge_index)
                    val_auc, _ = model.test(z, s["val_pos"], s["val_neg"])
                    test_auc, test_ap = model.test(z, s["test_pos"], s["test_neg"])
                if val_auc > best_val:
                    best_val, result = val_auc, (float(test_auc), float(test_ap))
        per_seed.append(result)
        print(f"split {path}: test ROC-AUC {result[0]:.4f}, AP {result[1]:.4f}", flush=True)
    aucs = [r[0] for r in per_seed]
    aps = [r[1] for r in per_seed]
    print(json.dumps({"framework": "pyg-gae", "seeds": len(per_seed),
                      "test_roc_auc_mean": statistics.mean(aucs),
                      "test_roc_auc_std": statistics.pstdev(aucs),
                      "test_ap_mean": statistics.mean(aps), "test_ap_std": statistics.pstdev(aps),
                      "per_seed": per_seed}))


if __name__ == "__main__":
    main()
