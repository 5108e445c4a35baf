// One loader per file format and the two generators; load_dataset() chooses among them.
#pragma once

#include "tessera/core/device.hpp"
#include "tessera/datasets/dataset.hpp"
#include "tessera/datasets/row_block.hpp"
#include "tessera/graph/graph.hpp"
#include "tessera/io/graph_files.hpp"

#include <cstdint>
#include <functional>
#include <string>

namespace tessera::datasets::detail {

/// An .npz with Planetoid-style keys (adj_indptr, adj_indices, optional adj_shape, attr_* sparse
/// or `features` dense, labels, num_classes, and a split as train_idx/val_idx/test_idx ids or as
/// train_masks/val_masks/test_masks [S, N] masks, of which `split_index` is used), as
/// cora_planetoid.npz, gnn-benchmark's files and save_npz() write them. The adjacency is
/// symmetrized. Where ids are read, integers only (a boolean mask is refused); masks are
/// booleans or 0/1 integers.
Dataset load_csr_npz(const BackendPtr& backend, const std::string& path, int split_index = 0);

/// An .npz of the heterophilous benchmark (node_features, node_labels, edges [E, 2],
/// train/val/test_masks [S, N]); `split_index` selects the mask row.
Dataset load_heterophilous_npz(const BackendPtr& backend, const std::string& path, int split_index);

/// True when the archive at `path` holds the heterophilous keys (edges, node_features).
bool is_heterophilous_npz(const std::string& path);

/// Either of the two above, chosen by the keys the archive holds.
Dataset load_any_npz(const BackendPtr& backend, const std::string& path, int split_index);

/// LINQS text: `content_path` (id, features..., class per line), the .cites file beside it.
Dataset load_linqs(const BackendPtr& backend, const std::string& content_path);

/// The .cites file beside a .content file: cora.content[.gz] -> cora.cites[.gz].
std::string cites_path_for(const std::string& content_path);

/// The three files of a MUSAE dataset from its edges file. Throws InvalidArgument when the name
/// is not <prefix>_edges.csv[.gz].
struct MusaePaths {
  std::string edges, target, features;
};
MusaePaths musae_paths(const std::string& edges_path);

/// A SNAP edge list (`#` comments, whitespace-separated ids); num_nodes = largest id + 1.
graph::EdgeList read_snap_edges(const std::string& path);

/// A graph-only dataset from a SNAP edge list.
Dataset load_snap(const BackendPtr& backend, const std::string& path);

/// SNAP email-Eu-core: the edge list, `node dept` labels and one-hot identity features.
Dataset load_email_eu_core(const BackendPtr& backend, const std::string& edges_path,
                           const std::string& labels_path);

/// A graph in METIS format (1-based neighbour lists after an "n m [fmt [ncon]]" header).
Dataset load_metis_graph(const BackendPtr& backend, const std::string& path);

/// A MUSAE dataset from its edges csv (<prefix>_edges.csv[.gz]); <prefix>_target.csv[.gz] and
/// <prefix>.json[.gz] beside it give labels and sparse features.
Dataset load_musae(const BackendPtr& backend, const std::string& edges_path);

/// An OGB node-property dataset folder as the ogb package leaves it: DIR/raw/{num-node-list,
/// node-label, node-feat, edge}.csv.gz (node-feat optional: identity features without it) and
/// DIR/split/<scheme>/{train,valid,test}.csv.gz (the folder's one scheme). Counts come from the
/// rows: num-node-list must agree with node-label's rows, node-feat must have one row per node.
/// Labels: one class id per line, "nan" for none. Throws IoError / FormatError naming the file
/// and line.
Dataset load_ogb(const BackendPtr& backend, const std::string& dir);

/// A Matrix Market coordinate matrix read as a graph (values ignored).
Dataset load_matrix_market(const BackendPtr& backend, const std::string& path);

/// True when `path` is a folder written by save_native (it holds dataset.json).
bool is_native_dataset(const std::string& path);

/// Throws IoError "'DIR' has no dataset.json (not a native dataset; ...)".
[[noreturn]] void throw_not_native(const std::string& dir);

/// Reads a native dataset folder (see datasets/native.cpp for the layout) with stored split
/// `split_index` in use (every split kept when it stores several). Refuses an index beyond them.
Dataset load_native(const BackendPtr& backend, const std::string& dir, int split_index = 0);

/// The rows of a native dataset folder that `choose` picks from its node count, each file read
/// only where they lie, with split `split_index`; checks what load_native checks that the rows
/// hold (load_dataset_rows), the split's parts within them included (check_split_parts).
RowBlock load_native_rows(const std::string& dir,
                          const std::function<RowRange(std::int64_t num_nodes)>& choose,
                          int split_index, bool allow_overlap);

/// The number of splits a native dataset folder stores (dataset.json's num_splits; for a folder
/// written before it was recorded, 1 when its split files hold ids, else 0).
std::int64_t native_split_count(const std::string& dir);

/// The block of rows `rows` of a dataset from `files`, which hold those rows (and the split ids
/// inside them): row pointers and columns widened to 64 bits, the rest moved.
RowBlock make_row_block(std::string name, std::int64_t num_nodes, std::int32_t num_classes,
                        RowRange rows, io::GraphFiles&& files);

/// R-MAT graph from "scale=..,edge-factor=..,features=..,classes=.." (empty = defaults).
Dataset generate_rmat(const BackendPtr& backend, const std::string& params, std::uint64_t seed);

/// Stochastic block model from "nodes=..,classes=..,avg-degree=..,p-in=..,features=..,noise=..".
Dataset generate_sbm(const BackendPtr& backend, const std::string& params, std::uint64_t seed);

/// Gaussian class clusters without edges, for plain classifiers, from
/// "samples=..,features=..,classes=..,separation=..,noise=..[,seed=..]" (a seed in the spec
/// overrides `seed`); random 80/10/10 split.
Dataset generate_blobs(const BackendPtr& backend, const std::string& params, std::uint64_t seed);

} // namespace tessera::datasets::detail
