// Partitioning where no rank holds the whole graph: rank r of P holds the rows
// datasets::row_share(N, r, P) of a dataset (datasets::load_dataset_rows), the ranks cut the graph
// together (PT-Scotch's k-way, Zoltan's hypergraph partitioner, or a baseline), every row travels
// to its owner in one all-to-all, and each rank assembles its own tile: the same tile
// build_local_graph cuts from the whole graph for the same partition. Nothing is gathered to one
// rank.
#pragma once

#include "tessera/comm/communicator.hpp"
#include "tessera/datasets/row_block.hpp"
#include "tessera/partition/local_graph.hpp"
#include "tessera/partition/partition.hpp"
#include "tessera/partition/store.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tessera::partition {

/// Which part owns each row of `block`, this rank's share of the rows (row_share(N, rank, P)),
/// for options.num_parts == comm.size(). Methods: PtScotch (PT-Scotch's distributed k-way with
/// 64-bit ids), Hypergraph (Zoltan PHG over the ranks' rows, 32-bit ids) — both on
/// MPI_COMM_WORLD, whose ranks must be comm's — and Block and Random (the owners partition_graph
/// gives on the whole graph). Every part owns at least one row, as with partition_graph.
/// Collective. Throws InvalidArgument for options partition_graph refuses, a method without a
/// distributed form, a part count other than the rank count or a block that is not this rank's
/// share; PartitionerError when PT-Scotch or Zoltan fails (on any rank: every rank throws).
std::vector<std::int32_t> partition_rows(const datasets::RowBlock& block, const Options& options,
                                         comm::Communicator& comm);

/// This rank's tile (part comm.rank()) of the partition whose owners of `block`'s rows are
/// `owner`: rows go to their owners in one all-to-all, the owners and degrees of ghost rows are
/// asked of the ranks that read them. Equal to build_local_graph(whole dataset, the same
/// partition, rank, reorder). Matrices in host memory on `backend`. Collective. Throws
/// InvalidArgument when owner.size() differs from the block's rows or an owner is outside
/// [0, P), and when a rank's tile has more local vertices than a LocalId holds.
LocalGraph build_tile_from_rows(const BackendPtr& backend, datasets::RowBlock&& block,
                                std::span<const std::int32_t> owner, comm::Communicator& comm,
                                Reorder reorder = Reorder::None);

/// The Quality of the partition whose tile of part comm.rank() is `tile`, from the tiles alone:
/// equal to measure(whole adjacency, partition). Collective; every rank gets it.
Quality measure_tiles(const LocalGraph& tile, comm::Communicator& comm);

/// dataset_checksum(whole dataset) from the ranks' blocks (CRC-32 pieces joined in row order), so a
/// store written from blocks matches the dataset it came from. Collective; every rank gets it.
std::string dataset_checksum(const datasets::RowBlock& block, comm::Communicator& comm);

/// Writes a partition store from the ranks' tiles (the tile of part r on rank r): the store
/// write_store writes for the same partition, read by load_part like any other. Rank 0 claims
/// `dir` (io::OutputFolder, as write_store; `replace` as there) and removes an old manifest, each
/// rank writes its own part folder, and rank 0 writes the manifest last, once every rank has
/// written its part and every rank agrees on the part count, node count, dataset name and
/// checksum (`dataset`: what the manifest records of it). A failure on any rank (a refused folder,
/// a write error, a disagreement) throws IoError on every rank naming each failing rank and its
/// problem, and leaves no manifest, so the half-written store is never loaded. `dir` must be a
/// folder every rank sees (a shared file system on a cluster). `options` and `quality` are
/// recorded, as by write_store. Collective.
void write_store_from_tiles(const std::string& dir, const LocalGraph& tile,
                            const DatasetRecord& dataset, const Options& options, Reorder reorder,
                            const Quality& quality, comm::Communicator& comm, bool replace = false);

} // namespace tessera::partition
