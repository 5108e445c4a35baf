#!/usr/bin/env python3
"""scripts/convert_dataset.py: pickled npz files and raw Planetoid files become npz files that
Tessera loads, with the arrays they held; Tessera's own error names the converter; a pickle that
names anything but arrays, sparse matrices and containers is refused without running it, and what
a pickle builds (a billion laughs, a forged matrix, a dict for an array) is refused in one line
naming the file, before anything is written; an output never replaces an input or, without
--force, an existing file.

  convert_dataset_test.py CONVERTER TESSERA_CONVERT DATA_DIR
"""

import collections
import io
import os
import pickle
import resource
import shlex
import subprocess
import sys
import tempfile
import unittest
import warnings
import zipfile

import numpy as np
import numpy.lib.format as npy_format
import scipy.sparse as sp

CONVERTER, TESSERA_CONVERT, DATA_DIR = sys.argv[1:4]


def run(*args, **options):
    # The timeout turns a converter that blocks (on a FIFO, say) into a failure, not a hang.
    return subprocess.run([*args], capture_output=True, text=True, check=False, timeout=120,
                          **options)


def convert(*args, **options):
    return run(sys.executable, CONVERTER, *args, **options)


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


def boxed(value):
    """A 0-d object array holding `value`: how np.savez stores (pickles) a Python object."""
    box = np.empty((), dtype=object)
    box[()] = value
    return box


def add_pickled_member(path, key, pickled):
    """Adds KEY.npy to the npz at `path`: a 0-d object array whose pickle is the bytes `pickled`,
    for pickles Python's pickler would not write (too deep, or calling a function)."""
    header = io.BytesIO()
    npy_format.write_array_header_1_0(header, {"descr": "|O", "fortran_order": False, "shape": ()})
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr(f"{key}.npy", header.getvalue() + pickled)


def nested_lists_pickle(depth):
    """A pickle of [[[...]]] nested `depth` deep, built by opcodes (no recursion to write it)."""
    return b"\x80\x02" + b"]" * depth + b"a" * (depth - 1) + b"."


