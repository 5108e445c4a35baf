#!/usr/bin/env python3
"""scripts/convert_dataset.py: pickled npz files and raw Planetoid files become npz files that
Tessera loads, with the arrays they held; Tessera's own error names the converter; a pickle that
names anything but arrays, sparse matrices and containers is refused without running it.

  convert_dataset_test.py CONVERTER TESSERA_CONVERT DATA_DIR
"""

import collections
import io
import os
import pickle
import shlex
import subprocess
import sys
import tempfile
import unittest
import warnings
import zipfile

import numpy as np
import scipy.sparse as sp

CONVERTER, TESSERA_CONVERT, DATA_DIR = sys.argv[1:4]


def run(*args):
    return subprocess.run([*args], capture_output=True, text=True, check=False)


def convert(*args):
    return run(sys.executable, CONVERTER, *args)


def tessera_loads(path):
    """What tessera-convert prints for npz:PATH (it loads, then writes an npz)."""
    result = run(TESSERA_CONVERT, "--dataset", f"npz:{path}", "--out", path + ".back.npz",
                 "--force")
    if result.returncode != 0:
        raise AssertionError(f"tessera-convert failed on {path}: {result.stderr}")
    return result.stdout


def symmetric(adjacency):
    a = sp.csr_matrix(((adjacency + adjacency.T) > 0).astype(np.float32))
    a = sp.csr_matrix(a - sp.diags(a.diagonal()))
    a.eliminate_zeros()
    a.sort_indices()
    return a


def save_pickle(path, value, protocol=2):
    with open(path, "wb") as f:
        pickle.dump(value, f, protocol=protocol)


class Calls:
    """Pickles as the call function(*args): what a crafted pickle makes plain unpickling run."""

    def __init__(self, function, *args):
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


def pickled_name(function):
    return f"{function.__module__}.{function.__name__}"  # os.system is posix.system on Linux


def rewrite_members(path, out, replacements):
    """A copy of the npz at `path` with byte strings of its members replaced."""
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(out, "w") as copy:
        for name in source.namelist():
            member = source.read(name)
            for old, new in replacements.items():
                member = member.replace(old, new)
            copy.writestr(name, member)


