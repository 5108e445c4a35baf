#!/usr/bin/env python3
"""Figures from Tessera's --report JSON files and benchmark tables (matplotlib from Debian's
python3-matplotlib). Each command writes one PNG.

  plot.py curves REPORT.json [REPORT.json ...] -o curves.png
      training curves: loss and train / validation / test accuracy (or ROC-AUC) per epoch,
      one column per report
  plot.py ranks REPORT.json -o ranks.png
      per-rank epoch split into compute, communication and waiting for halos (stacked bars)
  plot.py scaling REPORT.json [REPORT.json ...] -o scaling.png
      median epoch time against the number of ranks (one report per run), with ideal scaling
  plot.py partition LOG [LOG ...] -o partition.png
      partition quality: each method's total halo volume against random's, by graph and P,
      from the output of tessera-partition --compare (one log per graph and P)
  plot.py bars TABLE.md --x COLUMN[,COLUMN] --y COLUMN[,COLUMN...] [--log] [--title T] -o bars.png
      grouped bars from a Markdown table a benchmark printed (the peer comparison, offload cost
      against budget, ...): one group per row, labelled by the --x columns, one bar per --y
      column; the first number in each cell is plotted ("12.3 ms,
      400 MiB" plots 12.3). Rows whose --y cells hold no number are skipped.

Errors (a missing file, a report without the fields a plot needs, a column that is not in the
table) are one line naming the file and what is missing, with exit status 1.
"""

import argparse
import json
import os
import re
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError as missing:
    sys.exit(f"plot.py: needs matplotlib ({missing}); on Debian: apt-get install "
             "python3-matplotlib, and run it with /usr/bin/python3")


class PlotError(Exception):
    pass


