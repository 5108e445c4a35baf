#!/usr/bin/env python3
"""Convert dataset files that C++ cannot read sensibly into an npz that Tessera loads.

Two layouts hold pickled Python objects, which only Python can unpickle:

  npz        an .npz whose arrays are pickled scipy matrices (keys such as adj_matrix,
             attr_matrix / node_attr, labels / node_label), as many GNN repositories ship;
  planetoid  the raw Planetoid files ind.NAME.{x,y,tx,ty,allx,ally,graph,test.index}
             (kimiyoung/planetoid), assembled the standard way (Kipf & Welling's load_data):
             features and labels are allx/ally then tx/ty placed by test.index, train = the
             len(y) first nodes, val = the next 500, test = the ids of test.index. A set whose
             allx has fewer than len(y) + 500 rows is refused, as PyG's Planetoid and load_data
             fail on it (their val would name test nodes or nodes that do not exist): no split
             is clipped or made up.

Both are written as the npz layout of shared/datasets' cora_planetoid.npz (adj_indptr,
adj_indices, attr_* or features, labels, train_idx/val_idx/test_idx), with no pickles:

  python3 scripts/convert_dataset.py npz IN.npz OUT.npz
  python3 scripts/convert_dataset.py planetoid DIR/ind.cora OUT.npz   # or DIR and --name cora
  tessera-train --dataset npz:OUT.npz

An existing OUT is replaced only with --force, and never when it is an input file (a link or a
second name of it included). Inputs must be regular files: a FIFO, device or folder is refused.
Every array is checked before anything is written: shapes, integral node ids within the graph,
a stored num_classes above every label (kept in OUT).

Needs numpy and scipy (Debian: python3-numpy python3-scipy). Pickles are loaded only through a
restricted unpickler that builds numpy arrays and dtypes, scipy sparse matrices and arrays (bsr,
coo, csc, csr, dia, dok, lil) and plain containers (list, tuple, dict, set, frozenset, bytes,
collections.defaultdict and OrderedDict), as numpy 1 and 2, scipy before and after 1.8 and
Python 2 name them; a pickle that names anything else (os.system, eval, subprocess.*, ...) is
refused, naming it and the file, before it runs. What a pickle builds is checked before use: a
sparse matrix by its format's own check (its arrays bypass the constructor's), numbers in lists
only up to 2 levels deep and 10^8 numbers once shared sub-lists are expanded.
"""

import argparse
import codecs
import collections
import copyreg
import importlib
import os
import pickle
import stat
import sys
import warnings
import zipfile

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
from fetch_datasets import kind_of  # noqa: E402  one name per kind of file, both scripts

try:
    import numpy as np
    import numpy.lib.format as npy_format
    import scipy.sparse as sp
except ImportError as missing:
    sys.exit(f"convert_dataset.py: needs numpy and scipy ({missing}); on Debian: "
             "apt-get install python3-numpy python3-scipy, and run it with /usr/bin/python3")


class ConvertError(Exception):
    """A problem with the input, reported as 'convert_dataset.py: <message>'."""


def reason(e):
    """An exception's message, or its type's name where it has none (MemoryError)."""
    return str(e) or type(e).__name__


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
        raise ConvertError(f"{where}: not a readable pickle: {reason(e)}") from e


# ---- checking what a pickle built -----------------------------------------------------------

MAX_NESTING = 2  # every array here is 1-D or 2-D
MAX_NUMBERS = 10**8  # numbers nested lists may expand to, a sub-list shared k times counted k times
NUMBERS = (bool, int, float, np.bool_, np.number)
NUMERIC_KINDS = "biuf"  # bool, int, unsigned, float dtypes


