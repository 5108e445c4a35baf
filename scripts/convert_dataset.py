#!/usr/bin/env python3
"""Convert dataset files that C++ cannot read sensibly into an npz that Tessera loads.

Two layouts hold pickled Python objects, which only Python can unpickle:

  npz        an .npz whose arrays are pickled scipy matrices (keys such as adj_matrix,
             attr_matrix / node_attr, labels / node_label), as many GNN repositories ship;
  planetoid  the raw Planetoid files ind.NAME.{x,y,tx,ty,allx,ally,graph,test.index}
             (kimiyoung/planetoid), assembled the standard way (Kipf & Welling's load_data):
             features and labels are allx/ally then tx/ty placed by test.index, train = the
             len(y) first nodes, val = the next 500, test = the ids of test.index.

Both are written as the npz layout of shared/datasets' cora_planetoid.npz (adj_indptr,
adj_indices, attr_* or features, labels, train_idx/val_idx/test_idx), with no pickles:

  python3 scripts/convert_dataset.py npz IN.npz OUT.npz
  python3 scripts/convert_dataset.py planetoid DIR/ind.cora OUT.npz   # or DIR and --name cora
  tessera-train --dataset npz:OUT.npz

Needs numpy and scipy (Debian: python3-numpy python3-scipy). Pickles are loaded only through a
restricted unpickler that builds numpy arrays and dtypes, scipy sparse matrices and arrays (bsr,
coo, csc, csr, dia, dok, lil) and plain containers (list, tuple, dict, set, frozenset, bytes,
collections.defaultdict and OrderedDict), as numpy 1 and 2, scipy before and after 1.8 and
Python 2 name them; a pickle that names anything else (os.system, eval, subprocess.*, ...) is
refused, naming it and the file, before it runs.
"""

import argparse
import codecs
import collections
import copyreg
import importlib
import os
import pickle
import sys
import zipfile

try:
    import numpy as np
    import numpy.lib.format as npy_format
    import scipy.sparse as sp
except ImportError as missing:
    sys.exit(f"convert_dataset.py: needs numpy and scipy ({missing}); on Debian: "
             "apt-get install python3-numpy python3-scipy, and run it with /usr/bin/python3")


class ConvertError(Exception):
    """A problem with the input, reported as 'convert_dataset.py: <message>'."""


# ---- unpickling only arrays, sparse matrices and containers ---------------------------------

SPARSE_FORMATS = ("bsr", "coo", "csc", "csr", "dia", "dok", "lil")


def numpy_core(module):
    """numpy's numpy._core.MODULE (numpy 2) or, where there is none, numpy.core.MODULE."""
    try:
        return importlib.import_module(f"numpy._core.{module}")
    except ImportError:
        return importlib.import_module(f"numpy.core.{module}")


def allowed_globals():
    """(module, name) as a pickle names it -> the object it stands for. Every path a version writes
    maps to this installation's object, so no module named by a file is ever imported."""
    multiarray, numeric = numpy_core("multiarray"), numpy_core("numeric")
    allowed = {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("numpy.matrixlib.defmatrix", "matrix"): np.matrix,
        ("collections", "defaultdict"): collections.defaultdict,
        ("collections", "OrderedDict"): collections.OrderedDict,
        ("_codecs", "encode"): codecs.encode,  # bytes in Python 3 pickles of protocol 0 to 2
    }
    for core in ("numpy.core", "numpy._core"):
        allowed[(f"{core}.multiarray", "_reconstruct")] = multiarray._reconstruct
        allowed[(f"{core}.multiarray", "scalar")] = multiarray.scalar
        allowed[(f"{core}.numeric", "_frombuffer")] = numeric._frombuffer  # protocol 5
    for builtins in ("builtins", "__builtin__"):
        for kind in (object, list, tuple, dict, set, frozenset, bytes):
            allowed[(builtins, kind.__name__)] = kind
    for copyreg_module in ("copyreg", "copy_reg"):
        allowed[(copyreg_module, "_reconstructor")] = copyreg._reconstructor
    # scipy.sparse.csr before 1.8, scipy.sparse._csr after; csr_array in _arrays until 1.11.
    for fmt in SPARSE_FORMATS:
        modules = (f"scipy.sparse.{fmt}", f"scipy.sparse._{fmt}", "scipy.sparse._arrays")
        for kind in (getattr(sp, f"{fmt}_matrix", None), getattr(sp, f"{fmt}_array", None)):
            if kind is not None:
                allowed.update({(module, kind.__name__): kind for module in modules})
    return allowed


