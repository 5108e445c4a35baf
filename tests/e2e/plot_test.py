#!/usr/bin/env python3
"""scripts/plot.py on reports tessera-train writes (1 and 2 ranks) and on a benchmark table:
every figure is a PNG, and a report or table without what a figure needs is refused naming it.

  plot_test.py PLOT TRAIN MPIEXEC
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

PLOT, TRAIN, MPIEXEC = sys.argv[1:4]
DATASET = "sbm:nodes=1500,classes=3,avg-degree=8,p-in=0.9,features=8,noise=0.5"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(*args, **kwargs):
    return subprocess.run(list(args), capture_output=True, text=True, check=False, **kwargs)


class Plots(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.one = os.path.join(cls.dir.name, "one.json")
        cls.two = os.path.join(cls.dir.name, "two.json")
        common = ["--dataset", DATASET, "--epochs", "8", "--threads", "1"]
        result = run(TRAIN, *common, "--report", cls.one)
        assert result.returncode == 0, result.stderr
        env = dict(os.environ, OMP_NUM_THREADS="1")
        result = run(MPIEXEC, "-np", "2", "--oversubscribe", "--bind-to", "none", TRAIN, *common,
                     "--report", cls.two, env=env)
        assert result.returncode == 0, result.stderr

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def plot(self, *args):
        return run(sys.executable, PLOT, *args)

    def expect_png(self, name, *args):
        out = os.path.join(self.dir.name, name)
        result = self.plot(*args, "-o", out)
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(out, "rb") as f:
            self.assertEqual(f.read(8), PNG_MAGIC)

    def test_curves_ranks_and_scaling(self):
        self.expect_png("curves.png", "curves", self.one, self.two)
        self.expect_png("ranks.png", "ranks", self.two)
        self.expect_png("scaling.png", "scaling", self.one, self.two)

    def test_bars_from_a_benchmark_table(self):
        table = os.path.join(self.dir.name, "table.md")
        with open(table, "w") as f:
            f.write("some text\n\n| graph | P | METIS volume | random volume |\n|---|---|---|---|\n"
                    "| slashdot | 4 | 79,424 | 141,553 |\n| 4elt | 4 | 355 | 38,156 |\n"
                    "| notes | - | — | — |\n")
        self.expect_png("bars.png", "bars", table, "--x", "graph",
                        "--y", "METIS volume,random volume", "--log")
        result = self.plot("bars", table, "--x", "graph", "--y", "hypergraph volume", "-o",
                           os.path.join(self.dir.name, "x.png"))
        self.assertEqual(result.returncode, 1)
        self.assertIn("no column 'hypergraph volume' (the table has: graph, P, METIS volume",
                      result.stderr)

    def test_a_report_without_epochs_is_refused_naming_it(self):
        bare = os.path.join(self.dir.name, "bare.json")
        with open(bare, "w") as f:
            json.dump({"config": {}}, f)
        result = self.plot("curves", bare, "-o", os.path.join(self.dir.name, "x.png"))
        self.assertEqual(result.returncode, 1)
        self.assertIn(f"{bare}: the report has no 'epochs'", result.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