def count_numbers(value, where, depth=0, counted=None):
    """How many numbers `value` (a number, a numeric array, or lists/tuples of them) expands to,
    refusing anything else, nesting deeper than MAX_NESTING and more than MAX_NUMBERS. A pickle
    can share one list many times ("billion laughs": 57 KB asking for 16 GiB); `counted` memoizes
    each list by id so that costs one visit, and the depth limit stops a cycle."""
    if isinstance(value, NUMBERS):
        return 1
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in NUMERIC_KINDS:
            raise ConvertError(f"{where}: holds an array of {value.dtype} among its numbers")
        if depth + value.ndim > MAX_NESTING:
            raise ConvertError(f"{where}: numbers nested {depth + value.ndim} levels deep, "
                               f"expected at most {MAX_NESTING} (an array here is 1-D or 2-D)")
        return value.size
    if not isinstance(value, (list, tuple)):
        raise ConvertError(f"{where}: holds a {type(value).__name__} among its numbers")
    if depth >= MAX_NESTING:
        raise ConvertError(f"{where}: lists nested deeper than {MAX_NESTING} levels (an array "
                           f"here is 1-D or 2-D); refusing them")
    counted = {} if counted is None else counted
    if id(value) not in counted:
        counted[id(value)] = sum(count_numbers(item, where, depth + 1, counted) for item in value)
        if counted[id(value)] > MAX_NUMBERS:
            raise ConvertError(f"{where}: lists that expand to {counted[id(value)]} numbers (a "
                               "sub-list counts each time it is shared), over the limit of "
                               f"{MAX_NUMBERS}; refusing them")
    return counted[id(value)]


def as_array(value, where):
    """A numeric ndarray from an array, or from numbers in lists or tuples (at most 2 deep) or in
    an object array."""
    if isinstance(value, np.ndarray) and value.dtype != object:
        array = np.asarray(value)  # an np.matrix as a plain ndarray
    elif isinstance(value, (np.ndarray, list, tuple)):
        items = value.tolist() if isinstance(value, np.ndarray) else value
        count_numbers(items, where)
        try:
            array = np.asarray(items)
        except (ValueError, TypeError, OverflowError) as e:  # ragged lists, ints beyond 64 bits
            raise ConvertError(f"{where}: not an array: {reason(e)}") from e
    else:
        raise ConvertError(f"{where}: holds a {type(value).__name__}, expected an array")
    if array.dtype.kind not in NUMERIC_KINDS:
        raise ConvertError(f"{where}: holds {array.dtype} values, expected real numbers")
    return array


def checked_csr(matrix, where):
    """An unpickled scipy sparse matrix as a CSR matrix that passed scipy's full check. A pickle
    sets a matrix's arrays directly, past its constructor's checks, and scipy's conversions index
    by them unchecked: the format's own check runs first, called through the class so that a
    forged attribute cannot stand in for it, and its warnings (float indices) refuse."""
    check = getattr(type(matrix), "check_format", None) or getattr(type(matrix), "_check", None)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            if check is not None:  # csr, csc, bsr: check_format; coo: _check
                check(matrix)
            csr = sp.csr_matrix(matrix)
            csr.check_format(full_check=True)
    except Exception as e:  # forged parts fail in ValueError, TypeError, IndexError, ...
        raise ConvertError(f"{where}: not a valid {type(matrix).__name__}: {reason(e)}") from e
    return csr


def matrix_or_array(value, where):
    """An unpickled value as a checked CSR matrix (from any scipy sparse format) or an ndarray."""
    return checked_csr(value, where) if sp.issparse(value) else as_array(value, where)


def matrix_2d(value, where, what):
    """A checked CSR matrix or a 2-D ndarray, refusing any other shape."""
    matrix = matrix_or_array(value, where)
    if matrix.ndim != 2:
        raise ConvertError(f"{where}: {what} of shape {matrix.shape}, expected 2-D")
    return matrix


def as_integers(values, where, what):
    """`values` as int64, refusing fractions, NaN and infinities (3.0 is 3; 0.9 is refused, not
    truncated to 0)."""
    if values.dtype.kind == "f":
        flat = values.ravel()
        bad = np.flatnonzero(~np.isfinite(flat) | (flat != np.round(flat)))
        if bad.size:
            raise ConvertError(f"{where}: {what} {flat[bad[0]]} at index {bad[0]} is not an "
                               "integer")
    return values.astype(np.int64)


def check_in_range(values, limit, where, what):
    """Refuses the first of `values` (int64) outside 0..limit-1."""
    bad = np.flatnonzero((values < 0) | (values >= limit))
    if bad.size:
        raise ConvertError(f"{where}: {what} {values[bad[0]]} outside 0..{limit - 1} "
                           f"(at index {bad[0]})")