ALLOWED_GLOBALS = allowed_globals()


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickles only what ALLOWED_GLOBALS holds: any other class or function a pickle names is
    refused before the pickle can call it. Python 2 strings decode as latin1, as numpy asks."""

    def __init__(self, file, where):
        super().__init__(file, encoding="latin1")
        self.where = where

    def find_class(self, module, name):
        allowed = ALLOWED_GLOBALS.get((module, name))
        if allowed is None:
            raise ConvertError(f"{self.where} pickles the class '{module}.{name}', which this "
                               "converter does not load (it loads only numpy arrays, scipy sparse "
                               "matrices and plain containers): refusing to unpickle it")
        return allowed


def load_pickle(f, where):
    """The object pickled in the open file `f`, through RestrictedUnpickler."""
    try:
        return RestrictedUnpickler(f, where).load()
    except ConvertError:
        raise
    except Exception as e:  # a garbled pickle fails in whatever its allowed classes raise
        raise ConvertError(f"{where}: not a readable pickle: {e}") from e


# ---- writing --------------------------------------------------------------------------------


def write_npz(out, adjacency, features, labels, split):
    """Writes the loader's npz layout to `out` (through a temporary file, then renamed)."""
    adjacency = sp.csr_matrix(adjacency)
    n = adjacency.shape[0]
    if adjacency.shape != (n, n):
        raise ConvertError(f"the adjacency is {adjacency.shape}, not square")
    arrays = {
        "adj_indptr": adjacency.indptr.astype("<i8"),
        "adj_indices": adjacency.indices.astype("<i8"),
        "adj_shape": np.array(adjacency.shape, dtype="<i8"),
    }
    if features is not None:
        if features.shape[0] != n:
            raise ConvertError(f"{features.shape[0]} feature rows for {n} nodes")
        if sp.issparse(features):
            x = sp.csr_matrix(features)
            x.sort_indices()
            arrays.update(attr_indptr=x.indptr.astype("<i8"), attr_indices=x.indices.astype("<i8"),
                          attr_data=x.data.astype("<f4"), attr_shape=np.array(x.shape, dtype="<i8"))
        else:
            arrays["features"] = np.ascontiguousarray(features, dtype="<f4")
    if labels is not None:
        if labels.shape[0] != n:
            raise ConvertError(f"{labels.shape[0]} labels for {n} nodes")
        arrays["labels"] = labels.astype("<i8")
    for name, ids in split.items():
        if ids is not None:
            arrays[name] = np.asarray(ids, dtype="<i8")
    # Never write through a planted link or onto a device node: a fresh file beside `out`, then a
    # rename onto a regular file (or nothing).
    if os.path.lexists(out) and (os.path.islink(out) or not os.path.isfile(out)):
        raise ConvertError(f"{out}: exists and is not a regular file; refusing to replace it")
    temporary = f"{out}.{os.getpid()}.tmp"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(temporary, out)
    except OSError as e:
        if os.path.lexists(temporary):
            os.unlink(temporary)
        raise ConvertError(f"{out}: cannot write: {e.strerror}") from e
    summary = f"{n} nodes, {adjacency.nnz} adjacency entries"
    if features is not None:
        summary += f", {features.shape[1]} features"
    if labels is not None:
        summary += f", {int(labels.max()) + 1 if labels.size else 0} classes"
    if split.get("train_idx") is not None:
        summary += ", split " + " / ".join(str(len(split[k]) if split[k] is not None else 0)
                                           for k in ("train_idx", "val_idx", "test_idx"))
    print(f"wrote {out}: {summary}")


def class_ids(labels, where):
    """Class ids from integer labels or one-hot rows (a row without a 1 becomes -1)."""
    labels = labels.toarray() if sp.issparse(labels) else np.asarray(labels)
    if labels.ndim == 2:
        if labels.shape[1] == 1:
            labels = labels[:, 0]
        else:
            ids = labels.argmax(axis=1).astype(np.int64)
            ids[labels.max(axis=1) <= 0] = -1
            return ids
    if labels.ndim != 1:
        raise ConvertError(f"{where}: labels of shape {labels.shape}, expected [N] or one-hot [N, C]")
    if not np.issubdtype(labels.dtype, np.integer):
        if not np.all(np.isfinite(labels)) or np.any(labels != np.round(labels)):
            raise ConvertError(f"{where}: labels are not integers")
    return labels.astype(np.int64)


# ---- npz with pickled objects ---------------------------------------------------------------

ADJACENCY_KEYS = ("adj_matrix", "adj", "adjacency", "A")
FEATURE_KEYS = ("attr_matrix", "node_attr", "node_features", "features", "X", "x")
LABEL_KEYS = ("labels", "node_label", "node_labels", "y", "Y")
SPLIT_KEYS = {
    "train_idx": ("train_idx", "idx_train", "train_index", "train_mask"),
    "val_idx": ("val_idx", "idx_val", "val_index", "val_mask", "valid_idx"),
    "test_idx": ("test_idx", "idx_test", "test_index", "test_mask"),
}