def read_report(path):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise PlotError(f"{path}: cannot read: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise PlotError(f"{path}: not JSON: {e}") from e


def need(report, path, dotted):
    value = report
    for key in dotted.split("."):
        if not isinstance(value, dict) or key not in value:
            raise PlotError(f"{path}: the report has no '{dotted}' (run tessera-train with --report)")
        value = value[key]
    return value


def label_of(report, path):
    config = report.get("config", {})
    ranks = report.get("distributed", {}).get("ranks", 1)
    return f"{config.get('dataset') or os.path.basename(path)}, {ranks} rank{'s' if ranks != 1 else ''}"


def save(figure, out):
    figure.tight_layout()
    figure.savefig(out, dpi=110)
    plt.close(figure)
    print(f"wrote {out}")


def plot_curves(paths, out):
    reports = [(p, read_report(p)) for p in paths]
    figure, axes = plt.subplots(2, len(reports), figsize=(5 * len(reports), 6), squeeze=False)
    for column, (path, report) in enumerate(reports):
        epochs = need(report, path, "epochs")
        x = [e["epoch"] for e in epochs]
        loss_axis, metric_axis = axes[0][column], axes[1][column]
        loss_axis.plot(x, [e["loss"] for e in epochs], label="training loss")
        if all("val_loss" in e for e in epochs):
            loss_axis.plot(x, [e["val_loss"] for e in epochs], label="validation loss")
        loss_axis.set_title(label_of(report, path))
        loss_axis.set_xlabel("epoch")
        loss_axis.legend()
        auc = all("val_roc_auc" in e for e in epochs)
        keys = (("val_roc_auc", "validation ROC-AUC"), ("test_roc_auc", "test ROC-AUC")) if auc \
            else (("train_accuracy", "train"), ("val_accuracy", "validation"), ("test_accuracy", "test"))
        for key, name in keys:
            metric_axis.plot(x, [e.get(key, float("nan")) for e in epochs], label=name)
        metric_axis.set_xlabel("epoch")
        metric_axis.set_ylabel("ROC-AUC" if auc else "accuracy")
        best = report.get("metrics", {}).get("best_epoch")
        if best:
            metric_axis.axvline(best, color="grey", linestyle=":", label=f"best epoch {best}")
        metric_axis.legend()
    save(figure, out)


def plot_ranks(path, out):
    report = read_report(path)
    parts = [("compute", "timing.compute_ms.per_rank"), ("communication", "timing.comm_ms.per_rank"),
             ("waiting for halos", "timing.wait_ms.per_rank")]
    values = [(name, need(report, path, key)) for name, key in parts]
    ranks = list(range(len(values[0][1])))
    figure, axis = plt.subplots(figsize=(1.2 * len(ranks) + 3, 4))
    bottom = [0.0] * len(ranks)
    for name, per_rank in values:
        axis.bar(ranks, per_rank, bottom=bottom, label=name)
        bottom = [b + v for b, v in zip(bottom, per_rank)]
    axis.set_xticks(ranks)
    axis.set_xlabel("rank")
    axis.set_ylabel("ms per training epoch (median)")
    axis.set_title(label_of(report, path))
    axis.legend()
    save(figure, out)


def plot_scaling(paths, out):
    points = []
    for path in paths:
        report = read_report(path)
        points.append((need(report, path, "distributed.ranks"),
                       need(report, path, "timing.epoch_ms_median")))
    points.sort()
    figure, axis = plt.subplots(figsize=(5, 4))
    ranks = [p[0] for p in points]
    axis.plot(ranks, [p[1] for p in points], "o-", label="measured")
    axis.plot(ranks, [points[0][1] * points[0][0] / r for r in ranks], "--", color="grey",
              label="ideal")
    axis.set_xscale("log", base=2)
    axis.set_xticks(ranks, [str(r) for r in ranks])
    axis.set_xlabel("ranks")
    axis.set_ylabel("median epoch (ms)")
    axis.set_title(label_of(read_report(paths[0]), paths[0]).rsplit(",", 1)[0])
    axis.legend()
    save(figure, out)


NUMBER = re.compile(r"[-+]?\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?")


def first_number(cell):
    match = NUMBER.search(cell.replace("**", ""))
    return float(match.group(0).replace(",", "")) if match else None


def read_table(path):
    """The first Markdown table in the file: (header, rows of cells)."""
    try:
        with open(path) as f:
            lines = [line.strip() for line in f]
    except OSError as e:
        raise PlotError(f"{path}: cannot read: {e.strerror}") from e
    table = []
    for line in lines:
        if line.startswith("|"):
            table.append([cell.strip() for cell in line.strip("|").split("|")])
        elif table:
            break
    if len(table) < 3 or not set("".join(table[1])) <= set("-: "):
        raise PlotError(f"{path}: no Markdown table (a header row, a |---| row, then rows)")
    return table[0], table[2:]


def plot_partition(paths, out):
    """Bars of total volume / random's per method, one group per (graph, P)."""
    groups, ratios = [], {}
    for path in paths:
        try:
            with open(path) as f:
                lines = f.read().splitlines()
        except OSError as e:
            raise PlotError(f"{path}: cannot read: {e.strerror}") from e
        graph = next((l.split(":")[0] for l in lines if " nodes, " in l), os.path.basename(path))
        parts = next((l.split(",")[0].split("=")[1].strip() for l in lines if l.startswith("P = ")),
                     None)
        header = next((l for l in lines if l.startswith("method") and "total vol" in l), None)
        if parts is None or header is None:
            raise PlotError(f"{path}: not the output of tessera-partition --compare "
                            "(no 'P = ' line or method table)")
        # Columns are right-aligned: a row's volume is the field ending where "total vol" ends.
        end = header.index("total vol") + len("total vol")
        volumes = {}
        for line in lines[lines.index(header) + 1:]:
            fields = {m.end(): m.group(0) for m in re.finditer(r"\S+", line)}
            if end not in fields or first_number(fields[end]) is None:
                break
            volumes[line.split()[0]] = float(fields[end])
        if "random" not in volumes:
            raise PlotError(f"{path}: the table has no random row to compare against")
        groups.append(f"{graph}\nP = {parts}")
        for method, volume in volumes.items():
            if method != "random":
                ratios.setdefault(method, {})[len(groups) - 1] = volume / volumes["random"]
    width = 0.8 / max(1, len(ratios))
    figure, axis = plt.subplots(figsize=(max(5, 1.6 * len(groups) + 2), 4))
    for k, (method, by_group) in enumerate(ratios.items()):
        axis.bar([g + k * width - 0.4 + width / 2 for g in range(len(groups))],
                 [by_group.get(g, 0.0) for g in range(len(groups))], width, label=method)
    axis.axhline(1.0, color="grey", linestyle=":")
    axis.set_xticks(range(len(groups)), groups)
    axis.set_ylabel("total halo volume / random's")
    axis.set_title("partition quality")
    axis.legend(fontsize="small")
    save(figure, out)


def plot_bars(path, xs, ys, log, title, out):
    header, rows = read_table(path)
    for column in xs + ys:
        if column not in header:
            raise PlotError(f"{path}: no column '{column}' (the table has: {', '.join(header)})")
    xis, yis = [header.index(x) for x in xs], [header.index(y) for y in ys]
    groups, series = [], [[] for _ in ys]
    for row in rows:
        values = [first_number(row[i]) if i < len(row) else None for i in yis]
        if all(v is None for v in values):
            continue
        groups.append(" ".join(row[i] for i in xis if i < len(row)))
        for s, v in zip(series, values):
            s.append(v if v is not None else float("nan"))  # not drawn
    if not groups:
        raise PlotError(f"{path}: no row has a number under {', '.join(ys)}")
    width = 0.8 / len(ys)
    figure, axis = plt.subplots(figsize=(min(12, max(5, 0.35 * len(groups) * len(ys) + 2)), 4))
    for k, (name, values) in enumerate(zip(ys, series)):
        axis.bar([g + k * width - 0.4 + width / 2 for g in range(len(groups))], values, width,
                 label=name)
    axis.set_xticks(range(len(groups)), groups, rotation=30, ha="right")
    if log:
        axis.set_yscale("log")
    axis.set_title(title or os.path.basename(path))
    axis.legend()
    save(figure, out)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("curves", "scaling", "partition"):
        p = commands.add_parser(name)
        p.add_argument("reports", nargs="+")
        p.add_argument("-o", "--out", required=True)
    p = commands.add_parser("ranks")
    p.add_argument("report")
    p.add_argument("-o", "--out", required=True)
    p = commands.add_parser("bars")
    p.add_argument("table")
    p.add_argument("--x", required=True)
    p.add_argument("--y", required=True, help="comma-separated columns")
    p.add_argument("--log", action="store_true")
    p.add_argument("--title")
    p.add_argument("-o", "--out", required=True)
    args = parser.parse_args(argv)
    if not args.out.endswith(".png"):
        parser.error(f"the output must be a .png file, got '{args.out}'")
    try:
        if args.command == "curves":
            plot_curves(args.reports, args.out)
        elif args.command == "ranks":
            plot_ranks(args.report, args.out)
        elif args.command == "scaling":
            plot_scaling(args.reports, args.out)
        elif args.command == "partition":
            plot_partition(args.reports, args.out)
        else:
            plot_bars(args.table, [x.strip() for x in args.x.split(",")],
                      [y.strip() for y in args.y.split(",")], args.log, args.title, args.out)
    except PlotError as e:
        print(f"plot.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
