// A node-classification dataset in memory, and loading one by name, format:path or generator spec.
#pragma once

#include "tessera/core/device.hpp"
#include "tessera/core/tensor.hpp"
#include "tessera/graph/features.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::datasets {

/// One train/val/test split: the node ids of each part, ascending.
struct Split {
  std::vector<std::int32_t> train, val, test;
};

/// A graph with features, labels and a train/val/test split.
struct Dataset {
  std::string name; ///< a known name, the generator spec, or the file name without extensions
  std::int64_t num_nodes = 0;
  /// [num_nodes, num_nodes] symmetric adjacency, no self-loops, no duplicates, sorted columns,
  /// values 1.
  Csr adjacency;
  graph::Features features; ///< [num_nodes, F] (none for structure-only formats)
  /// Class of each node in [0, num_classes), or -1 when unknown. Empty when the data has none.
  std::vector<std::int32_t> labels;
  std::int32_t num_classes = 0;
  /// Node ids of each part of the split in use, ascending: the stored split the loader was asked
  /// for (LoadOptions::split_index) or one drawn by make_random_split. Empty without a split.
  std::vector<std::int32_t> train_idx, val_idx, test_idx;
  /// Whether the data stores a split: any part of one, even an empty one (a key, a file, a mask).
  /// A stored split is checked when loaded (check_split) and never replaced by a random one.
  bool split_stored = false;
  /// Every split the data stores when it stores several (the heterophilous benchmark stores 10),
  /// in order, so that a converted copy keeps them all; empty when it stores one or none (then
  /// the split is train_idx / val_idx / test_idx).
  std::vector<Split> all_splits;
  /// Where the parts were read from, for messages ("FILE: array 'labels'"); empty when generated.
  struct Origin {
    std::string features, labels, split;
  } origin;
  /// Whether the dataset's published recipe row-normalizes its features, as training does by
  /// default: the bag-of-words citation sets of Planetoid and LINQS (Cora, CiteSeer, PubMed),
  /// known by name (recipe_row_normalizes), or data that records it (an npz's
  /// row_normalize_features, a native dataset's dataset.json). Off for everything else: counts,
  /// ratings and embeddings lose information when rows are scaled to sum to 1.
  bool row_normalize = false;

  /// Whether labels / a split are present.
  bool has_labels() const { return !labels.empty(); }
  bool has_split() const { return split_stored || !train_idx.empty(); }
  /// How many splits the data stores: all_splits.size() when several, else 1 with a split and 0
  /// without.
  std::int64_t num_splits() const {
    if (!all_splits.empty()) return static_cast<std::int64_t>(all_splits.size());
    return has_split() ? 1 : 0;
  }
};

/// Options that apply to every loader.
struct LoadOptions {
  /// Folder holding the shared datasets (the layout of shared/datasets/README.md); empty means
  /// default_data_dir().
  std::string data_dir;
  /// Which of several stored splits to use (minesweeper has 10).
  int split_index = 0;
  /// Seed of generated graphs and features.
  std::uint64_t seed = 0;
  /// Accept a stored split whose parts share nodes (train and test overlapping, say), which is
  /// refused by default (--allow-split-overlap): its accuracy would mean nothing.
  bool allow_split_overlap = false;
};

/// Loads `spec`:
///  - a name resolved under options.data_dir: cora (Planetoid split), cora-linqs, cora-gnnbench,
///    minesweeper, facebook, email-eu-core, slashdot, 4elt;
///  - a native dataset folder (save_native), by its path or as native:DIR;
///  - FORMAT:PATH with FORMAT one of native, npz (Planetoid-style or gnn-benchmark keys),
///    planetoid, gnnbench, heterophilous, linqs (PATH = the .content file, .cites beside it),
///    snap, metis, musae (PATH = the edges csv), mtx, ogb (PATH = an OGB node-property dataset
///    folder as the ogb package downloads it: raw/*.csv.gz and split/<scheme>/*.csv.gz);
///  - a generator: rmat:scale=20,edge-factor=16,features=128,classes=16 or
///    sbm:nodes=10000,classes=8,avg-degree=10,p-in=0.8,features=64,noise=1.0[,structure-seed=S]
///    (S: another graph of the same classes and feature distributions), or Gaussian class
///    clusters without edges for plain classifiers,
///    blobs:samples=10000,features=64,classes=4,separation=6,noise=1[,seed=S].
/// Everything lands in host memory: `backend` must be a CPU backend. Throws IoError /
/// FormatError naming the file and the problem, InvalidArgument for bad specs or a non-CPU
/// backend.
Dataset load_dataset(const BackendPtr& backend, const std::string& spec,
                     const LoadOptions& options);