def unwrap(value):
    """A 0-d object array (how np.savez stores a scipy matrix) as the object it holds."""
    if isinstance(value, np.ndarray) and value.dtype == object and value.shape == ():
        return value.item()
    return value


def csr_from_parts(data, prefix, where):
    """A CSR matrix stored as PREFIX_data/indices/indptr/shape arrays, or None."""
    if f"{prefix}_indptr" not in data:
        return None
    indptr, indices = data[f"{prefix}_indptr"], data[f"{prefix}_indices"]
    values = data[f"{prefix}_data"] if f"{prefix}_data" in data else np.ones(len(indices), np.float32)
    if f"{prefix}_shape" in data:
        shape = tuple(int(s) for s in data[f"{prefix}_shape"])
    else:
        shape = (len(indptr) - 1, int(indices.max()) + 1 if len(indices) else 0)
    try:
        return sp.csr_matrix((values, indices, indptr), shape=shape)
    except ValueError as e:
        raise ConvertError(f"{where}: {prefix}_* is not a valid CSR matrix: {e}") from e


def first_of(data, keys):
    for key in keys:
        if key in data:
            return key, unwrap(data[key])
    return None, None


def as_ids(value, n, key, where):
    """Node ids from an id list, or from a boolean (or *_mask) mask of length n."""
    value = np.asarray(value)
    if value.dtype == bool or key.endswith("_mask"):
        if value.shape != (n,):
            raise ConvertError(f"{where}: a mask of shape {value.shape} for {n} nodes")
        return np.flatnonzero(value)
    ids = value.astype(np.int64).ravel()
    bad = ids[(ids < 0) | (ids >= n)]
    if bad.size:
        raise ConvertError(f"{where}: node id {bad[0]} outside 0..{n - 1}")
    return np.sort(ids)


NPY_HEADER_READERS = {(1, 0): npy_format.read_array_header_1_0,
                      (2, 0): npy_format.read_array_header_2_0}


def read_member(archive, info, where):
    """One npz member as np.load reads it, but an object array is unpickled by load_pickle."""
    with archive.open(info) as f:
        if f.read(len(npy_format.MAGIC_PREFIX)) != npy_format.MAGIC_PREFIX:
            return archive.read(info)  # not an .npy file: numpy hands back its bytes
        f.seek(0)
        read_header = NPY_HEADER_READERS.get(npy_format.read_magic(f))
        # numpy writes an object array as the pickle of the array after the header.
        if read_header is not None and read_header(f)[2].hasobject:
            return load_pickle(f, where)
        f.seek(0)
        return npy_format.read_array(f, allow_pickle=False)


def read_npz(path):
    """The arrays of an npz by name (a member's name less .npy). Two members of one name are
    refused, where numpy would silently take the last."""
    data, member_of = {}, {}
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                if key in member_of:
                    raise ConvertError(f"{path}: members '{member_of[key]}' and '{info.filename}' "
                                       f"both hold array '{key}'; refusing to pick one")
                member_of[key] = info.filename
                data[key] = read_member(archive, info, f"{path}: array '{key}'")
    # RuntimeError: an encrypted member or a compression zipfile does not know.
    except (OSError, ValueError, EOFError, RuntimeError, zipfile.BadZipFile) as e:
        raise ConvertError(f"{path}: not a readable npz: {e}") from e
    return data


def convert_npz(path, out):
    data = read_npz(path)
    adjacency = csr_from_parts(data, "adj", path)
    if adjacency is None:
        key, adjacency = first_of(data, ADJACENCY_KEYS)
        if adjacency is None:
            raise ConvertError(f"{path}: no adjacency (looked for {', '.join(ADJACENCY_KEYS)} or "
                               f"adj_indptr/adj_indices); the archive holds: {', '.join(data)}")
        if not sp.issparse(adjacency):
            adjacency = sp.csr_matrix(np.asarray(adjacency))
    n = adjacency.shape[0]
    features = csr_from_parts(data, "attr", path)
    if features is None:
        _, features = first_of(data, FEATURE_KEYS)
        if features is not None and not sp.issparse(features):
            features = np.asarray(features, dtype=np.float32)
    key, labels = first_of(data, LABEL_KEYS)
    if labels is not None:
        labels = class_ids(labels, f"{path}: array '{key}'")
    split = {}
    for name, keys in SPLIT_KEYS.items():
        key, ids = first_of(data, keys)
        split[name] = None if ids is None else as_ids(ids, n, key, f"{path}: array '{key}'")
    write_npz(out, adjacency, features, labels, split)


# ---- raw Planetoid --------------------------------------------------------------------------