class PickledNpz(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        rng = np.random.default_rng(3)
        self.n = 30
        self.adjacency = sp.random(self.n, self.n, density=0.1, random_state=4, format="csr")
        self.adjacency.data[:] = 1
        self.features = sp.random(self.n, 12, density=0.2, random_state=5, format="csr",
                                  dtype=np.float32)
        self.labels = rng.integers(0, 3, self.n)
        self.path = os.path.join(self.dir.name, "pickled.npz")
        np.savez(self.path, adj_matrix=self.adjacency, node_attr=self.features,
                 node_label=self.labels, idx_train=np.array([4, 1, 2]), idx_val=np.array([5]),
                 idx_test=np.arange(10, 20))

    def tearDown(self):
        self.dir.cleanup()

    def test_tessera_names_the_converter(self):
        result = run(TESSERA_CONVERT, "--dataset", f"npz:{self.path}", "--out",
                     os.path.join(self.dir.name, "x.npz"))
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("pickled Python objects", result.stderr)
        self.assertIn(f"scripts/convert_dataset.py npz {self.path}", result.stderr)

    def test_converted_file_holds_the_arrays_and_loads(self):
        out = os.path.join(self.dir.name, "out.npz")
        result = convert("npz", self.path, out)
        self.assertEqual(result.returncode, 0, result.stderr)
        got = np.load(out, allow_pickle=False)
        a = sp.csr_matrix((np.ones(len(got["adj_indices"])), got["adj_indices"], got["adj_indptr"]),
                          shape=tuple(got["adj_shape"]))
        self.assertEqual((a != self.adjacency).nnz, 0)
        x = sp.csr_matrix((got["attr_data"], got["attr_indices"], got["attr_indptr"]),
                          shape=tuple(got["attr_shape"]))
        np.testing.assert_array_equal(x.toarray(), self.features.toarray())
        np.testing.assert_array_equal(got["labels"], self.labels)
        np.testing.assert_array_equal(got["train_idx"], [1, 2, 4])
        np.testing.assert_array_equal(got["test_idx"], np.arange(10, 20))
        printed = tessera_loads(out)
        self.assertIn(f"{self.n} nodes", printed)
        self.assertIn(f"{symmetric(self.adjacency).nnz // 2} undirected edges", printed)
        self.assertIn("split 3/1/10", printed)

    def test_one_hot_labels_and_masks(self):
        one_hot = np.eye(3)[self.labels]
        one_hot[7] = 0  # no class: unlabelled
        mask = np.zeros(self.n, bool)
        mask[[0, 3]] = True
        path = os.path.join(self.dir.name, "onehot.npz")
        np.savez(path, adj_matrix=self.adjacency, attr_matrix=self.features.toarray(),
                 labels=one_hot, train_mask=mask)
        out = os.path.join(self.dir.name, "onehot_out.npz")
        self.assertEqual(convert("npz", path, out).returncode, 0)
        got = np.load(out)
        expected = self.labels.copy()
        expected[7] = -1
        np.testing.assert_array_equal(got["labels"], expected)
        np.testing.assert_array_equal(got["train_idx"], [0, 3])
        self.assertEqual(got["features"].shape, (self.n, 12))

    def test_missing_adjacency_is_named(self):
        path = os.path.join(self.dir.name, "noadj.npz")
        np.savez(path, node_attr=self.features)
        result = convert("npz", path, os.path.join(self.dir.name, "o.npz"))
        self.assertEqual(result.returncode, 1)
        self.assertIn("noadj.npz: no adjacency", result.stderr)

    def test_out_of_range_split_id_is_named(self):
        path = os.path.join(self.dir.name, "badsplit.npz")
        np.savez(path, adj_matrix=self.adjacency, idx_train=np.array([1, 99]))
        result = convert("npz", path, os.path.join(self.dir.name, "o.npz"))
        self.assertEqual(result.returncode, 1)
        self.assertIn("array 'idx_train': node id 99 outside 0..29", result.stderr)

    def test_only_arrays_sparse_matrices_and_containers_are_unpickled(self):
        marker = os.path.join(self.dir.name, "ran")
        for function, *args in ((os.system, f"touch {shlex.quote(marker)}"),
                                (subprocess.call, ["touch", marker]),
                                (eval, f"open({marker!r}, 'w')"), (exec, f"open({marker!r}, 'w')"),
                                (getattr, "", "join"), (__import__, "shutil")):
            with self.subTest(pickled_name(function)):
                path = os.path.join(self.dir.name, "evil.npz")
                np.savez(path, adj_matrix=self.adjacency,
                         labels=np.array(Calls(function, *args), dtype=object))

                result = convert("npz", path, os.path.join(self.dir.name, "o.npz"))

                self.assertEqual(result.returncode, 1, result.stderr)
                self.assertIn(f"{path}: array 'labels' pickles the class "
                              f"'{pickled_name(function)}'", result.stderr)
                self.assertFalse(os.path.exists(marker))

    def test_pickles_of_numpy_2_and_scipy_before_1_8_convert(self):
        # numpy 2 names numpy._core.multiarray, scipy before 1.8 scipy.sparse.csr: the same arrays.
        path = os.path.join(self.dir.name, "other_versions.npz")
        rewrite_members(self.path, path, {b"numpy.core.": b"numpy._core.",
                                          b"scipy.sparse._csr\n": b"scipy.sparse.csr\n"})
        out, expected = (os.path.join(self.dir.name, f) for f in ("other.npz", "expected.npz"))

        result = convert("npz", path, out)

        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(convert("npz", self.path, expected).returncode, 0)
        got, want = np.load(out), np.load(expected)
        self.assertEqual(sorted(got.files), sorted(want.files))
        for key in want.files:
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)

    def test_two_members_of_one_name_are_refused(self):
        path = os.path.join(self.dir.name, "twice.npz")
        np.savez(path, adj_matrix=self.adjacency.toarray(), labels=self.labels)
        other = io.BytesIO()
        np.save(other, np.zeros(self.n, dtype=np.int64))
        with zipfile.ZipFile(path, "a") as archive, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zipfile warns that it writes a duplicate name
            archive.writestr("labels.npy", other.getvalue())

        result = convert("npz", path, os.path.join(self.dir.name, "o.npz"))

        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn(f"{path}: members 'labels.npy' and 'labels.npy' both hold array 'labels'",
                      result.stderr)

    def test_a_planted_link_is_not_followed(self):
        target = os.path.join(self.dir.name, "victim")
        with open(target, "w") as f:
            f.write("keep")
        link = os.path.join(self.dir.name, "link.npz")
        os.symlink(target, link)
        result = convert("npz", self.path, link)
        self.assertEqual(result.returncode, 1)
        self.assertIn("not a regular file", result.stderr)
        with open(target) as f:
            self.assertEqual(f.read(), "keep")


