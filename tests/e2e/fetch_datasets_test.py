#!/usr/bin/env python3
"""scripts/fetch_datasets.sh, offline: a local HTTP server on 127.0.0.1 plays the published
mirror, laid out as the canonical one and built from ../shared/datasets (Cora's raw Planetoid
files rebuilt from cora_planetoid.npz) and small OGB and Reddit archives made here. Datasets
fetched from it (--from URL) or from a folder (--from DIR) land where tessera-train reads them,
converted or unpacked, and train; a wrong checksum (corrupted bytes, a wrong manifest, a file that
changed since it was recorded on first use) is refused naming the expected and the got SHA-256,
with nothing left under the final name; a download cut short is resumed, in the same run and by
the next; --list names every dataset; unknown names are refused naming the known ones; planted
links, FIFOs and archive members escaping their folder are refused, never followed. The README's
five-minute tour fetches Cora and trains from a checkout without ../shared.

  fetch_datasets_test.py FETCH_SCRIPT TESSERA_TRAIN SHARED_DATA_DIR [TestCase ...]
"""

import collections
import gzip
import hashlib
import http.server
import io
import json
import os
import pickle
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import unittest
import urllib.parse
import zipfile

try:
    import numpy as np
    import scipy.sparse as sp
except ImportError:  # the Planetoid and Reddit cases need them, as the script's conversions do
    np = sp = None

FETCH, TRAIN, SHARED = (os.path.abspath(p) for p in sys.argv[1:4])
REPO = os.path.dirname(os.path.dirname(FETCH))
MINESWEEPER = os.path.join(SHARED, "heterophilous_graphs", "minesweeper.npz")
CORA = os.path.join(SHARED, "cora_planetoid", "cora_planetoid.npz")
MINESWEEPER_SHA256 = "e664c8dacf1e8ac466c2c09ed4b237bd2c5541f47a6eae9c6092cb87f16412b3"

needs_shared = unittest.skipUnless(os.path.isfile(MINESWEEPER) and os.path.isfile(CORA),
                                   f"shared datasets absent: {MINESWEEPER} or {CORA} not found")
