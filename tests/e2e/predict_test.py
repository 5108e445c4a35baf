#!/usr/bin/env python3
"""Using a trained model (issue 40), as a user runs it: tessera-train writes predictions and
embeddings and a checkpoint; tessera-predict on that checkpoint — in one process, on 2 ranks of a
partition store and on 3 ranks of an in-memory cut under a memory budget — writes the same arrays
(1e-5), whose predicted classes give the report's final test accuracy; a GraphSAGE trained on one
generated graph predicts on another of the same distribution; and what cannot work is refused
naming the problem; the exported weights compute the same logits in numpy, as the PyG layers
would (scripts/export_pyg.py, never run by the tests).

  predict_test.py TRAIN PREDICT PARTITION CONVERT MPIEXEC
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import scipy.sparse as sp

TRAIN, PREDICT, PARTITION, CONVERT, MPIEXEC = sys.argv[1:6]
DATASET = "sbm:nodes=3000,classes=4,avg-degree=8,p-in=0.4,features=16,noise=3"


def run(*args, ranks=1):
    command = list(args)
    if ranks > 1:
        command = [MPIEXEC, "-np", str(ranks), "--oversubscribe", "--bind-to", "none"] + command
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run(command, capture_output=True, text=True, check=False, env=env,
                          timeout=600)


class Predictions(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        result = run(TRAIN, "--dataset", DATASET, "--model", "sage", "--epochs", "30",
                     "--threads", "1", "--checkpoint-dir", cls.path("ck"), "--report",
                     cls.path("report.json"), "--predictions", cls.path("train.npz"),
                     "--embeddings", cls.path("train-emb.npy"))
        assert result.returncode == 0, result.stdout + result.stderr
        with open(cls.path("report.json")) as f:
            cls.report = json.load(f)
        result = run(PARTITION, "--dataset", DATASET, "--parts", "2", "--out", cls.path("store"))
        assert result.returncode == 0, result.stdout + result.stderr

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    @classmethod
    def path(cls, name):
        return os.path.join(cls.dir.name, name)

    def predict(self, name, *flags, ranks=1):
        result = run(PREDICT, "--checkpoint", self.path("ck"), "--threads", "1",
                     "--predictions", self.path(name + ".npz"),
                     "--embeddings", self.path(name + "-emb.npy"), *flags, ranks=ranks)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        return np.load(self.path(name + ".npz")), np.load(self.path(name + "-emb.npy")), result

    def test_the_training_runs_arrays_give_its_final_test_accuracy(self):
        p = np.load(self.path("train.npz"))
        self.assertEqual(sorted(p.keys()),
                         ["label", "logits", "node_id", "predicted", "probabilities"])
        self.assertEqual(p["probabilities"].shape, (3000, 4))
        self.assertEqual(p["probabilities"].dtype, np.float32)
        np.testing.assert_array_equal(p["node_id"], np.arange(3000))
        np.testing.assert_allclose(p["probabilities"].sum(axis=1), 1.0, atol=1e-5)
        np.testing.assert_array_equal(p["predicted"], p["logits"].argmax(axis=1))
        self.assertEqual(np.load(self.path("train-emb.npy")).shape, (3000, 16))

    def test_predict_on_one_two_and_three_ranks_gives_what_training_ended_with(self):
        trained = np.load(self.path("train.npz"))
        trained_emb = np.load(self.path("train-emb.npy"))
        runs = {
            "one process": self.predict("one"),
            "2 ranks of a store": self.predict("two", "--partition-dir", self.path("store"),
                                               ranks=2),
            "3 ranks under a budget": self.predict("three", "--device-memory", "1MiB",
                                                   "--chunk-size", "64KiB", ranks=3),
        }
        for how, (p, emb, _) in runs.items():
            with self.subTest(how):
                np.testing.assert_array_equal(p["node_id"], trained["node_id"])
                np.testing.assert_allclose(p["probabilities"], trained["probabilities"],
                                           atol=1e-5)
                np.testing.assert_allclose(p["logits"], trained["logits"], atol=1e-5,
                                           rtol=1e-5)
                np.testing.assert_allclose(emb, trained_emb, atol=1e-5, rtol=1e-5)

    def test_the_test_nodes_predictions_reproduce_the_reports_final_test_accuracy(self):
        p, _, result = self.predict("test", "--predict-nodes", "test", "--report",
                                    self.path("predict.json"))
        accuracy = float((p["predicted"] == p["label"]).mean())
        self.assertEqual(len(p["node_id"]), self.report["split"]["test"])
        self.assertTrue(np.all(np.diff(p["node_id"]) > 0), "rows in increasing node id")
        self.assertAlmostEqual(accuracy, self.report["metrics"]["final_test_accuracy"], places=6)
        with open(self.path("predict.json")) as f:
            predicted = json.load(f)
        self.assertAlmostEqual(predicted["metrics"]["test_accuracy"], accuracy, places=6)
        self.assertTrue(predicted["dataset"]["same_as_trained_on"])
        self.assertIn("the data it was trained on", result.stdout)

    def test_a_graphsage_predicts_on_another_graph_of_the_same_distribution(self):
        other = DATASET + ",structure-seed=11"
        result = run(PREDICT, "--checkpoint", self.path("ck"), "--dataset", other, "--threads",
                     "1", "--report", self.path("other.json"))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        with open(self.path("other.json")) as f:
            accuracy = json.load(f)["metrics"]["test_accuracy"]
        trained = self.report["metrics"]["final_test_accuracy"]
        print(f"GraphSAGE test accuracy {trained:.4f} on its graph, {accuracy:.4f} on another")
        self.assertGreaterEqual(accuracy, 0.9 * trained)

    def test_exported_weights_compute_tesseras_logits_in_numpy(self):
        weights = self.path("weights.npz")
        p, _, _ = self.predict("export", "--export-weights", weights)
        result = run(CONVERT, "--dataset", DATASET, "--out", self.path("graph.npz"))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        w = np.load(weights)
        meta = json.loads(w["tessera_model"].tobytes())
        self.assertEqual(meta["model_name"], "GraphSAGE")
        self.assertEqual(meta["layer_sizes"], [16, 16, 4])
        self.assertEqual(sorted(k for k in w.keys() if k != "tessera_model"),
                         ["sage0.bias", "sage0.neighbour", "sage0.self", "sage1.bias",
                          "sage1.neighbour", "sage1.self"])
        g = np.load(self.path("graph.npz"))
        n = len(g["adj_indptr"]) - 1
        a = sp.csr_matrix((np.ones(len(g["adj_indices"])), g["adj_indices"], g["adj_indptr"]),
                          shape=(n, n))
        degree = np.asarray(a.sum(axis=1)).ravel()
        mean = sp.diags(np.divide(1.0, degree, out=np.zeros(n), where=degree > 0)) @ a
        h = g["features"].astype(np.float64)
        for layer in range(2):
            h = (h @ w[f"sage{layer}.self"] + (mean @ h) @ w[f"sage{layer}.neighbour"]
                 + w[f"sage{layer}.bias"])
            if layer == 0:
                h = np.maximum(h, 0.0)
        np.testing.assert_allclose(h, p["logits"], atol=1e-4, rtol=1e-4)

    def test_what_cannot_work_is_refused_naming_the_problem(self):
        cases = {
            "another feature width": (["--dataset", "sbm:nodes=500,classes=4,features=20"],
                                      "reads 16 input features per node"),
            "another class count": (["--dataset", "sbm:nodes=500,classes=3,features=16"],
                                    "predicts 4 classes"),
            "not a numpy file": (["--predictions", self.path("p.csv")],
                                 "expects a file ending in .npy"),
            "a layer the model lacks": (["--embeddings", self.path("e.npy"),
                                         "--embedding-layer", "2"], "1 hidden layer(s)"),
            "weights not in an npz": (["--export-weights", self.path("w.npy")],
                                      "expects a file ending in .npz"),
        }
        for how, (flags, message) in cases.items():
            with self.subTest(how):
                result = run(PREDICT, "--checkpoint", self.path("ck"), *flags)
                self.assertNotEqual(result.returncode, 0)
                self.assertIn(message, result.stderr)
                self.assertNotIn("Traceback", result.stderr)
        for how, (flags, message) in {
                "no checkpoint": (["--checkpoint", self.path("none")], "does not exist"),
                "a training run's flag": (["--checkpoint", self.path("ck"), "--epochs", "3"],
                                          "--epochs"),
                "an embedding layer alone": (["--checkpoint", self.path("ck"),
                                              "--embedding-layer", "1"], "--embeddings")}.items():
            with self.subTest(how):
                result = run(PREDICT, *flags)
                self.assertNotEqual(result.returncode, 0)
                self.assertIn(message, result.stderr)
                self.assertNotIn("Traceback", result.stderr)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