def write_planetoid(folder, name, features, labels, graph, num_train, test_ids, protocol=2):
    """The ind.NAME.* files of a dataset: allx/ally the rows of nodes below min(test_ids) in order,
    tx/ty the rows of test_ids in the order given, x/y the first num_train rows."""
    known = int(min(test_ids))
    prefix = os.path.join(folder, f"ind.{name}")
    one_hot = np.eye(labels.max() + 1)[labels]
    for suffix, value in ((".x", sp.csr_matrix(features[:num_train])), (".y", one_hot[:num_train]),
                          (".allx", sp.csr_matrix(features[:known])), (".ally", one_hot[:known]),
                          (".tx", sp.csr_matrix(features[test_ids])), (".ty", one_hot[test_ids]),
                          (".graph", graph)):
        save_pickle(prefix + suffix, value, protocol)
    with open(prefix + ".test.index", "w") as f:
        f.write("".join(f"{i}\n" for i in test_ids))
    return prefix


class RawPlanetoid(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def test_tessera_names_the_converter(self):
        path = os.path.join(self.dir.name, "ind.cora.x")
        save_pickle(path, sp.csr_matrix(np.eye(2)))
        result = run(TESSERA_CONVERT, "--dataset", f"planetoid:{path}", "--out",
                     os.path.join(self.dir.name, "x.npz"))
        self.assertEqual(result.returncode, 1)
        self.assertIn(f"scripts/convert_dataset.py planetoid {path}", result.stderr)

    def test_isolated_test_ids_get_zero_rows_and_no_label(self):
        # 530 nodes; test ids 520..529 listed shuffled, 525 missing (citeseer's isolated nodes).
        n, rng = 530, np.random.default_rng(7)
        features = (rng.random((n, 6)) < 0.3).astype(np.float32)
        labels = rng.integers(0, 4, n)
        graph = {i: [(i + 1) % n, (i + 7) % n] for i in range(n)}
        test_ids = np.array([523, 520, 529, 521, 527, 522, 524, 526, 528])
        write_planetoid(self.dir.name, "toy", features, labels, graph, 10, test_ids)
        out = os.path.join(self.dir.name, "toy.npz")
        result = convert("planetoid", self.dir.name, out)  # the folder: one set in it
        self.assertEqual(result.returncode, 0, result.stderr)
        got = np.load(out)
        x = sp.csr_matrix((got["attr_data"], got["attr_indices"], got["attr_indptr"]),
                          shape=tuple(got["attr_shape"])).toarray()
        expected = features.copy()
        expected[525] = 0
        np.testing.assert_array_equal(x, expected)
        expected_labels = labels.copy()
        expected_labels[525] = -1
        np.testing.assert_array_equal(got["labels"], expected_labels)
        np.testing.assert_array_equal(got["train_idx"], np.arange(10))
        np.testing.assert_array_equal(got["val_idx"], np.arange(10, 510))
        np.testing.assert_array_equal(got["test_idx"], np.sort(test_ids))
        self.assertIn("530 nodes", tessera_loads(out))

    def test_missing_file_is_named(self):
        prefix = write_planetoid(self.dir.name, "toy", np.eye(4, dtype=np.float32),
                                 np.array([0, 1, 0, 1]), {0: [1], 1: [0], 2: [3], 3: [2]}, 1,
                                 np.array([3, 2]))
        os.unlink(prefix + ".ty")
        result = convert("planetoid", prefix, os.path.join(self.dir.name, "o.npz"))
        self.assertEqual(result.returncode, 1)
        self.assertIn("ind.toy.ty: missing", result.stderr)

    def test_python_2_style_pickles_convert(self):
        # Protocol 0 names copy_reg._reconstructor and __builtin__.object, as Python 2 wrote
        # kimiyoung/planetoid's files; its graph is a collections.defaultdict of lists.
        features = np.eye(6, dtype=np.float32)
        graph = collections.defaultdict(list, {0: [1], 1: [2], 2: [0], 3: [4], 4: [5], 5: [3]})
        prefix = write_planetoid(self.dir.name, "old", features, np.array([0, 1, 2, 0, 1, 2]),
                                 graph, 2, np.array([5, 4]), protocol=0)
        out = os.path.join(self.dir.name, "old.npz")

        result = convert("planetoid", prefix, out)

        self.assertEqual(result.returncode, 0, result.stderr)
        got = np.load(out)
        np.testing.assert_array_equal(got["adj_indptr"], [0, 2, 4, 6, 8, 10, 12])
        np.testing.assert_array_equal(got["labels"], [0, 1, 2, 0, 1, 2])
        np.testing.assert_array_equal(got["test_idx"], [4, 5])

    def test_a_pickled_command_is_refused_and_not_run(self):
        marker = os.path.join(self.dir.name, "ran")
        prefix = write_planetoid(self.dir.name, "evil", np.eye(4, dtype=np.float32),
                                 np.array([0, 1, 0, 1]), {0: [1], 1: [0], 2: [3], 3: [2]}, 1,
                                 np.array([3, 2]))
        save_pickle(prefix + ".x", Calls(os.system, f"touch {shlex.quote(marker)}"))

        result = convert("planetoid", prefix, os.path.join(self.dir.name, "o.npz"))

        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn(f"{prefix}.x pickles the class '{pickled_name(os.system)}'", result.stderr)
        self.assertFalse(os.path.exists(marker))

    @unittest.skipUnless(os.path.isfile(os.path.join(DATA_DIR, "cora_planetoid/cora_planetoid.npz")),
                         "shared datasets absent: cora_planetoid.npz not found")
    def test_cora_round_trips_through_its_raw_files(self):
        # cora_planetoid.npz was assembled from kimiyoung/planetoid's ind.cora.*: write raw files
        # that hold its arrays (test.index shuffled), convert, and get the same arrays back.
        cora = np.load(os.path.join(DATA_DIR, "cora_planetoid/cora_planetoid.npz"))
        n = len(cora["adj_indptr"]) - 1
        features = sp.csr_matrix((cora["attr_data"], cora["attr_indices"], cora["attr_indptr"]),
                                 shape=tuple(cora["attr_shape"])).toarray()
        adjacency = sp.csr_matrix((np.ones(len(cora["adj_indices"])), cora["adj_indices"],
                                   cora["adj_indptr"]), shape=(n, n))
        graph = {i: adjacency.indices[adjacency.indptr[i]:adjacency.indptr[i + 1]].tolist()
                 for i in range(n)}
        test_ids = np.random.default_rng(1).permutation(cora["test_idx"])
        self.assertEqual(int(test_ids.min()), n - len(test_ids))  # Cora's test ids are the last
        prefix = write_planetoid(self.dir.name, "cora", features, cora["labels"], graph,
                                 len(cora["train_idx"]), test_ids)
        out = os.path.join(self.dir.name, "cora.npz")
        self.assertEqual(convert("planetoid", prefix + ".graph", out).returncode, 0)
        got = np.load(out)
        for key in ("adj_indptr", "adj_indices", "attr_indptr", "attr_indices", "attr_data",
                    "attr_shape", "labels", "train_idx", "val_idx", "test_idx"):
            np.testing.assert_array_equal(got[key], cora[key], err_msg=key)
        self.assertIn("split 140/500/1000", tessera_loads(out))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