needs_numpy = unittest.skipUnless(np is not None, "numpy and scipy absent (python3-numpy, "
                                  "python3-scipy): the conversions need them")


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def clean_env(**extra):
    """The environment of a user with no data folder or mirror set, whose requests to 127.0.0.1
    go to 127.0.0.1 (no proxy). OpenMP threads sleep when idle: spinning ones take 30 times
    longer on a machine busy with other work."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("TESSERA_DATA_DIR", "TESSERA_DATASETS_MIRROR", "XDG_CACHE_HOME")
           and not k.lower().endswith("_proxy")}
    env["no_proxy"] = env["NO_PROXY"] = "127.0.0.1,localhost"
    env["OMP_WAIT_POLICY"] = "passive"
    env.update(extra)
    return env


def run(*args, **options):
    # The timeout turns a script that blocks (on a FIFO, a silent server) into a failure.
    options.setdefault("env", clean_env())
    return subprocess.run([*args], capture_output=True, text=True, check=False, timeout=180,
                          **options)


def fetch(*args, **options):
    return run(FETCH, *args, **options)


def train(data_dir, dataset, epochs=5):
    return run(TRAIN, "--data-dir", data_dir, "--dataset", dataset, "--epochs", str(epochs),
               "--threads", "1")


# ---- a mirror on 127.0.0.1 ------------------------------------------------------------------


class MirrorHandler(http.server.BaseHTTPRequestHandler):
    """Serves the files under server.root at /mirror/PATH; honours 'Range: bytes=N-' when server.ranges; sends
    only server.cuts[path] bytes of a file (then closes) the first server.cut_times times."""

    def do_GET(self):
        server = self.server
        path = urllib.parse.unquote(self.path.split("?", 1)[0])
        path = path[len("/mirror/"):] if path.startswith("/mirror/") else ""
        wanted = self.headers.get("Range")
        server.requests.append((path, wanted))
        file = os.path.join(server.root, path)
        if not path or not os.path.isfile(file):
            self.send_error(404)
            return
        data = read(file)
        start = 0
        if wanted and server.ranges:
            start = int(re.fullmatch(r"bytes=(\d+)-", wanted).group(1))
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if path in server.cuts and server.cut_count[path] < server.cut_times:
            server.cut_count[path] += 1
            self.wfile.write(body[:max(0, server.cuts[path] - start)])
            return  # HTTP/1.0: the connection closes here, short of Content-Length
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Mirror:
    """A ThreadingHTTPServer on 127.0.0.1 serving a folder laid out as the canonical mirror."""

    def __init__(self, root):
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), MirrorHandler)
        self.server.daemon_threads = True
        self.reset(root)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/mirror"

    def reset(self, root):
        server = self.server
        server.root, server.ranges, server.requests = root, True, []
        server.cuts, server.cut_count, server.cut_times = {}, collections.Counter(), 1

    def cut(self, path, at, times=1):
        self.server.cuts[path], self.server.cut_times = at, times

    def close(self):
        self.server.shutdown()
        self.server.server_close()


# ---- the mirror's files ---------------------------------------------------------------------


def write_cora_planetoid(folder):
    """kimiyoung/planetoid's ind.cora.* rebuilt from cora_planetoid.npz (which was assembled from
    them): allx/ally the nodes before the test ids, tx/ty the test ids, x/y the train nodes."""
    cora = np.load(CORA)
    n = len(cora["adj_indptr"]) - 1
    features = sp.csr_matrix((cora["attr_data"], cora["attr_indices"], cora["attr_indptr"]),
                             shape=tuple(cora["attr_shape"]))
    labels = np.eye(int(cora["labels"].max()) + 1)[cora["labels"]]
    indptr, indices = cora["adj_indptr"], cora["adj_indices"]
    graph = collections.defaultdict(list, {i: indices[indptr[i]:indptr[i + 1]].tolist()
                                           for i in range(n)})
    test_ids = np.random.default_rng(1).permutation(cora["test_idx"])
    known, num_train = int(test_ids.min()), len(cora["train_idx"])
    pieces = {"x": features[:num_train], "y": labels[:num_train], "allx": features[:known],
              "ally": labels[:known], "tx": features[test_ids], "ty": labels[test_ids],
              "graph": graph}
    os.makedirs(folder, exist_ok=True)
    for suffix, value in pieces.items():
        write(os.path.join(folder, f"ind.cora.{suffix}"), pickle.dumps(value, protocol=2))
    write(os.path.join(folder, "ind.cora.test.index"),
          "".join(f"{i}\n" for i in test_ids).encode())


def zip_bytes(members):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def ring_graph(n):
    """Edges of a ring with chords over n nodes, each once."""
    return [(i, (i + 1) % n) for i in range(n)] + [(i, (i + 7) % n) for i in range(0, n, 3)]


def ogb_zip(top="arxiv", n=60):
    """A small OGB node-property dataset as snap.stanford.edu ships one: TOP/raw/*.csv.gz and
    TOP/split/time/{train,valid,test}.csv.gz."""
    def gz(lines):
        return gzip.compress("".join(f"{line}\n" for line in lines).encode(), mtime=0)
    edges = ring_graph(n)
    members = {
        f"{top}/raw/edge.csv.gz": gz(f"{a},{b}" for a, b in edges),
        f"{top}/raw/node-feat.csv.gz": gz(f"{i % 3 * 0.5},{(i % 2) - 0.5},{i / n:.3f}"
                                          for i in range(n)),
        f"{top}/raw/node-label.csv.gz": gz(str(i % 2) for i in range(n)),
        f"{top}/raw/num-node-list.csv.gz": gz([str(n)]),
        f"{top}/raw/num-edge-list.csv.gz": gz([str(len(edges))]),
        f"{top}/split/time/train.csv.gz": gz(str(i) for i in range(0, n // 2)),
        f"{top}/split/time/valid.csv.gz": gz(str(i) for i in range(n // 2, 3 * n // 4)),
        f"{top}/split/time/test.csv.gz": gz(str(i) for i in range(3 * n // 4, n)),
        f"{top}/RELEASE_v1.txt": b"a fixture in OGB's layout\n",
    }
    return zip_bytes(members)


def reddit_zip(n=50):
    """A small reddit.zip as data.dgl.ai ships it: reddit_data.npz (feature, label, node_types
    1/2/3) and reddit_graph.npz (a scipy COO matrix, both directions, one self-loop, one edge
    twice)."""
    rng = np.random.default_rng(0)
    edges = ring_graph(n)
    rows = [a for a, b in edges] + [b for a, b in edges] + [4, 1]
    cols = [b for a, b in edges] + [a for a, b in edges] + [4, 2]
    graph = sp.coo_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(n, n))
    data, graph_npz = io.BytesIO(), io.BytesIO()
    np.savez(data, feature=rng.normal(size=(n, 8)).astype(np.float32),
             label=(np.arange(n) % 3).astype(np.int64),
             node_types=np.array([1] * (n // 2) + [2] * (n // 4) + [3] * (n - n // 2 - n // 4)))
    sp.save_npz(graph_npz, graph)
    return zip_bytes({"reddit_data.npz": data.getvalue(), "reddit_graph.npz": graph_npz.getvalue()})


def build_mirror(root):
    """The canonical layout: each file under the path the manifest gives it."""
    if os.path.isfile(MINESWEEPER):
        write(os.path.join(root, "heterophilous_graphs/minesweeper.npz"), read(MINESWEEPER))
        # A stand-in in the same layout (roman_empire.npz is not in ../shared).
        write(os.path.join(root, "heterophilous_graphs/roman_empire.npz"), read(MINESWEEPER))
    if np is not None and os.path.isfile(CORA):
        write_cora_planetoid(os.path.join(root, "downloads/planetoid"))
    write(os.path.join(root, "downloads/ogb/arxiv.zip"), ogb_zip())
    if np is not None:
        write(os.path.join(root, "downloads/dgl/reddit.zip"), reddit_zip())


def plant_device(path):
    """A character device like /dev/null at `path` (root only)."""
    os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))


def manifest():
    with open(os.path.join(REPO, "scripts", "datasets.json"), encoding="utf-8") as f:
        return json.load(f)


class MirrorTest(unittest.TestCase):
    """One mirror for the class (its files made once); a fresh data folder per test."""

    @classmethod
    def setUpClass(cls):
        cls.tree = tempfile.TemporaryDirectory()
        cls.root = os.path.join(cls.tree.name, "mirror")
        build_mirror(cls.root)
        cls.mirror = Mirror(cls.root)

    @classmethod
    def tearDownClass(cls):
        cls.mirror.close()
        cls.tree.cleanup()

    def setUp(self):
        self.mirror.reset(self.root)
        self.dir = tempfile.TemporaryDirectory()
        self.data = os.path.join(self.dir.name, "data")

    def tearDown(self):
        self.dir.cleanup()

    def fetch(self, *args, **options):
        return fetch("--data-dir", self.data, "--from", self.mirror.url, *args, **options)

    def other_mirror(self, changes):
        """A copy of the mirror with `changes` (path -> bytes), served from now on."""
        root = os.path.join(self.dir.name, "other-mirror")
        shutil.copytree(self.root, root)
        for path, data in changes.items():
            write(os.path.join(root, path), data)
        self.mirror.reset(root)
        return root

    def assertFetched(self, result):
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def assertTrains(self, dataset, expect=""):
        result = train(self.data, dataset)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("test accuracy", result.stdout)
        self.assertIn(expect, result.stdout)


class FetchDatasetsTest(MirrorTest):
    @needs_shared
    @needs_numpy
    def test_cora_fetched_from_a_url_mirror_is_converted_and_trains(self):
        result = self.fetch("cora")

        self.assertFetched(result)
        self.assertTrue(os.path.isfile(os.path.join(self.data,
                                                    "cora_planetoid/cora_planetoid.npz")))
        self.assertIn("recorded on first use", result.stdout)
        with open(os.path.join(self.data, "sha256-recorded-on-first-use.tsv")) as f:
            recorded = f.read()
        for suffix in ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index"):
            path = f"downloads/planetoid/ind.cora.{suffix}"
            self.assertIn(f"{sha256(read(os.path.join(self.root, path)))}\t{path}\t", recorded)
        self.assertFalse([f for _, _, files in os.walk(self.data) for f in files
                          if f.endswith(".part")])
        self.assertTrains("cora", "split 140/500/1000")

        again = self.fetch("cora")

        self.assertFetched(again)
        self.assertIn("cora_planetoid/cora_planetoid.npz: already there", again.stdout)
        os.unlink(os.path.join(self.data, "cora_planetoid/cora_planetoid.npz"))

        converted_again = self.fetch("cora")

        self.assertFetched(converted_again)
        self.assertIn("ind.cora.x: present, sha256 ok (recorded on first use",
                      converted_again.stdout)
        self.assertTrains("cora")

    @needs_shared
    def test_a_pinned_file_is_checked_and_trains(self):
        result = self.fetch("minesweeper")

        self.assertFetched(result)
        self.assertIn("heterophilous_graphs/minesweeper.npz: sha256 ok (pinned)", result.stdout)
        self.assertEqual(read(os.path.join(self.data, "heterophilous_graphs/minesweeper.npz")),
                         read(MINESWEEPER))
        self.assertTrains("minesweeper", "10000 nodes")

    @needs_shared
    def test_a_set_read_by_format_trains_as_the_script_says(self):
        result = self.fetch("roman-empire")

        self.assertFetched(result)
        spec = f"heterophilous:{self.data}/heterophilous_graphs/roman_empire.npz"
        self.assertIn(f"not a name tessera-train knows yet; it reads the files as tessera-train "
                      f"--dataset {spec}", result.stdout)
        self.assertTrains(spec)

    @needs_shared
    def test_corrupted_download_is_refused_with_both_checksums(self):
        corrupted = bytearray(read(MINESWEEPER))
        corrupted[1000] ^= 0xFF
        self.other_mirror({"heterophilous_graphs/minesweeper.npz": bytes(corrupted)})
        final = os.path.join(self.data, "heterophilous_graphs/minesweeper.npz")

        result = self.fetch("minesweeper")

        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn(f"checksum mismatch for {final}", result.stderr)
        self.assertIn(f"expected sha256 {MINESWEEPER_SHA256} (pinned), got "
                      f"{sha256(bytes(corrupted))}", result.stderr)
        self.assertIn("not fetched: minesweeper", result.stderr)
        self.assertFalse(os.path.lexists(final))
        self.assertFalse(os.path.lexists(final + ".part"))

    @needs_shared
    def test_wrong_checksum_in_the_manifest_is_refused(self):
        wrong = manifest()
        for ds in wrong["datasets"]:
            if ds["name"] == "minesweeper":
                ds["files"][0]["sha256"] = "0" * 64
        path = os.path.join(self.dir.name, "manifest.json")
        with open(path, "w") as f:
            json.dump(wrong, f)

        result = self.fetch("--manifest", path, "minesweeper")

        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn(f"expected sha256 {'0' * 64} (pinned), got {MINESWEEPER_SHA256}",
                      result.stderr)
        self.assertFalse(os.path.lexists(os.path.join(self.data,
                                                      "heterophilous_graphs/minesweeper.npz")))

    def test_malformed_manifest_checksum_is_refused_before_anything_is_fetched(self):
        bad = manifest()
        bad["datasets"][0]["files"][0]["sha256"] = "not-a-checksum"
        path = os.path.join(self.dir.name, "manifest.json")
        with open(path, "w") as f:
            json.dump(bad, f)

        result = self.fetch("--manifest", path, "cora")

        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("sha256 'not-a-checksum' is not 64 lowercase hex digits", result.stderr)
        self.assertFalse(os.path.exists(self.data))

    @needs_shared
    def test_a_file_changed_since_its_first_use_is_refused(self):
        path = "heterophilous_graphs/roman_empire.npz"
        self.assertFetched(self.fetch("roman-empire"))
        first = sha256(read(os.path.join(self.data, path)))
        os.unlink(os.path.join(self.data, path))
        self.other_mirror({path: b"other bytes under the same name"})

        result = self.fetch("roman-empire")

        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertRegex(result.stderr, f"expected sha256 {first} \\(recorded on first use "
                         f"[0-9TZ:-]+\\), got {sha256(b'other bytes under the same name')}")
        self.assertIn("delete its line from", result.stderr)
        self.assertFalse(os.path.lexists(os.path.join(self.data, path)))

    @needs_shared
    def test_download_cut_short_is_resumed_in_the_same_run(self):
        self.mirror.cut("heterophilous_graphs/minesweeper.npz", 50000)

        result = self.fetch("minesweeper")

        self.assertFetched(result)
        self.assertIn("interrupted after 50000 bytes", result.stdout)
        self.assertIn(("heterophilous_graphs/minesweeper.npz", "bytes=50000-"),
                      self.mirror.server.requests)
        self.assertEqual(read(os.path.join(self.data, "heterophilous_graphs/minesweeper.npz")),
                         read(MINESWEEPER))

    @needs_shared
    def test_partial_file_of_a_failed_run_is_kept_and_resumed_by_the_next(self):
        final = os.path.join(self.data, "heterophilous_graphs/minesweeper.npz")
        self.mirror.cut("heterophilous_graphs/minesweeper.npz", 50000, times=100)

        failed = self.fetch("minesweeper")

        self.assertEqual(failed.returncode, 1, failed.stdout + failed.stderr)
        self.assertIn("the download stopped after 50000 bytes", failed.stderr)
        self.assertIn(f"kept as {final}.part: run the same command again to resume it",
                      failed.stderr)
        self.assertFalse(os.path.lexists(final))
        self.assertEqual(os.path.getsize(final + ".part"), 50000)
        self.mirror.reset(self.root)

        resumed = self.fetch("minesweeper")

        self.assertFetched(resumed)
        self.assertIn(f"resuming {final}.part at byte 50000", resumed.stdout)
        self.assertEqual(self.mirror.server.requests,
                         [("heterophilous_graphs/minesweeper.npz", "bytes=50000-")])
        self.assertEqual(read(final), read(MINESWEEPER))
        self.assertFalse(os.path.lexists(final + ".part"))

    @needs_shared
    def test_wrong_partial_file_is_downloaded_again_from_the_start(self):
        final = os.path.join(self.data, "heterophilous_graphs/minesweeper.npz")
        write(final + ".part", b"\0" * 1000)

        result = self.fetch("minesweeper")

        self.assertFetched(result)
        self.assertIn("wrong checksum after resuming an earlier run's partial file at byte 1000",
                      result.stdout)
        self.assertEqual(read(final), read(MINESWEEPER))

    @needs_shared
    def test_whole_partial_file_of_an_earlier_run_is_checked_and_kept(self):
        final = os.path.join(self.data, "heterophilous_graphs/minesweeper.npz")
        write(final + ".part", read(MINESWEEPER))

        result = self.fetch("minesweeper")

        self.assertFetched(result)
        self.assertEqual(self.mirror.server.requests,  # answered 416: nothing past the end
                         [("heterophilous_graphs/minesweeper.npz", f"bytes={len(read(final))}-")])
        self.assertEqual(read(final), read(MINESWEEPER))

    @needs_shared
    def test_server_that_does_not_resume_sends_the_whole_file_again(self):
        final = os.path.join(self.data, "heterophilous_graphs/minesweeper.npz")
        write(final + ".part", read(MINESWEEPER)[:1000])
        self.mirror.server.ranges = False

        result = self.fetch("minesweeper")

        self.assertFetched(result)
        self.assertIn("the server does not resume downloads", result.stdout)
        self.assertEqual(read(final), read(MINESWEEPER))

    @needs_shared
    @needs_numpy
    def test_folder_mirror_is_copied_and_checked(self):
        result = fetch("--data-dir", self.data, "--from", self.root, "minesweeper", "cora")

        self.assertFetched(result)
        self.assertIn("minesweeper.npz: sha256 ok (pinned)", result.stdout)
        self.assertTrains("cora")
        # ../shared/datasets itself is a mirror of the sets it holds as published.
        shared = fetch("--data-dir", os.path.join(self.dir.name, "d2"), "--from", SHARED,
                       "minesweeper")
        self.assertFetched(shared)

    @needs_shared
    def test_folder_mirror_with_a_corrupted_file_is_refused(self):
        root = self.other_mirror({"heterophilous_graphs/minesweeper.npz": b"not the file"})

        result = fetch("--data-dir", self.data, "--from", root, "minesweeper")

        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn(f"expected sha256 {MINESWEEPER_SHA256} (pinned), got "
                      f"{sha256(b'not the file')}", result.stderr)
        self.assertFalse(os.path.lexists(os.path.join(self.data,
                                                      "heterophilous_graphs/minesweeper.npz")))

    def test_missing_file_on_the_mirror_is_named(self):
        empty = os.path.join(self.dir.name, "empty")
        os.mkdir(empty)
        self.mirror.reset(empty)

        by_url = self.fetch("tolokers")
        by_folder = fetch("--data-dir", self.data, "--from", empty, "tolokers")

        self.assertEqual(by_url.returncode, 1)
        self.assertIn(f"{self.mirror.url}/heterophilous_graphs/tolokers.npz: HTTP 404",
                      by_url.stderr)
        self.assertEqual(by_folder.returncode, 1)
        self.assertIn(f"{empty}/heterophilous_graphs/tolokers.npz: not in the mirror folder",
                      by_folder.stderr)
        self.assertFalse(os.path.lexists(os.path.join(self.data,
                                                      "heterophilous_graphs/tolokers.npz.part")))

    def test_list_names_every_dataset_and_how_its_checksum_is_held(self):
        result = fetch("--list", "--data-dir", self.data)

        self.assertEqual(result.returncode, 0, result.stderr)
        for ds in manifest()["datasets"]:
            self.assertIn(f"\n{ds['name']}: {ds['what']}\n", result.stdout)
            for key in ("size", "licence", "published"):
                self.assertIn(ds[key], result.stdout)
        for name in ("cora", "citeseer", "pubmed", "roman-empire", "amazon-ratings",
                     "minesweeper", "tolokers", "questions", "ogbn-arxiv", "ogbn-products",
                     "reddit"):
            self.assertIn(f"\n{name}: ", result.stdout)
        self.assertIn(f"heterophilous_graphs/minesweeper.npz: sha256 pinned "
                      f"{MINESWEEPER_SHA256[:16]}", result.stdout)
        self.assertIn("downloads/ogb/arxiv.zip: sha256 to be recorded on first use",
                      result.stdout)
        self.assertIn("https://snap.stanford.edu/ogb/data/nodeproppred/products.zip",
                      result.stdout)
        self.assertIn("tessera-train --dataset cora\n", result.stdout)
        self.assertFalse(os.path.exists(self.data))  # --list creates nothing

    def test_unknown_name_is_refused_naming_the_known_ones(self):
        result = self.fetch("cora", "no-such-set")

        self.assertEqual(result.returncode, 2)
        self.assertIn("unknown dataset 'no-such-set'; known: cora, citeseer, pubmed, "
                      "roman-empire", result.stderr)
        self.assertFalse(os.path.exists(self.data))
        self.assertEqual(self.mirror.server.requests, [])

    @needs_shared
    def test_planted_links_fifos_and_devices_at_the_destination_are_refused(self):
        victim = os.path.join(self.dir.name, "victim")
        write(victim, b"precious")
        elsewhere = os.path.join(self.dir.name, "elsewhere")
        os.mkdir(elsewhere)
        final = os.path.join(self.data, "heterophilous_graphs/minesweeper.npz")
        os.makedirs(os.path.dirname(final))
        cases = {
            "a link at the file": (final, lambda: os.symlink(victim, final),
                                   f"{final}: is a symbolic link"),
            "a link at its .part": (final + ".part", lambda: os.symlink(victim, final + ".part"),
                                    f"{final}.part: is a symbolic link"),
            "a hard link at its .part": (final + ".part", lambda: os.link(victim, final + ".part"),
                                         f"{final}.part: is a file with 2 hard links"),
            "a FIFO at the file": (final, lambda: os.mkfifo(final), f"{final}: is a FIFO"),
            "a device at the file": (final, lambda: plant_device(final),
                                     f"{final}: is a character device"),
            "a link at its folder": (os.path.dirname(final), lambda: (
                shutil.rmtree(os.path.dirname(final)),
                os.symlink(elsewhere, os.path.dirname(final))),
                f"{os.path.dirname(final)}: is a symbolic link, not a folder"),
        }
        for what, (path, plant, message) in cases.items():
            with self.subTest(what):
                try:
                    plant()
                except PermissionError:  # mknod needs root (and a container that allows it)
                    continue

                result = self.fetch("minesweeper")

                self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
                self.assertIn(message, result.stderr)
                self.assertEqual(read(victim), b"precious")
                self.assertEqual(os.listdir(elsewhere), [])
                os.unlink(path)
                os.makedirs(os.path.dirname(final), exist_ok=True)

    def test_planted_link_at_the_checksum_record_is_refused(self):
        victim = os.path.join(self.dir.name, "victim")
        write(victim, b"precious")
        os.makedirs(self.data)
        os.symlink(victim, os.path.join(self.data, "sha256-recorded-on-first-use.tsv"))

        result = self.fetch("ogbn-arxiv")

        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn("sha256-recorded-on-first-use.tsv: is a symbolic link", result.stderr)
        self.assertEqual(read(victim), b"precious")

    def test_ogb_zip_is_unpacked_into_the_folder_tessera_reads(self):
        result = self.fetch("ogbn-arxiv")

        self.assertFetched(result)
        folder = os.path.join(self.data, "ogbn_arxiv")
        self.assertTrue(os.path.isfile(os.path.join(folder, "raw/node-feat.csv.gz")))
        self.assertTrue(os.path.isfile(os.path.join(folder, "split/time/train.csv.gz")))
        self.assertIn(f"not a name tessera-train knows yet; it reads the files as tessera-train "
                      f"--dataset ogb:{folder}", result.stdout)
        self.assertTrains(f"ogb:{folder}", "60 nodes")
        self.assertIn(f"{folder}: already there", self.fetch("ogbn-arxiv").stdout)

    def test_archive_member_outside_its_folder_is_refused(self):
        escaping = zip_bytes({"arxiv/raw/edge.csv.gz": b"", "arxiv/../../escaped": b"x"})
        self.other_mirror({"downloads/ogb/arxiv.zip": escaping})

        result = self.fetch("ogbn-arxiv")

        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn("member 'arxiv/../../escaped' is not a plain relative path", result.stderr)
        self.assertFalse(os.path.lexists(os.path.join(self.data, "ogbn_arxiv")))
        self.assertFalse(os.path.lexists(os.path.join(self.dir.name, "escaped")))
        self.assertEqual([f for f in os.listdir(self.data) if "unpacking" in f], [])

    @needs_numpy
    def test_reddit_zip_is_converted_to_an_npz_that_trains(self):
        result = self.fetch("reddit")

        self.assertFetched(result)
        out = os.path.join(self.data, "reddit/reddit.npz")
        arrays = np.load(out)
        adjacency = sp.csr_matrix((np.ones(len(arrays["adj_indices"])), arrays["adj_indices"],
                                   arrays["adj_indptr"]))
        self.assertEqual(adjacency.diagonal().sum(), 0)  # the self-loop is gone
        self.assertEqual(adjacency.nnz, 2 * len(ring_graph(50)))  # the edge listed twice, once
        self.assertEqual(arrays["features"].shape, (50, 8))
        np.testing.assert_array_equal(arrays["train_idx"], np.arange(25))
        self.assertEqual(os.listdir(os.path.join(self.data, "reddit")), ["reddit.npz"])
        self.assertTrains(f"npz:{out}", "50 nodes")


class ReadmeTourTest(MirrorTest):
    """The README's tour, from a checkout with no ../shared beside it: its fetch command (the
    mirror given by TESSERA_DATASETS_MIRROR, as a cluster without internet access would), then its
    first tessera-train command, in the default data folder under $HOME."""

    def tour_commands(self):
        with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
            readme = f.read()
        tour = readme.split("## A five-minute tour", 1)[1].split("```bash\n", 1)[1]
        lines = [line.split("  #")[0].strip() for line in tour.split("```", 1)[0].splitlines()]
        fetch_line = next(line for line in lines if "fetch_datasets.sh" in line)
        train_line = next(line for line in lines
                          if line.startswith("build/apps/tessera-train/tessera-train"))
        return fetch_line, train_line

    @needs_shared
    @needs_numpy
    def test_tour_fetches_cora_and_trains_without_shared(self):
        fetch_line, train_line = self.tour_commands()
        checkout = os.path.join(self.dir.name, "work", "tessera")
        shutil.copytree(os.path.join(REPO, "scripts"), os.path.join(checkout, "scripts"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        os.makedirs(os.path.join(checkout, "build/apps/tessera-train"))
        os.symlink(TRAIN, os.path.join(checkout, "build/apps/tessera-train/tessera-train"))
        home = os.path.join(self.dir.name, "home")
        env = clean_env(HOME=home, TESSERA_DATASETS_MIRROR=self.mirror.url)
        self.assertFalse(os.path.exists(os.path.join(checkout, "..", "shared")))

        fetched = run("bash", "-c", fetch_line, cwd=checkout, env=env)
        trained = run("bash", "-c", train_line, cwd=checkout, env=env)

        self.assertEqual(fetched.returncode, 0, fetched.stdout + fetched.stderr)
        self.assertTrue(os.path.isfile(os.path.join(
            home, ".cache/tessera/datasets/cora_planetoid/cora_planetoid.npz")))
        self.assertEqual(trained.returncode, 0, trained.stdout + trained.stderr)
        self.assertIn("dataset cora: 2708 nodes", trained.stdout)
        self.assertIn("test accuracy", trained.stdout)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v", *sys.argv[4:]])
