// Hypergraph partitioning with Zoltan's PHG, whose connectivity − 1 cut is the halo volume.
#pragma once

#include "tessera/datasets/row_block.hpp"
#include "tessera/partition/partition.hpp"

#include <cstdint>
#include <mpi.h>
#include <span>
#include <vector>

namespace tessera::partition::detail {

/// Throws PartitionerError naming the limit when a graph of `nodes` vertices and `pins` pins
/// (nodes + nonzeros without self-loops) does not fit Zoltan's ids (ZOLTAN_ID_TYPE) and int counts.
void check_zoltan_limits(std::int64_t nodes, std::int64_t pins);

/// Owners of the vertices of the symmetric `a` ([n, n], host memory) cut by Zoltan PHG
/// (one process, MPI_COMM_SELF; initializes MPI when nothing has): net v holds v and its
/// neighbours (self-loops ignored), so the connectivity − 1 cut PHG minimizes equals
/// Quality::total_volume. Uses num_parts (>= 2), part_weights and seed of `options`;
/// vertex_weights: [n], each >= 1. Parts may come back empty. Throws PartitionerError naming the
/// Zoltan call and its code when one fails, or when the graph does not fit Zoltan's types.
std::vector<std::int32_t> hypergraph_owner(const Csr& a, const Options& options,
                                           std::span<const std::int64_t> vertex_weights);

/// The owners of this rank's rows of `block` cut by Zoltan PHG on `comm`, collective over it: every
/// rank passes its share of the rows (datasets::row_share), their vertex_weights ([rows], each
/// >= 1) and the graph's `nonzeros` in all. The same hypergraph as hypergraph_owner, distributed:
/// Zoltan moves the nets between the ranks itself. Throws PartitionerError like it (on every rank
/// for a graph beyond Zoltan's types; a failing Zoltan call may throw on some ranks only).
std::vector<std::int32_t> hypergraph_owner_rows(const datasets::RowBlock& block,
                                                const Options& options,
                                                std::span<const std::int64_t> vertex_weights,
                                                MPI_Comm comm, std::int64_t nonzeros);

/// The connectivity − 1 cut of `partition` on the same hypergraph of `a`, as Zoltan evaluates it
/// (Zoltan_LB_Eval_HG): the check that the model PHG minimizes is the halo volume.
double zoltan_connectivity_cut(const Csr& a, const Partition& partition);

} // namespace tessera::partition::detail