# ---- files ----------------------------------------------------------------------------------

def require_regular_file(path):
    """Refuses `path` unless it is a regular file (or a link to one), before it is opened: a FIFO
    blocks the read and /dev/zero never ends. A missing file raises FileNotFoundError."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise ConvertError(f"{path}: is {kind_of(mode)}, not a regular file")


def check_output(out, inputs, force):
    """Refuses an `out` that is a link or not a regular file (never written through), that is one
    of the `inputs` (even with --force), or that exists, unless `force`."""
    if not os.path.lexists(out):
        return
    if os.path.islink(out) or not os.path.isfile(out):
        raise ConvertError(f"{out}: exists and is not a regular file; refusing to replace it")
    for path in inputs:
        if os.path.exists(path) and os.path.samefile(path, out):
            raise ConvertError(f"{out}: is the input {path} (the same file); refusing to replace "
                               "it, even with --force")
    if not force:
        raise ConvertError(f"{out}: exists; pass --force to replace it")


# ---- writing --------------------------------------------------------------------------------


def write_npz(out, adjacency, features, labels, split, num_classes=None, row_normalize=False):
    """Writes the loader's npz layout to `out` (through a temporary file, then renamed). Every
    argument was checked by its reader: a square CSR adjacency [N, N], features [N, F] (CSR or
    dense) or None, labels [N] or None, sorted ids in 0..N-1 or None, and the num_classes the input
    stored (kept) or None. `row_normalize` records that the data's published recipe row-normalizes
    its features (the key row_normalize_features, which training's default follows)."""
    n = adjacency.shape[0]
    arrays = {
        "adj_indptr": adjacency.indptr.astype("<i8"),
        "adj_indices": adjacency.indices.astype("<i8"),
        "adj_shape": np.array(adjacency.shape, dtype="<i8"),
    }
    summary = f"{n} nodes, {adjacency.nnz} adjacency entries"
    if features is not None:
        if sp.issparse(features):
            x = sp.csr_matrix(features)
            x.sort_indices()
            arrays.update(attr_indptr=x.indptr.astype("<i8"), attr_indices=x.indices.astype("<i8"),
                          attr_data=x.data.astype("<f4"), attr_shape=np.array(x.shape, dtype="<i8"))
        else:
            arrays["features"] = np.ascontiguousarray(features, dtype="<f4")
        summary += f", {features.shape[1]} features"
    if num_classes is not None:
        arrays["num_classes"] = np.array(num_classes, dtype="<i8")
    if row_normalize:
        arrays["row_normalize_features"] = np.array(1, dtype="<i8")
    if labels is not None:
        arrays["labels"] = labels.astype("<i8")
        if num_classes is None:
            num_classes = int(labels.max()) + 1 if labels.size else 0
        summary += f", {num_classes} classes"
    for name, ids in split.items():
        if ids is not None:
            arrays[name] = np.asarray(ids, dtype="<i8")
    if split.get("train_idx") is not None:
        summary += ", split " + " / ".join(str(len(split[k]) if split[k] is not None else 0)
                                           for k in ("train_idx", "val_idx", "test_idx"))
    # A fresh file beside `out`, then a rename onto it: check_output refused links and devices.
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
    print(f"wrote {out}: {summary}")


MAX_CLASS_SLACK = 1024  # a class count may exceed the labelled nodes by this much (as Tessera's)


def class_ids(labels, where):
    """Class ids [N] from integer labels [N] (or [N, 1]) or one-hot rows [N, C] (a row of zeros
    becomes -1, unlabelled). A row with more than one 1, or values other than 0 and 1, is refused;
    so are ids below -1 and ids beyond the labelled nodes + MAX_CLASS_SLACK (a class count far
    beyond the data would size a model by a number, not by the data)."""
    labels = labels.toarray() if sp.issparse(labels) else labels
    if labels.ndim == 2:
        if labels.shape[1] == 1:
            labels = labels[:, 0]
        else:
            bad = np.flatnonzero(((labels != 0) & (labels != 1)).any(axis=1) |
                                 ((labels == 1).sum(axis=1) > 1))
            if bad.size:
                row = bad[0]
                raise ConvertError(f"{where}: row {row} ({labels[row].tolist()[:10]}) is not "
                                   "one-hot: a label row holds one 1 (or only zeros, unlabelled)")
            ids = labels.argmax(axis=1).astype(np.int64)
            ids[labels.max(axis=1) <= 0] = -1
            return ids
    if labels.ndim != 1:
        raise ConvertError(f"{where}: labels of shape {labels.shape}, expected [N] or one-hot "
                           "[N, C]")
    ids = as_integers(labels, where, "label")
    limit = int((ids >= 0).sum()) + MAX_CLASS_SLACK
    bad = np.flatnonzero((ids < -1) | (ids >= limit))
    if bad.size:
        raise ConvertError(f"{where}: label {ids[bad[0]]} at index {bad[0]} is outside -1.."
                           f"{limit - 1} (-1: unlabelled; at most the labelled nodes + "
                           f"{MAX_CLASS_SLACK} classes)")
    return ids


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
    """A checked CSR matrix stored as PREFIX_indptr/indices[/data/shape] arrays, or None."""
    if f"{prefix}_indptr" not in data:
        return None
    if f"{prefix}_indices" not in data:
        raise ConvertError(f"{where}: array '{prefix}_indptr' without '{prefix}_indices'")
    part = {k: as_array(unwrap(data[f"{prefix}_{k}"]), f"{where}: array '{prefix}_{k}'")
            for k in ("indptr", "indices", "data", "shape") if f"{prefix}_{k}" in data}
    indptr = as_integers(part["indptr"], f"{where}: array '{prefix}_indptr'", "offset")
    indices = as_integers(part["indices"], f"{where}: array '{prefix}_indices'", "column")
    values = part["data"] if "data" in part else np.ones(len(indices), np.float32)
    if "shape" in part:
        shape = tuple(as_integers(part["shape"], f"{where}: array '{prefix}_shape'", "size"))
    else:
        shape = (len(indptr) - 1, int(indices.max()) + 1 if len(indices) else 0)
    if len(shape) != 2 or min(shape) < 0:
        raise ConvertError(f"{where}: array '{prefix}_shape' is {shape}, expected 2 sizes")
    check_in_range(indices, shape[1], f"{where}: array '{prefix}_indices'", "column")
    try:
        matrix = sp.csr_matrix((values, indices, indptr), shape=shape)
    except (ValueError, TypeError) as e:
        raise ConvertError(f"{where}: {prefix}_* is not a valid CSR matrix: {reason(e)}") from e
    return checked_csr(matrix, f"{where}: {prefix}_*")


def first_of(data, keys):
    """(the first of `keys` that `data` holds, its value), or (None, None)."""
    for key in keys:
        if key in data:
            return key, unwrap(data[key])
    return None, None


def as_ids(value, n, key, where):
    """Sorted node ids from an id list, or from a boolean (or *_mask) mask of length n."""
    value = as_array(value, where)
    if value.dtype == bool or key.endswith("_mask"):
        if value.shape != (n,):
            raise ConvertError(f"{where}: a mask of shape {value.shape} for {n} nodes")
        return np.flatnonzero(value)
    ids = as_integers(value.ravel(), where, "node id")
    check_in_range(ids, n, where, "node id")
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
        require_regular_file(path)
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
        raise ConvertError(f"{path}: not a readable npz: {reason(e)}") from e
    return data


def read_adjacency(data, path):
    """The adjacency as a checked square CSR matrix [N, N]."""
    adjacency = csr_from_parts(data, "adj", path)
    where = f"{path}: adj_*"
    if adjacency is None:
        key, adjacency = first_of(data, ADJACENCY_KEYS)
        if key is None:
            raise ConvertError(f"{path}: no adjacency (looked for {', '.join(ADJACENCY_KEYS)} or "
                               f"adj_indptr/adj_indices); the archive holds: {', '.join(data)}")
        where = f"{path}: array '{key}'"
        adjacency = sp.csr_matrix(matrix_2d(adjacency, where, "an adjacency"))
    n = adjacency.shape[0]
    if adjacency.shape != (n, n):
        raise ConvertError(f"{where}: an adjacency of shape {adjacency.shape}, expected square")
    return adjacency


def read_features(data, n, path):
    """Features [N, F] as a checked CSR matrix or a float32 array, or None."""
    features = csr_from_parts(data, "attr", path)
    where = f"{path}: attr_*"
    if features is None:
        key, features = first_of(data, FEATURE_KEYS)
        if key is None:
            return None
        where = f"{path}: array '{key}'"
        features = matrix_2d(features, where, "features")
        if not sp.issparse(features):
            features = features.astype(np.float32)
    if features.shape[0] != n:
        raise ConvertError(f"{where}: features of shape {features.shape} for {n} nodes, "
                           f"expected [{n}, F]")
    return features


def read_labels(data, n, path):
    """(class ids [N] or None, the stored num_classes or None)."""
    key, labels = first_of(data, LABEL_KEYS)
    if key is not None:
        where = f"{path}: array '{key}'"
        labels = class_ids(matrix_or_array(labels, where), where)
        if labels.shape[0] != n:
            raise ConvertError(f"{where}: {labels.shape[0]} labels for {n} nodes")
    if "num_classes" not in data:
        return labels, None
    where = f"{path}: array 'num_classes'"
    stored = as_array(unwrap(data["num_classes"]), where)
    if stored.size != 1:
        raise ConvertError(f"{where}: of shape {stored.shape}, expected one class count")
    num_classes = int(as_integers(stored.ravel(), where, "class count")[0])
    least = int(labels.max()) + 1 if labels is not None and labels.size else 0
    if num_classes < least:
        raise ConvertError(f"{where}: is {num_classes}, but the labels need at least {least} "
                           "classes")
    return labels, num_classes


def convert_npz(path, out, force):
    check_output(out, [path], force)
    data = read_npz(path)
    adjacency = read_adjacency(data, path)
    n = adjacency.shape[0]
    features = read_features(data, n, path)
    labels, num_classes = read_labels(data, n, path)
    split = {}
    for name, keys in SPLIT_KEYS.items():
        key, ids = first_of(data, keys)
        split[name] = None if key is None else as_ids(ids, n, key, f"{path}: array '{key}'")
    write_npz(out, adjacency, features, labels, split, num_classes)


# ---- raw Planetoid --------------------------------------------------------------------------

PLANETOID_PICKLES = ("x", "y", "tx", "ty", "allx", "ally", "graph")
PLANETOID_VAL_SIZE = 500  # Planetoid's val: the 500 nodes after the len(y) train nodes


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
        require_regular_file(path)
        with open(path, "rb") as f:
            return load_pickle(f, path)
    except FileNotFoundError as e:
        raise ConvertError(f"{path}: missing (a Planetoid dataset needs x, y, tx, ty, allx, ally, "
                           "graph and test.index)") from e
    except OSError as e:
        raise ConvertError(f"{path}: cannot read: {e.strerror}") from e


def read_test_index(path):
    ids = []
    try:
        require_regular_file(path)
        with open(path) as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    ids.append(int(line))
                except ValueError as e:
                    raise ConvertError(f"{path}:{number}: not a node id: {line.strip()!r}") from e
                if not 0 <= ids[-1] < 2**63:
                    raise ConvertError(f"{path}:{number}: node id {ids[-1]} is negative or "
                                       "beyond 64 bits")
    except FileNotFoundError as e:
        raise ConvertError(f"{path}: missing") from e
    except OSError as e:
        raise ConvertError(f"{path}: cannot read: {e.strerror}") from e
    return np.array(ids, dtype=np.int64)


def is_node_id(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0


def check_graph(graph, where):
    """Planetoid's graph: a dict (or defaultdict) of node id -> list of neighbour ids, every id a
    non-negative integer."""
    if not isinstance(graph, dict):
        raise ConvertError(f"{where}: holds a {type(graph).__name__}, expected a dict of node id "
                           "-> list of neighbour ids")
    for node, neighbours in graph.items():
        if not is_node_id(node):
            raise ConvertError(f"{where}: key {node!r:.40} is not a node id (a non-negative "
                               "integer)")
        if not isinstance(neighbours, (list, tuple)):
            raise ConvertError(f"{where}: node {node} maps to a {type(neighbours).__name__}, "
                               "expected a list of neighbour ids")
        for other in neighbours:
            if not is_node_id(other):
                raise ConvertError(f"{where}: node {node} lists neighbour {other!r:.40}, not a "
                                   "node id (a non-negative integer)")


def convert_planetoid(path, name, out, force):
    prefix = planetoid_prefix(path, name)
    check_output(out, [f"{prefix}.{k}" for k in (*PLANETOID_PICKLES, "test.index")], force)
    objects = {k: read_pickle(f"{prefix}.{k}") for k in PLANETOID_PICKLES}
    test_index = read_test_index(f"{prefix}.test.index")
    allx, tx, ally, ty, y = (matrix_2d(objects[k], f"{prefix}.{k}", "a matrix")
                             for k in ("allx", "tx", "ally", "ty", "y"))
    allx, tx = sp.csr_matrix(allx), sp.csr_matrix(tx)
    ally, ty = (m.toarray() if sp.issparse(m) else m for m in (ally, ty))
    if len(test_index) != tx.shape[0] or ty.shape[0] != tx.shape[0]:
        raise ConvertError(f"{prefix}.test.index has {len(test_index)} ids for {tx.shape[0]} rows "
                           f"of tx and {ty.shape[0]} of ty")
    if ally.shape[0] != allx.shape[0]:
        raise ConvertError(f"{prefix}.ally: {ally.shape[0]} rows for the {allx.shape[0]} of allx")
    if tx.shape[1] != allx.shape[1] or ty.shape[1] != ally.shape[1]:
        raise ConvertError(f"{prefix}.tx, ty: {tx.shape[1]} feature and {ty.shape[1]} class "
                           f"columns, where allx and ally have {allx.shape[1]} and "
                           f"{ally.shape[1]}")
    graph = objects["graph"]
    check_graph(graph, f"{prefix}.graph")
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
    # PyG's Planetoid and Kipf & Welling's load_data take val = the 500 ids after train, and
    # fail when those are not all nodes of the graph; the test nodes start after allx's rows.
    num_train = y.shape[0]
    if num_train + PLANETOID_VAL_SIZE > n_known:
        raise ConvertError(f"{prefix}.y: Planetoid's split takes train = nodes 0..{num_train - 1} "
                           f"and val = the next {PLANETOID_VAL_SIZE}, but only nodes "
                           f"0..{n_known - 1} (the rows of allx) are neither test nodes nor "
                           "missing; refusing a val that would name those (PyG fails here too)")
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
            if other >= n:
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
    split = {"train_idx": np.arange(num_train),
             "val_idx": np.arange(num_train, num_train + PLANETOID_VAL_SIZE),
             "test_idx": np.sort(test_index)}
    # Planetoid's sets are bag-of-words citation graphs, row-normalized by their recipe.
    write_npz(out, adjacency, features, class_ids(labels, f"{prefix}.ally"), split,
              row_normalize=True)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("layout", choices=("npz", "planetoid"), help="what the input holds")
    parser.add_argument("input", help="the .npz (npz) or a folder / ind.NAME path (planetoid)")
    parser.add_argument("out", help="the .npz to write (new, or an existing one with --force)")
    parser.add_argument("--name", help="planetoid: which ind.NAME.* set of a folder")
    parser.add_argument("--force", action="store_true",
                        help="replace an existing OUT (never an input file, nor through a link)")
    args = parser.parse_args(argv)
    if not args.out.endswith(".npz"):
        parser.error(f"the output must be an .npz file, got '{args.out}'")
    try:
        if args.layout == "npz":
            convert_npz(args.input, args.out, args.force)
        else:
            convert_planetoid(args.input, args.name, args.out, args.force)
    except ConvertError as e:
        print(f"convert_dataset.py: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # a fault no check above foresaw: still one line naming the input
        print(f"convert_dataset.py: {args.input}: cannot convert it: {type(e).__name__}"
              f"{': ' + str(e) if str(e) else ''}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