/// The files and folders load_dataset(spec, options) reads (a named dataset's files under the data
/// folder, FORMAT:PATH's file and the files beside it, a native or OGB folder), without reading
/// them: what a job's outputs must not overwrite. Empty for a generator.
std::vector<std::string> dataset_inputs(const std::string& spec, const LoadOptions& options);

/// The default data folder: $TESSERA_DATA_DIR, else $XDG_CACHE_HOME/tessera/datasets, else
/// ~/.cache/tessera/datasets.
std::string default_data_dir();

/// Labels `fraction_train` / `fraction_val` of the labelled nodes (label >= 0) as train / val
/// and the rest as test, deterministically from `seed`; replaces any split. For datasets without
/// a published split. Throws InvalidArgument for negative fractions, fractions summing above 1,
/// or a dataset without labels.
void make_random_split(Dataset& dataset, double fraction_train, double fraction_val,
                       std::uint64_t seed);

/// Whether a dataset named `name` is one whose published recipe row-normalizes its features: a
/// name that starts with cora, citeseer or pubmed (any case; "cora", "cora-linqs",
/// "cora_planetoid", "CiteSeer", "pubmed-diabetes").
bool recipe_row_normalizes(std::string_view name);

/// Divides each feature row by its L1 norm (zero rows stay 0): for non-negative features this is
/// the row normalization of Kipf & Welling and PyG's NormalizeFeatures. Host memory only.
void row_normalize_features(graph::Features& features);

/// Writes `dataset` as an uncompressed .npz that load_dataset("npz:PATH") and numpy's np.load
/// read back: adj_indptr, adj_indices <i8 and adj_shape (the symmetric adjacency as CSR);
/// attr_indptr, attr_indices <i8, attr_data <f4, attr_shape for sparse features, or features <f4
/// [N, F] for dense ones; labels <i8 [N] and num_classes <i8 (0-d) when labelled; train_idx,
/// val_idx, test_idx <i8 when split. Written to a temporary file and renamed onto `path`.
/// Throws IoError when the file cannot be written (also above 4 GiB: no zip64), and
/// InvalidArgument when adjacency, features or labels disagree with num_nodes.
void save_npz(const Dataset& dataset, const std::string& path);

/// Writes `dataset` as a native dataset folder: binary array files with checksummed headers and a
/// dataset.json written last, which "native:DIR" (or just DIR) loads at disk speed. The folder is
/// claimed for the whole write (io::OutputFolder, kind "native dataset"): it must be new, empty,
/// or a native dataset, which is replaced only when `replace` (--force); "/", other folders and a
/// folder another process is writing are refused. Throws IoError naming the folder or file.
void save_native(const Dataset& dataset, const std::string& dir, bool replace = false);

/// Whether `out` names an .npz file (".npz" in any case: "G.NPZ" too) rather than a native folder.
bool is_npz_path(std::string_view out) noexcept;

/// The preflight of save_npz (is_npz_path(out)) or save_native (any other `out`), for a caller
/// about to load or compute what goes there: throws IoError naming `out` now when the write would
/// be refused later (a missing folder, a foreign non-empty folder, an existing native dataset
/// without `replace`, ...) or when `out` is an existing file and not `replace` (what was written
/// there is replaced only when asked). Creates nothing.
void check_save_target(const std::string& out, bool replace);

/// The split a dataset without a published one is trained with, the same for every path that
/// needs one (in-memory training, tessera-partition's store): a random 60/20/20 split of the
/// labelled nodes by make_random_split with `seed`. Does nothing and returns false when the
/// dataset has a split or no labels; returns true when it made one.
bool use_default_split_when_missing(Dataset& dataset, std::uint64_t seed);

} // namespace tessera::datasets
