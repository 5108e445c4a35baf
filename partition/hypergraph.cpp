// Hypergraph partitioning with Zoltan's PHG, on one process or on every rank's rows: one net per
// vertex holding the vertex and its neighbours, so that the connectivity − 1 cut PHG minimizes is
// the halo volume.
#include "hypergraph.hpp"

#include "mpi_scope.hpp"
#include "tessera/core/error.hpp"

#include <algorithm>
#include <climits>
#include <fmt/core.h>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <zoltan.h>

namespace tessera::partition {

std::vector<std::pair<std::string, std::string>> hypergraph_over_ranks_params() {
  return {{"PHG_MATCH_EDGE_SIZE_THRESHOLD", "50"}, {"PHG_COARSENING_METHOD", "l-ipm"}};
}

} // namespace tessera::partition

namespace tessera::partition::detail {

void check_zoltan_limits(std::int64_t nodes, std::int64_t pins) {
  // Zoltan counts objects and pins in int, and names them in ZOLTAN_ID_TYPE.
  constexpr std::int64_t kMax = std::min<std::int64_t>(std::numeric_limits<int>::max(),
                                                       std::numeric_limits<ZOLTAN_ID_TYPE>::max());
  if (nodes > kMax || pins > kMax) {
    throw PartitionerError(fmt::format(
        "graph has {} nodes and {} hypergraph pins (nodes + nonzeros without self-loops), but "
        "Zoltan counts them in int and names them in {}-bit ZOLTAN_ID_TYPE: at most {} each; use "
        "METIS or the block or random method",
        nodes, pins, CHAR_BIT * sizeof(ZOLTAN_ID_TYPE), kMax));
  }
}

namespace {

const char* zoltan_code_name(int code) {
  switch (code) {
  case ZOLTAN_WARN:
    return "ZOLTAN_WARN";
  case ZOLTAN_FATAL:
    return "ZOLTAN_FATAL";
  case ZOLTAN_MEMERR:
    return "ZOLTAN_MEMERR";
  default:
    return "unknown code";
  }
}

/// Throws PartitionerError naming `call` unless Zoltan returned ZOLTAN_OK; a warning counts as a
/// failure, as it means Zoltan ignored part of what it was given.
void check(int code, const std::string& call) {
  if (code == ZOLTAN_OK) return;
  throw PartitionerError(fmt::format("{} failed with {} ({})", call, zoltan_code_name(code), code));
}

/// This process's part of the hypergraph in Zoltan's compressed-net form, read by the query
/// functions below: the vertices [first, first + n) and their nets.
struct Hypergraph {
  ZOLTAN_ID_TYPE first = 0;            // global id of the first vertex here
  std::vector<int> net_begin;          // [n] first pin of net v; net v is vertex first + v's row
  std::vector<ZOLTAN_ID_TYPE> pins;    // [n + nonzeros without self-loops]: v, then its neighbours
  std::vector<float> vertex_weights;   // [n]
  std::span<const std::int32_t> owner; // [n] the parts to evaluate; empty when partitioning
  std::int64_t num_nodes = 0;          // of the whole graph, which row_share splits over `ranks`
  int ranks = 1;