def planetoid_prefix(path, name):
    """DIR/ind.NAME from a folder and --name, or from a path to any ind.NAME.* file."""
    if os.path.isdir(path):
        if not name:
            found = sorted({f.split(".")[1] for f in os.listdir(path)
                            if f.startswith("ind.") and f.endswith(".graph")})
            if len(found) != 1:
                raise ConvertError(f"{path}: {'no' if not found else 'several'} Planetoid datasets "
                                   f"(ind.NAME.graph){': ' + ', '.join(found) if found else ''}; "
                                   "name one with --name")
            name = found[0]
        return os.path.join(path, f"ind.{name}")
    base = os.path.basename(path)
    if not base.startswith("ind."):
        raise ConvertError(f"{path}: expected a folder of ind.NAME.* files or a path ind.NAME[.x]")
    return os.path.join(os.path.dirname(path), "ind." + base.split(".")[1])


def read_pickle(path):
    try:
        with open(path, "rb") as f:
            return load_pickle(f, path)
    except FileNotFoundError as e:
        raise ConvertError(f"{path}: missing (a Planetoid dataset needs x, y, tx, ty, allx, ally, "
                           "graph and test.index)") from e


def read_test_index(path):
    ids = []
    try:
        with open(path) as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    ids.append(int(line))
                except ValueError as e:
                    raise ConvertError(f"{path}:{number}: not a node id: {line.strip()!r}") from e
    except FileNotFoundError as e:
        raise ConvertError(f"{path}: missing") from e
    return np.array(ids, dtype=np.int64)


def convert_planetoid(path, name, out):
    prefix = planetoid_prefix(path, name)
    objects = {k: read_pickle(f"{prefix}.{k}") for k in ("x", "y", "tx", "ty", "allx", "ally", "graph")}
    test_index = read_test_index(f"{prefix}.test.index")
    allx, tx = sp.csr_matrix(objects["allx"]), sp.csr_matrix(objects["tx"])
    ally, ty = np.asarray(objects["ally"]), np.asarray(objects["ty"])
    if len(test_index) != tx.shape[0] or ty.shape[0] != tx.shape[0]:
        raise ConvertError(f"{prefix}.test.index has {len(test_index)} ids for {tx.shape[0]} rows "
                           f"of tx and {ty.shape[0]} of ty")
    graph = objects["graph"]
    n_known = allx.shape[0]
    if len(np.unique(test_index)) != len(test_index):
        raise ConvertError(f"{prefix}.test.index lists a node twice")
    if test_index.size and test_index.min() < n_known:
        raise ConvertError(f"{prefix}.test.index: id {test_index.min()} is below the {n_known} "
                           "rows of allx")
    # allx's rows are nodes 0.., tx's row k is node test_index[k]; ids in between that have no
    # row (citeseer's isolated nodes) get a zero feature row and no label.
    n = max(n_known, int(test_index.max()) + 1 if test_index.size else 0,
            max(graph) + 1 if graph else 0)
    node_of_row = np.concatenate([np.arange(n_known), test_index])
    stacked = sp.vstack([allx, tx]).tocsr()
    place = sp.csr_matrix((np.ones(len(node_of_row), np.float32),
                           (node_of_row, np.arange(len(node_of_row)))), shape=(n, len(node_of_row)))
    features = (place @ stacked).tocsr()
    labels = np.zeros((n, ally.shape[1]), dtype=np.float32)
    labels[node_of_row] = np.vstack([ally, ty])
    rows, cols = [], []
    for node, neighbours in graph.items():
        for other in neighbours:
            if not 0 <= other < n:
                raise ConvertError(f"{prefix}.graph: node {node} lists neighbour {other} outside "
                                   f"0..{n - 1}")
            rows.append(node)
            cols.append(other)
    adjacency = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(n, n))
    adjacency = ((adjacency + adjacency.T) > 0).astype(np.float32)
    adjacency = sp.csr_matrix(adjacency - sp.diags(adjacency.diagonal()))
    adjacency.eliminate_zeros()
    adjacency = sp.csr_matrix(adjacency)
    adjacency.sort_indices()
    num_train = np.asarray(objects["y"]).shape[0]
    split = {"train_idx": np.arange(num_train), "val_idx": np.arange(num_train, num_train + 500),
             "test_idx": np.sort(test_index)}
    write_npz(out, adjacency, features, class_ids(labels, f"{prefix}.ally"), split)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("layout", choices=("npz", "planetoid"), help="what the input holds")
    parser.add_argument("input", help="the .npz (npz) or a folder / ind.NAME path (planetoid)")
    parser.add_argument("out", help="the .npz to write")
    parser.add_argument("--name", help="planetoid: which ind.NAME.* set of a folder")
    args = parser.parse_args(argv)
    if not args.out.endswith(".npz"):
        parser.error(f"the output must be an .npz file, got '{args.out}'")
    try:
        if args.layout == "npz":
            convert_npz(args.input, args.out)
        else:
            convert_planetoid(args.input, args.name, args.out)
    except ConvertError as e:
        print(f"convert_dataset.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