def limit_memory():
    """Run in the converter's process: 4 GiB of address space, so that a pickle asking for far
    more fails in MemoryError here as it would on any machine."""
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


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

    def assert_refused(self, path, message):
        """Converting `path` exits 1 with "PATH: MESSAGE" on stderr, and no traceback."""
        result = convert("npz", path, os.path.join(self.dir.name, "o.npz"))
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn(f"{path}: {message}", result.stderr)
        self.assertNotIn("Traceback", result.stderr)

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

        self.assert_refused(path, "members 'labels.npy' and 'labels.npy' both hold array 'labels'")

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

    def test_a_billion_laughs_pickle_is_refused_before_it_expands(self):
        # A list of itself twice, 30 levels deep, is 2^31 numbers from a tiny pickle; so is one
        # 10,000-number list shared 20,000 times at a depth of 2.
        deep = [1, 1]
        for _ in range(29):
            deep = [deep, deep]
        wide = [list(range(10_000))] * 20_000
        for name, value, message in (("deep", deep, "lists nested deeper than 2 levels"),
                                     ("wide", wide, "lists that expand to 200000000 numbers")):
            with self.subTest(name):
                path = os.path.join(self.dir.name, f"laughs_{name}.npz")
                np.savez(path, adj_matrix=self.adjacency, labels=boxed(value))

                self.assert_refused(path, f"array 'labels': {message}")

    def test_unpickled_objects_of_the_wrong_kind_or_structure_are_refused(self):
        forged = sp.csr_matrix((3, 3))
        forged._shape = (10**12, 10**12)  # what a pickle sets, past the constructor's checks
        cases = {"dict": ({"adj_matrix": boxed({"a": 1})},
                          "array 'adj_matrix': holds a dict, expected an array"),
                 "forged_shape": ({"adj_matrix": boxed(forged)},
                                  "array 'adj_matrix': not a valid csr_matrix: index pointer"),
                 "string_labels": ({"adj_matrix": self.adjacency, "labels": boxed(["a"] * 30)},
                                   "array 'labels': holds a str among its numbers")}
        for name, (arrays, message) in cases.items():
            with self.subTest(name):
                path = os.path.join(self.dir.name, f"{name}.npz")
                np.savez(path, **arrays)

                self.assert_refused(path, message)
        with self.subTest("a million levels deep"):
            path = os.path.join(self.dir.name, "deep.npz")
            np.savez(path, adj_matrix=self.adjacency)
            add_pickled_member(path, "labels", nested_lists_pickle(10**6))

            self.assert_refused(path, "array 'labels': lists nested deeper than 2 levels")

    def test_labels_that_are_no_classes_are_refused(self):
        two_ones = np.zeros((self.n, 3), np.int64)
        two_ones[:, 0] = 1
        two_ones[4, 1] = 1
        huge = self.labels.copy()
        huge[7] = 2**62
        negative = self.labels.copy()
        negative[2] = -5
        for name, labels, message in (
                ("two_ones", two_ones, "row 4 ([1, 1, 0]) is not one-hot"),
                ("huge", huge, f"label {2**62} at index 7 is outside -1..{self.n - 1 + 1024}"),
                ("negative", negative, "label -5 at index 2 is outside")):
            with self.subTest(name):
                path = os.path.join(self.dir.name, f"{name}.npz")
                np.savez(path, adj_matrix=self.adjacency, labels=boxed(labels))
                self.assert_refused(path, f"array 'labels': {message}")

    def test_shapes_are_checked_before_anything_is_written(self):
        path = os.path.join(self.dir.name, "flat_features.npz")
        np.savez(path, adj_matrix=self.adjacency, attr_matrix=np.ones(self.n, np.float32),
                 labels=self.labels)
        out = os.path.join(self.dir.name, "o.npz")

        result = convert("npz", path, out)

        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn(f"{path}: array 'attr_matrix': features of shape ({self.n},), expected 2-D",
                      result.stderr)
        self.assertFalse(os.path.exists(out))

    def test_fractional_and_out_of_range_ids_are_refused(self):
        cases = {"fractional": ({"adj_matrix": self.adjacency, "train_idx": np.arange(5) + 0.9},
                                "array 'train_idx': node id 0.9 at index 0 is not an integer"),
                 "negative": ({"adj_matrix": self.adjacency, "train_idx": np.array([3, -1])},
                              "array 'train_idx': node id -1 outside 0..29"),
                 "column": ({"adj_indptr": np.array([0, 1, 2, 2]), "adj_indices": np.array([5, -1]),
                             "adj_shape": np.array([3, 3])},
                            "array 'adj_indices': column 5 outside 0..2")}
        for name, (arrays, message) in cases.items():
            with self.subTest(name):
                path = os.path.join(self.dir.name, f"{name}.npz")
                np.savez(path, **arrays)
                out = os.path.join(self.dir.name, "o.npz")

                result = convert("npz", path, out)

                self.assertEqual(result.returncode, 1, result.stderr)
                self.assertIn(f"{path}: {message}", result.stderr)
                self.assertFalse(os.path.exists(out))

    def test_integral_float_ids_are_ids(self):
        path = os.path.join(self.dir.name, "float_ids.npz")
        np.savez(path, adj_matrix=self.adjacency, train_idx=np.array([3.0, 1.0]))
        out = os.path.join(self.dir.name, "o.npz")

        result = convert("npz", path, out)

        self.assertEqual(result.returncode, 0, result.stderr)
        np.testing.assert_array_equal(np.load(out)["train_idx"], [1, 3])

    def test_an_error_without_a_message_is_named_by_its_type(self):
        # bytes(2^44): a 16 TiB request whose MemoryError has an empty message.
        path = os.path.join(self.dir.name, "huge_bytes.npz")
        np.savez(path, adj_matrix=self.adjacency)
        add_pickled_member(path, "labels", b"\x80\x02c__builtin__\nbytes\n\x8a\x06"
                           b"\x00\x00\x00\x00\x00\x10\x85R.")
        one_thread = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}

        result = convert("npz", path, os.path.join(self.dir.name, "o.npz"),
                         preexec_fn=limit_memory, env=one_thread)

        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn(f"{path}: array 'labels': not a readable pickle: MemoryError", result.stderr)

    def test_the_output_never_replaces_an_input(self):
        with open(self.path, "rb") as f:
            original = f.read()
        hard_link = os.path.join(self.dir.name, "second_name.npz")
        os.link(self.path, hard_link)
        for out in (self.path, hard_link):
            with self.subTest(out):
                result = convert("npz", self.path, out, "--force")

                self.assertEqual(result.returncode, 1, result.stderr)
                self.assertIn(f"{out}: is the input {self.path} (the same file); refusing to "
                              "replace it, even with --force", result.stderr)
                with open(self.path, "rb") as f:
                    self.assertEqual(f.read(), original)

    def test_an_existing_output_is_replaced_only_with_force(self):
        out = os.path.join(self.dir.name, "precious.npz")
        with open(out, "w") as f:
            f.write("keep")

        refused = convert("npz", self.path, out)
        with open(out) as f:
            kept = f.read()
        forced = convert("npz", self.path, out, "--force")

        self.assertEqual(refused.returncode, 1, refused.stderr)
        self.assertIn(f"{out}: exists; pass --force to replace it", refused.stderr)
        self.assertEqual(kept, "keep")
        self.assertEqual(forced.returncode, 0, forced.stderr)
        self.assertEqual(np.load(out)["labels"].shape, (self.n,))

    def test_inputs_that_are_not_regular_files_are_refused_unopened(self):
        fifo = os.path.join(self.dir.name, "fifo.npz")
        os.mkfifo(fifo)  # opening it would block until a writer came
        for path, kind in ((fifo, "a FIFO"), ("/dev/zero", "a character device"),
                           (self.dir.name, "a folder")):
            with self.subTest(kind):
                self.assert_refused(path, f"is {kind}, not a regular file")

    def test_a_stored_class_count_is_kept_and_checked(self):
        path = os.path.join(self.dir.name, "classes.npz")
        np.savez(path, adj_matrix=self.adjacency, labels=self.labels, num_classes=np.array(1000))
        too_few = os.path.join(self.dir.name, "too_few.npz")
        np.savez(too_few, adj_matrix=self.adjacency, labels=self.labels, num_classes=np.array(2))
        out = os.path.join(self.dir.name, "o.npz")

        kept = convert("npz", path, out)
        refused = convert("npz", too_few, os.path.join(self.dir.name, "o2.npz"))

        self.assertEqual(kept.returncode, 0, kept.stderr)
        self.assertEqual(int(np.load(out)["num_classes"]), 1000)
        self.assertIn("1000 classes", tessera_loads(out))
        self.assertEqual(refused.returncode, 1, refused.stderr)
        self.assertIn(f"{too_few}: array 'num_classes': is 2, but the labels need at least 3 "
                      "classes", refused.stderr)


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
        # Planetoid's recipe row-normalizes: recorded, so training's default follows it.
        self.assertEqual(int(got["row_normalize_features"]), 1)
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
        # kimiyoung/planetoid's files; its graph is a collections.defaultdict of lists. A ring of
        # 512 nodes: 2 train, the 500 val nodes after them, 2 test nodes after those.
        n = 512
        graph = collections.defaultdict(list, {i: [(i + 1) % n] for i in range(n)})
        prefix = write_planetoid(self.dir.name, "old", np.eye(n, dtype=np.float32),
                                 np.arange(n) % 3, graph, 2, np.array([n - 1, n - 2]), protocol=0)
        out = os.path.join(self.dir.name, "old.npz")

        result = convert("planetoid", prefix, out)

        self.assertEqual(result.returncode, 0, result.stderr)
        got = np.load(out)
        np.testing.assert_array_equal(got["adj_indptr"], np.arange(0, 2 * n + 1, 2))
        np.testing.assert_array_equal(got["labels"], np.arange(n) % 3)
        np.testing.assert_array_equal(got["val_idx"], np.arange(2, 502))
        np.testing.assert_array_equal(got["test_idx"], [n - 2, n - 1])

    def test_a_val_beyond_the_non_test_nodes_is_refused(self):
        # 50 nodes: Planetoid's val (the 500 after the 10 train nodes) would be test nodes and
        # nodes that do not exist; PyG's Planetoid fails on it too.
        graph = {i: [(i + 1) % 50] for i in range(50)}
        prefix = write_planetoid(self.dir.name, "small", np.eye(50, dtype=np.float32),
                                 np.arange(50) % 3, graph, 10, np.arange(40, 50))
        out = os.path.join(self.dir.name, "small.npz")

        result = convert("planetoid", prefix, out)

        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn(f"{prefix}.y: Planetoid's split takes train = nodes 0..9 and val = the next "
                      "500, but only nodes 0..39 (the rows of allx) are neither test nodes nor "
                      "missing", result.stderr)
        self.assertFalse(os.path.exists(out))

    def test_a_graph_that_is_not_a_dict_of_node_id_lists_is_refused(self):
        ring = {i: [(i + 1) % 4] for i in range(4)}
        for name, graph, message in (
                ("list", [[1, 2], [0]], "holds a list, expected a dict of node id -> list"),
                ("negative_key", {**ring, -3: [1]}, "key -3 is not a node id"),
                ("string_key", {**ring, "5": [1]}, "key '5' is not a node id"),
                ("set_of_neighbours", {**ring, 2: {1}}, "node 2 maps to a set")):
            with self.subTest(name):
                prefix = write_planetoid(self.dir.name, name, np.eye(4, dtype=np.float32),
                                         np.array([0, 1, 0, 1]), graph, 1, np.array([3, 2]))

                result = convert("planetoid", prefix, os.path.join(self.dir.name, "o.npz"))

                self.assertEqual(result.returncode, 1, result.stderr)
                self.assertIn(f"{prefix}.graph: {message}", result.stderr)
                self.assertNotIn("Traceback", result.stderr)

    def test_a_part_that_is_not_a_regular_file_is_refused_unopened(self):
        prefix = write_planetoid(self.dir.name, "toy", np.eye(4, dtype=np.float32),
                                 np.array([0, 1, 0, 1]), {0: [1], 1: [0], 2: [3], 3: [2]}, 1,
                                 np.array([3, 2]))
        os.unlink(prefix + ".ty")
        os.mkfifo(prefix + ".ty")

        result = convert("planetoid", prefix, os.path.join(self.dir.name, "o.npz"))

        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn(f"{prefix}.ty: is a FIFO, not a regular file", result.stderr)

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