  /// The pins of net v after v itself: v's neighbours.
  std::span<const ZOLTAN_ID_TYPE> neighbours(std::int64_t v) const {
    const auto begin = static_cast<std::size_t>(net_begin[v]) + 1;
    const std::size_t end = v + 1 < static_cast<std::int64_t>(net_begin.size())
                                ? static_cast<std::size_t>(net_begin[v + 1])
                                : pins.size();
    return std::span(pins).subspan(begin, end - begin);
  }
};

/// The nets of rows [first, first + n): row_ptr [n + 1] into col, the neighbours' global ids.
/// The caller checked the sizes against Zoltan's (check_zoltan_limits).
template <typename Col>
Hypergraph to_hypergraph(std::int64_t first, std::span<const Offset> row_ptr,
                         std::span<const Col> col, std::span<const std::int64_t> vertex_weights) {
  const auto n = static_cast<std::int64_t>(row_ptr.size()) - 1;
  Hypergraph hg;
  hg.first = static_cast<ZOLTAN_ID_TYPE>(first);
  hg.net_begin.resize(static_cast<std::size_t>(n));
  hg.pins.reserve(static_cast<std::size_t>(n + row_ptr[n] - row_ptr[0]));
  for (std::int64_t v = 0; v < n; ++v) {
    hg.net_begin[v] = static_cast<int>(hg.pins.size());
    hg.pins.push_back(static_cast<ZOLTAN_ID_TYPE>(first + v));
    for (Offset k = row_ptr[v]; k < row_ptr[v + 1]; ++k) {
      if (col[k] != first + v) hg.pins.push_back(static_cast<ZOLTAN_ID_TYPE>(col[k]));
    }
  }
  hg.vertex_weights.assign(vertex_weights.begin(), vertex_weights.end());
  return hg;
}

Hypergraph to_hypergraph(const Csr& a, std::span<const std::int64_t> vertex_weights) {
  check_zoltan_limits(a.rows(), a.rows() + a.nnz()); // a bound: self-loops included
  return to_hypergraph(0, std::span(a.row_ptr(), static_cast<std::size_t>(a.rows() + 1)),
                       std::span(a.col(), static_cast<std::size_t>(a.nnz())), vertex_weights);
}

// ---- query functions (global id of vertex first + v; no local ids) ---------------------------

int num_objects(void* data, int* ierr) {
  *ierr = ZOLTAN_OK;
  return static_cast<int>(static_cast<const Hypergraph*>(data)->net_begin.size());
}

void object_list(void* data, int /*num_gid_entries*/, int /*num_lid_entries*/,
                 ZOLTAN_ID_PTR global_ids, ZOLTAN_ID_PTR /*local_ids*/, int /*wgt_dim*/,
                 float* weights, int* ierr) {
  const auto& hg = *static_cast<const Hypergraph*>(data);
  for (std::size_t v = 0; v < hg.vertex_weights.size(); ++v) {
    global_ids[v] = hg.first + static_cast<ZOLTAN_ID_TYPE>(v);
    weights[v] = hg.vertex_weights[v];
  }
  *ierr = ZOLTAN_OK;
}

void hypergraph_size(void* data, int* num_nets, int* num_pins, int* format, int* ierr) {
  const auto& hg = *static_cast<const Hypergraph*>(data);
  *num_nets = static_cast<int>(hg.net_begin.size());
  *num_pins = static_cast<int>(hg.pins.size());
  *format = ZOLTAN_COMPRESSED_EDGE;
  *ierr = ZOLTAN_OK;
}

void hypergraph_nets(void* data, int /*num_gid_entries*/, int num_nets, int num_pins,
                     int /*format*/, ZOLTAN_ID_PTR net_ids, int* net_begin, ZOLTAN_ID_PTR pins,
                     int* ierr) {
  const auto& hg = *static_cast<const Hypergraph*>(data);
  for (int v = 0; v < num_nets; ++v) {
    net_ids[v] = hg.first + static_cast<ZOLTAN_ID_TYPE>(v);
    net_begin[v] = hg.net_begin[v];
  }
  std::copy_n(hg.pins.begin(), num_pins, pins);
  *ierr = ZOLTAN_OK;
}

void num_edges(void* data, int /*num_gid_entries*/, int /*num_lid_entries*/, int num_obj,
               ZOLTAN_ID_PTR global_ids, ZOLTAN_ID_PTR /*local_ids*/, int* counts, int* ierr) {
  const auto& hg = *static_cast<const Hypergraph*>(data);
  for (int i = 0; i < num_obj; ++i)
    counts[i] = static_cast<int>(hg.neighbours(global_ids[i] - hg.first).size());
  *ierr = ZOLTAN_OK;
}

void edge_list(void* data, int /*num_gid_entries*/, int /*num_lid_entries*/, int num_obj,
               ZOLTAN_ID_PTR global_ids, ZOLTAN_ID_PTR /*local_ids*/, int* /*num_edges*/,
               ZOLTAN_ID_PTR neighbour_ids, int* neighbour_procs, int /*wgt_dim*/,
               float* /*edge_weights*/, int* ierr) {
  const auto& hg = *static_cast<const Hypergraph*>(data);
  std::size_t k = 0;
  for (int i = 0; i < num_obj; ++i) {
    for (const ZOLTAN_ID_TYPE u : hg.neighbours(global_ids[i] - hg.first)) {
      neighbour_ids[k] = u;
      neighbour_procs[k] =
          datasets::row_share_rank(static_cast<std::int64_t>(u), hg.num_nodes, hg.ranks);
      ++k;
    }
  }
  *ierr = ZOLTAN_OK;
}

void object_parts(void* data, int /*num_gid_entries*/, int /*num_lid_entries*/, int num_obj,
                  ZOLTAN_ID_PTR global_ids, ZOLTAN_ID_PTR /*local_ids*/, int* parts, int* ierr) {
  const auto& hg = *static_cast<const Hypergraph*>(data);
  for (int i = 0; i < num_obj; ++i)
    parts[i] = hg.owner[global_ids[i] - hg.first];
  *ierr = ZOLTAN_OK;
}

// ---- one Zoltan structure --------------------------------------------------------------------

struct ZoltanDestroy {
  void operator()(Zoltan_Struct* zz) const { Zoltan_Destroy(&zz); }
};
using ZoltanPtr = std::unique_ptr<Zoltan_Struct, ZoltanDestroy>;

/// The lists Zoltan_LB_Partition returns, freed by Zoltan_LB_Free_Part on every path.
struct PartLists {
  int num_import = 0, num_export = 0;
  ZOLTAN_ID_PTR import_gids = nullptr, import_lids = nullptr;
  ZOLTAN_ID_PTR export_gids = nullptr, export_lids = nullptr;
  int *import_procs = nullptr, *import_parts = nullptr;
  int *export_procs = nullptr, *export_parts = nullptr;

  PartLists() = default;
  PartLists(const PartLists&) = delete;
  PartLists& operator=(const PartLists&) = delete;
  ~PartLists() {
    Zoltan_LB_Free_Part(&import_gids, &import_lids, &import_procs, &import_parts);
    Zoltan_LB_Free_Part(&export_gids, &export_lids, &export_procs, &export_parts);
  }
};

/// Zoltan_Initialize, once per process, after MPI.
void initialize_zoltan() {
  ensure_mpi();
  static const int status = [] {
    float version = 0.0f;
    return Zoltan_Initialize(0, nullptr, &version);
  }();
  check(status, "Zoltan_Initialize");
}

void set_param(Zoltan_Struct* zz, const char* name, const std::string& value) {
  check(Zoltan_Set_Param(zz, name, value.c_str()),
        fmt::format("Zoltan_Set_Param({}, {})", name, value));
}

/// A Zoltan structure on `comm` set up for PHG into `parts` parts, whose query functions read
/// `hg` (which must outlive it).
ZoltanPtr make_zoltan(Hypergraph& hg, int parts, MPI_Comm comm) {
  initialize_zoltan();
  ZoltanPtr zz(Zoltan_Create(comm));
  if (!zz) throw PartitionerError("Zoltan_Create returned no structure");
  Zoltan_Struct* z = zz.get();
  set_param(z, "DEBUG_LEVEL", "0");
  set_param(z, "LB_METHOD", "HYPERGRAPH");
  set_param(z, "HYPERGRAPH_PACKAGE", "PHG");
  set_param(z, "LB_APPROACH", "PARTITION");
  set_param(z, "PHG_CUT_OBJECTIVE", "CONNECTIVITY");
  set_param(z, "NUM_GLOBAL_PARTS", std::to_string(parts));
  set_param(z, "NUM_GID_ENTRIES", "1");
  set_param(z, "NUM_LID_ENTRIES", "0");
  set_param(z, "OBJ_WEIGHT_DIM", "1");
  set_param(z, "EDGE_WEIGHT_DIM", "0");
  check(Zoltan_Set_Num_Obj_Fn(z, num_objects, &hg), "Zoltan_Set_Num_Obj_Fn");
  check(Zoltan_Set_Obj_List_Fn(z, object_list, &hg), "Zoltan_Set_Obj_List_Fn");
  check(Zoltan_Set_HG_Size_CS_Fn(z, hypergraph_size, &hg), "Zoltan_Set_HG_Size_CS_Fn");
  check(Zoltan_Set_HG_CS_Fn(z, hypergraph_nets, &hg), "Zoltan_Set_HG_CS_Fn");
  check(Zoltan_Set_Num_Edges_Multi_Fn(z, num_edges, &hg), "Zoltan_Set_Num_Edges_Multi_Fn");
  check(Zoltan_Set_Edge_List_Multi_Fn(z, edge_list, &hg), "Zoltan_Set_Edge_List_Multi_Fn");
  return zz;
}

} // namespace

namespace {

/// This process's owners of hg's vertices, cut by PHG on `comm` (collective over it) of `nodes`
/// vertices and `pins` pins in all.
std::vector<std::int32_t> phg_owner(Hypergraph& hg, const Options& options, MPI_Comm comm,
                                    std::int64_t nodes, std::int64_t pins) {
  const ZoltanPtr zz = make_zoltan(hg, options.num_parts, comm);
  Zoltan_Struct* z = zz.get();
  set_param(z, "RETURN_LISTS", "PARTS");
  set_param(z, "REMAP", "0");            // a renumbering of the parts would lose part_weights
  set_param(z, "IMBALANCE_TOL", "1.05"); // each part at most 5 % above its target weight
  // Zoltan's SEED is an int: fold the 64-bit seed into its non-negative range.
  set_param(z, "SEED", std::to_string((options.seed ^ (options.seed >> 31)) & INT_MAX));
  // Chosen by measurement on soc-Slashdot0902 and 4elt (P = 4 and 8, six seeds): FM refinement
  // that may go through 2000 worse moves (default 250) and coarsening down to 1000 vertices
  // (default max(2P, 100)) move 1-5 % fewer rows on Slashdot, under half of random's, in about
  // 1.3x the time. More refinement passes, IPM matching or greedy coarse parts gained nothing.
  set_param(z, "PHG_REFINEMENT_MAX_NEG_MOVE", "2000");
  set_param(z, "PHG_COARSENING_LIMIT", "1000");
  // Over several processes, chosen by measurement (docs/guide/partitioning.md): matching that
  // ignores nets of more than 50 pins (a hub's net costs its size squared in inner products;
  // default 500) and local inner-product matching (each process matches its own vertices; default
  // agglomerative) cut RMAT 18 and 20 over 2 ranks in 0.7x and 0.25x the time with 0.7x and 0.6x
  // the volume and a seventh of the edge cut, Slashdot over 2 and 4 ranks in half the time with
  // 8-9 % more volume. In one process (Slashdot, P = 4 and 8) they cost 7-10 % more volume.
  int processes = 1;
  MPI_Comm_size(comm, &processes);
  if (processes > 1) {
    for (const auto& [name, value] : hypergraph_over_ranks_params())
      set_param(z, name.c_str(), value);
  }
  if (!options.part_weights.empty()) {
    std::vector<int> ids(options.part_weights.size()), weight_index(ids.size(), 0);
    std::iota(ids.begin(), ids.end(), 0);
    std::vector<float> sizes(options.part_weights.begin(), options.part_weights.end());
    check(Zoltan_LB_Set_Part_Sizes(z, /*global_num=*/1, static_cast<int>(ids.size()), ids.data(),
                                   weight_index.data(), sizes.data()),
          "Zoltan_LB_Set_Part_Sizes");
  }

  for (const auto& [name, value] : options.zoltan_params)
    set_param(z, name.c_str(), value);

  PartLists lists;
  int changes = 0, num_gid_entries = 0, num_lid_entries = 0;
  check(Zoltan_LB_Partition(z, &changes, &num_gid_entries, &num_lid_entries, &lists.num_import,
                            &lists.import_gids, &lists.import_lids, &lists.import_procs,
                            &lists.import_parts, &lists.num_export, &lists.export_gids,
                            &lists.export_lids, &lists.export_procs, &lists.export_parts),
        fmt::format("Zoltan_LB_Partition(PHG, nodes={}, pins={}, parts={})", nodes, pins,
                    options.num_parts));
  const auto n = static_cast<std::int64_t>(hg.net_begin.size());
  if (lists.num_export != n) {
    throw PartitionerError(fmt::format("Zoltan_LB_Partition returned parts for {} of {} vertices",
                                       lists.num_export, n));
  }
  std::vector<std::int32_t> owner(static_cast<std::size_t>(n), -1);
  for (int i = 0; i < lists.num_export; ++i) {
    const std::int64_t v = static_cast<std::int64_t>(lists.export_gids[i]) - hg.first;
    const int part = lists.export_parts[i];
    if (v < 0 || v >= n || part < 0 || part >= options.num_parts) {
      throw PartitionerError(fmt::format("Zoltan_LB_Partition returned part {} for vertex {}, "
                                         "not one of this process's {} vertices in [0, {})",
                                         part, lists.export_gids[i], n, options.num_parts));
    }
    owner[v] = part;
  }
  return owner;
}

} // namespace

std::vector<std::int32_t> hypergraph_owner(const Csr& a, const Options& options,
                                           std::span<const std::int64_t> vertex_weights) {
  Hypergraph hg = to_hypergraph(a, vertex_weights);
  hg.num_nodes = a.rows();
  return phg_owner(hg, options, MPI_COMM_SELF, a.rows(), static_cast<std::int64_t>(hg.pins.size()));
}

std::vector<std::int32_t> hypergraph_owner_rows(const datasets::RowBlock& block,
                                                const Options& options,
                                                std::span<const std::int64_t> vertex_weights,
                                                MPI_Comm comm, std::int64_t nonzeros) {
  // Every rank decides from the same totals, before any collective call; its own counts are at
  // most these.
  check_zoltan_limits(block.num_nodes, block.num_nodes + nonzeros); // a bound: self-loops included
  Hypergraph hg = to_hypergraph(block.rows.first, std::span<const Offset>(block.row_ptr),
                                std::span<const std::int64_t>(block.col), vertex_weights);
  hg.num_nodes = block.num_nodes;
  MPI_Comm_size(comm, &hg.ranks);
  return phg_owner(hg, options, comm, block.num_nodes, block.num_nodes + nonzeros);
}

double zoltan_connectivity_cut(const Csr& a, const Partition& partition) {
  const std::vector<std::int64_t> unit(static_cast<std::size_t>(a.rows()), 1);
  Hypergraph hg = to_hypergraph(a, unit);
  hg.owner = partition.owner;
  const ZoltanPtr zz = make_zoltan(hg, partition.num_parts, MPI_COMM_SELF);
  check(Zoltan_Set_Part_Multi_Fn(zz.get(), object_parts, &hg), "Zoltan_Set_Part_Multi_Fn");
  ZOLTAN_HG_EVAL eval{};
  check(Zoltan_LB_Eval_HG(zz.get(), /*print_stats=*/0, &eval), "Zoltan_LB_Eval_HG");
  return eval.cutl[EVAL_GLOBAL_SUM];
}

} // namespace tessera::partition::detail
