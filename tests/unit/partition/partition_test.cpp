// Partitioning: METIS and the baselines cover every vertex, honour part weights and seeds, beat
// random on real meshes and social graphs; the quality metrics equal a brute-force recount.
#include "metis_limits.hpp"
#include "tessera/core/device.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/rng.hpp"
#include "tessera/datasets/dataset.hpp"
#include "tessera/graph/graph.hpp"
#include "tessera/partition/partition.hpp"
#include "test_data.hpp"

#include <algorithm>
#include <cstdint>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace tessera::partition {
namespace {

using ::testing::HasSubstr;

const Method kAllMethods[] = {Method::MetisKway, Method::MetisRecursive, Method::Block,
                              Method::Random, Method::PtScotch};

/// A symmetric random graph with `n` vertices and about `edges` undirected edges (some isolated
/// vertices, no self-loops).
Csr random_graph(std::int64_t n, std::int64_t edges, std::uint64_t seed) {
  const auto key = RngKey::make(seed, RngPurpose::Generator, 7);
  graph::EdgeList list;
  list.num_nodes = n;
  for (std::int64_t e = 0; e < edges; ++e) {
    const auto u = uniform_index(key, e, 0, static_cast<std::uint32_t>(n));
    const auto v = uniform_index(key, e, 1, static_cast<std::uint32_t>(n));
    if (u != v) list.add(u, v);
  }
  return graph::build_symmetric_csr(make_cpu_backend(), list);
}

Options options_for(Method method, int parts, std::vector<double> part_weights = {}) {
  Options options;
  options.method = method;
  options.num_parts = parts;
  options.part_weights = std::move(part_weights);
  return options;
}

std::vector<std::int64_t> part_sizes(const Partition& partition) {
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(partition.num_parts), 0);
  for (const auto p : partition.owner)
    ++sizes[p];
  return sizes;
}

void expect_covers_every_vertex_with_non_empty_parts(const Csr& a, const Partition& partition,
                                                     int parts) {
  ASSERT_EQ(partition.num_parts, parts);
  ASSERT_EQ(static_cast<std::int64_t>(partition.owner.size()), a.rows());
  for (const auto p : partition.owner) {
    ASSERT_GE(p, 0);
    ASSERT_LT(p, parts);
  }
  for (const auto size : part_sizes(partition))
    EXPECT_GT(size, 0);
}

/// The definitions of partition.hpp, computed the slow and obvious way.
Quality brute_force_quality(const Csr& a, const Partition& partition) {
  const int parts = partition.num_parts;
  const auto& owner = partition.owner;
  Quality q;
  q.part_nodes = part_sizes(partition);
  q.send.assign(parts, 0);
  q.recv.assign(parts, 0);
  q.ghosts.assign(parts, 0);
  std::set<std::pair<std::int64_t, std::int64_t>> cut_edges;
  std::set<std::pair<std::int64_t, int>> sent;     // (vertex, receiving part)
  std::vector<std::set<std::int64_t>> read(parts); // remote vertices each part reads
  std::vector<std::int64_t> nonzeros(parts, 0);
  for (std::int64_t u = 0; u < a.rows(); ++u) {
    nonzeros[owner[u]] += a.row_ptr()[u + 1] - a.row_ptr()[u];
    for (auto k = a.row_ptr()[u]; k < a.row_ptr()[u + 1]; ++k) {
      const std::int64_t v = a.col()[k];
      if (owner[u] == owner[v]) continue;
      cut_edges.insert({std::min(u, v), std::max(u, v)});
      sent.insert({u, owner[v]});
      read[owner[u]].insert(v);
    }
  }
  q.edge_cut = static_cast<std::int64_t>(cut_edges.size());
  for (const auto& [v, to] : sent) {
    ++q.send[owner[v]];
    ++q.recv[to];
  }
  for (int p = 0; p < parts; ++p)
    q.ghosts[p] = static_cast<std::int64_t>(read[p].size());
  q.total_volume = static_cast<std::int64_t>(sent.size());
  q.max_send = *std::max_element(q.send.begin(), q.send.end());
  q.max_recv = *std::max_element(q.recv.begin(), q.recv.end());
  const double mean_nodes = static_cast<double>(a.rows()) / parts;
  q.vertex_balance =
      static_cast<double>(*std::max_element(q.part_nodes.begin(), q.part_nodes.end())) / mean_nodes;
  const double mean_nonzeros = static_cast<double>(a.nnz()) / parts;
  q.edge_balance =
      static_cast<double>(*std::max_element(nonzeros.begin(), nonzeros.end())) / mean_nonzeros;
  q.broadcast_volume = (parts - 1) * a.rows();
  return q;
}

datasets::Dataset load_shared(const std::string& name) {
  return datasets::load_dataset(make_cpu_backend(), name, {testing::shared_data_dir()});
}

double fraction_in_part(const Partition& partition, int part) {
  return static_cast<double>(part_sizes(partition)[part]) /
         static_cast<double>(partition.owner.size());
}

// ---- every method, small random graphs --------------------------------------------------------

TEST(PartitionGraph, EveryVertexHasOnePartAndNoPartIsEmpty) {
  const Csr a = random_graph(300, 500, 1);

  for (const Method method : kAllMethods) {
    for (const int parts : {2, 3, 5, 8, 17}) {
      const Partition partition = partition_graph(a, options_for(method, parts));

      SCOPED_TRACE(to_string(method) + " P=" + std::to_string(parts));
      expect_covers_every_vertex_with_non_empty_parts(a, partition, parts);
    }
  }
}

TEST(PartitionGraph, TinyGraphWithAsManyPartsAsNodesGetsOneNodePerPart) {
  const Csr a = random_graph(6, 4, 2);

  for (const Method method : kAllMethods) {
    const Partition partition = partition_graph(a, options_for(method, 6));

    SCOPED_TRACE(to_string(method));
    expect_covers_every_vertex_with_non_empty_parts(a, partition, 6);
  }
}

TEST(PartitionGraph, OnePartPutsEverythingInPartZero) {
  const Csr a = random_graph(50, 80, 3);

  for (const Method method : kAllMethods) {
    const Partition partition = partition_graph(a, options_for(method, 1));

    EXPECT_EQ(partition.num_parts, 1);
    EXPECT_EQ(partition.owner, std::vector<std::int32_t>(50, 0));
  }
}

TEST(PartitionGraph, GraphWithoutEdgesIsStillPartitioned) {
  graph::EdgeList no_edges;
  no_edges.num_nodes = 40;
  const Csr a = graph::build_symmetric_csr(make_cpu_backend(), no_edges);

  for (const Method method : kAllMethods) {
    const Partition partition = partition_graph(a, options_for(method, 4));

    SCOPED_TRACE(to_string(method));
    expect_covers_every_vertex_with_non_empty_parts(a, partition, 4);
  }
}

TEST(PartitionGraph, SameSeedGivesIdenticalOwners) {
  const Csr a = random_graph(2000, 6000, 4);

  for (const Method method : kAllMethods) {
    Options options = options_for(method, 5);
    options.seed = 42;

    const Partition first = partition_graph(a, options);
    const Partition second = partition_graph(a, options);

    EXPECT_EQ(first.owner, second.owner) << to_string(method);
  }
}

TEST(PartitionGraph, BlockPartsAreContiguousIdRanges) {
  const Csr a = random_graph(1000, 3000, 5);

  const Partition partition = partition_graph(a, options_for(Method::Block, 7));

  EXPECT_TRUE(std::is_sorted(partition.owner.begin(), partition.owner.end()));
  expect_covers_every_vertex_with_non_empty_parts(a, partition, 7);
}

TEST(PartitionGraph, BlockAndRandomHonourPartWeights) {
  const Csr a = random_graph(20000, 40000, 6);

  for (const Method method : {Method::Block, Method::Random}) {
    const Partition partition = partition_graph(a, options_for(method, 4, {2, 1, 1, 1}));

    SCOPED_TRACE(to_string(method));
    EXPECT_NEAR(fraction_in_part(partition, 0), 0.4, 0.02);
    for (int p = 1; p < 4; ++p)
      EXPECT_NEAR(fraction_in_part(partition, p), 0.2, 0.02);
  }
}

/// 2000 vertices whose degrees grow with the id: equal-size ranges are badly unbalanced in
/// nonzeros.
Csr degree_ramp_graph() {
  graph::EdgeList list;
  list.num_nodes = 2000;
  for (std::int64_t v = 1; v < 2000; ++v) {
    for (std::int64_t k = 0; k < v / 100 + 1; ++k)
      list.add(v, (v * 7 + k * 13) % v);
  }
  return graph::build_symmetric_csr(make_cpu_backend(), list);
}

TEST(PartitionGraph, BlockWithDegreeWeightsBalancesNonzeros) {
  const Csr a = degree_ramp_graph();
  Options by_degree = options_for(Method::Block, 4);
  by_degree.vertex_weight = VertexWeight::Degree;

  const Quality uniform = measure(a, partition_graph(a, options_for(Method::Block, 4)));
  const Quality degree = measure(a, partition_graph(a, by_degree));

  EXPECT_LT(degree.edge_balance, 1.1);
  EXPECT_LT(degree.edge_balance, uniform.edge_balance);
}

TEST(PartitionGraph, CostWeightsGiveEachPartItsShareOfNonzerosPlusRowCosts) {
  // Parts for ranks of speeds 1 and 0.25: each part's cost (its rows' degree + 1 + row cost)
  // follows its speed, whatever the degrees.
  const Csr a = degree_ramp_graph();
  for (const Method method : {Method::Block, Method::MetisKway}) {
    Options options = options_for(method, 2, {1.0, 0.25});
    options.vertex_weight = VertexWeight::Cost;
    options.row_cost = 6.0;
    options.balance = Balance::Given;

    const Partition partition = partition_graph(a, options);

    double cost[2] = {0.0, 0.0};
    for (std::int64_t v = 0; v < a.rows(); ++v) {
      std::int64_t degree = 0;
      for (Offset k = a.row_ptr()[v]; k < a.row_ptr()[v + 1]; ++k)
        degree += a.col()[k] != v;
      cost[partition.owner[v]] += static_cast<double>(degree) + 1.0 + options.row_cost;
    }
    SCOPED_TRACE(to_string(method));
    EXPECT_NEAR(cost[1] / (cost[0] + cost[1]), 0.2, 0.01);
  }
  Options negative = options_for(Method::Block, 2);
  negative.vertex_weight = VertexWeight::Cost;
  negative.row_cost = -1.0;
  EXPECT_THROW(partition_graph(a, negative), InvalidArgument);
}

// ---- metrics ----------------------------------------------------------------------------------

TEST(Measure, EqualsBruteForceRecount) {
  for (const std::uint64_t seed : {10, 11, 12}) {
    const Csr a = random_graph(200 + 37 * static_cast<std::int64_t>(seed), 600, seed);
    for (const Method method : kAllMethods) {
      for (const int parts : {1, 2, 3, 7}) {
        const Partition partition = partition_graph(a, options_for(method, parts));

        const Quality got = measure(a, partition);
        const Quality want = brute_force_quality(a, partition);

        SCOPED_TRACE(to_string(method) + " P=" + std::to_string(parts));
        EXPECT_EQ(got.edge_cut, want.edge_cut);
        EXPECT_EQ(got.total_volume, want.total_volume);
        EXPECT_EQ(got.send, want.send);
        EXPECT_EQ(got.recv, want.recv);
        EXPECT_EQ(got.ghosts, want.ghosts);
        EXPECT_EQ(got.max_send, want.max_send);
        EXPECT_EQ(got.max_recv, want.max_recv);
        EXPECT_DOUBLE_EQ(got.mean_send, static_cast<double>(want.total_volume) / parts);
        EXPECT_DOUBLE_EQ(got.mean_recv, static_cast<double>(want.total_volume) / parts);
        EXPECT_EQ(got.part_nodes, want.part_nodes);
        EXPECT_DOUBLE_EQ(got.vertex_balance, want.vertex_balance);
        EXPECT_DOUBLE_EQ(got.edge_balance, want.edge_balance);
        EXPECT_EQ(got.broadcast_volume, want.broadcast_volume);
      }
    }
  }
}

TEST(Measure, HandCheckedPath) {
  // Path 0-1-2-3 cut as {0, 1} | {2, 3}: one cut edge; 1 goes to part 1 and 2 to part 0.
  graph::EdgeList path;
  path.num_nodes = 4;
  path.add(0, 1);
  path.add(1, 2);
  path.add(2, 3);
  const Csr a = graph::build_symmetric_csr(make_cpu_backend(), path);

  const Quality q = measure(a, Partition{2, {0, 0, 1, 1}});

  EXPECT_EQ(q.edge_cut, 1);
  EXPECT_EQ(q.total_volume, 2);
  EXPECT_EQ(q.send, (std::vector<std::int64_t>{1, 1}));
  EXPECT_EQ(q.ghosts, (std::vector<std::int64_t>{1, 1}));
  EXPECT_DOUBLE_EQ(q.vertex_balance, 1.0);
  EXPECT_DOUBLE_EQ(q.edge_balance, 1.0);
  EXPECT_EQ(q.broadcast_volume, 4);
}

TEST(Measure, RejectsOwnersThatDoNotFitTheGraph) {
  const Csr a = random_graph(10, 10, 13);

  EXPECT_THROW(measure(a, Partition{2, std::vector<std::int32_t>(9, 0)}), DimensionMismatch);
  EXPECT_THROW(measure(a, Partition{2, std::vector<std::int32_t>(10, 2)}), InvalidArgument);
  EXPECT_THROW(measure(a, Partition{0, std::vector<std::int32_t>(10, 0)}), InvalidArgument);
}

// ---- connected components ---------------------------------------------------------------------

TEST(ConnectedComponents, CountsTrianglesAndIsolatedVertices) {
  // Two triangles {0, 1, 2}, {3, 4, 5}, an edge 6-7 and the isolated vertex 8.
  graph::EdgeList list;
  list.num_nodes = 9;
  const std::vector<std::pair<int, int>> edges = {{0, 1}, {1, 2}, {2, 0}, {3, 4},
                                                  {4, 5}, {5, 3}, {6, 7}};
  for (const auto& [u, v] : edges)
    list.add(u, v);
  const Csr a = graph::build_symmetric_csr(make_cpu_backend(), list);

  const Components components = connected_components(a);

  EXPECT_EQ(components.count, 4);
  EXPECT_EQ(components.largest, 3);
}

TEST(ConnectedComponents, EmptyGraphHasNone) {
  const Csr a(make_cpu_backend(), 0, 0, 0);

  const Components components = connected_components(a);

  EXPECT_EQ(components.count, 0);
  EXPECT_EQ(components.largest, 0);
}

// ---- real graphs ------------------------------------------------------------------------------

/// METIS k-way's total volume must stay below `bound` times random's at P = 4 and 8.
void expect_metis_volume_below_random(const std::string& name, double bound) {
  const auto dataset = load_shared(name);
  for (const int parts : {4, 8}) {
    const auto metis = partition_graph(dataset.adjacency, options_for(Method::MetisKway, parts));
    const auto random = partition_graph(dataset.adjacency, options_for(Method::Random, parts));

    const Quality metis_quality = measure(dataset.adjacency, metis);
    const Quality random_quality = measure(dataset.adjacency, random);

    SCOPED_TRACE(name + " P=" + std::to_string(parts));
    expect_covers_every_vertex_with_non_empty_parts(dataset.adjacency, metis, parts);
    EXPECT_LE(static_cast<double>(metis_quality.total_volume),
              bound * static_cast<double>(random_quality.total_volume));
    EXPECT_LT(metis_quality.vertex_balance, 1.05);
  }
}

TEST(PartitionRealGraphs, MetisVolumeIsAtMostHalfOfRandomOn4elt) {
  TESSERA_REQUIRE_DATA("metis_4elt/4elt.graph");

  // Measured with METIS 5.1: 0.009 (P = 4) and 0.011 (P = 8).
  expect_metis_volume_below_random("4elt", 0.5);
}

TEST(PartitionRealGraphs, MetisVolumeIsWellBelowRandomOnSlashdot) {
  TESSERA_REQUIRE_DATA("snap_soc_slashdot0902/soc-Slashdot0902.txt.gz");

  // Measured with METIS 5.1: 0.56 (P = 4) and 0.59 (P = 8). In this power-law graph the hubs
  // have neighbours in every part however it is cut, so the mesh-like factor 0.5 is out of reach
  // (the volume objective below gets 0.52 and 0.54; a greedy volume refinement after METIS
  // moved neither below 0.52).
  expect_metis_volume_below_random("slashdot", 0.65);
}

TEST(PartitionRealGraphs, VolumeObjectiveMovesFewerRowsThanTheCutObjectiveOnSlashdot) {
  TESSERA_REQUIRE_DATA("snap_soc_slashdot0902/soc-Slashdot0902.txt.gz");
  const auto dataset = load_shared("slashdot");

  for (const int parts : {4, 8}) {
    Options by_volume = options_for(Method::MetisKway, parts);
    by_volume.objective = Objective::Volume;
    const Quality cut = measure(dataset.adjacency,
                                partition_graph(dataset.adjacency, options_for(Method::MetisKway, parts)));
    const Quality volume = measure(dataset.adjacency, partition_graph(dataset.adjacency, by_volume));

    SCOPED_TRACE("P=" + std::to_string(parts));
    // Measured: 0.93x (P = 4) and 0.92x (P = 8) the cut objective's volume.
    EXPECT_LT(volume.total_volume, cut.total_volume);
    EXPECT_LT(volume.vertex_balance, 1.05);
  }
}

TEST(PartitionRealGraphs, MetisHonoursPartWeightsWithinFivePercentOn4elt) {
  TESSERA_REQUIRE_DATA("metis_4elt/4elt.graph");
  const auto dataset = load_shared("4elt");

  for (const Method method : {Method::MetisKway, Method::MetisRecursive}) {
    const Partition partition =
        partition_graph(dataset.adjacency, options_for(method, 4, {2, 1, 1, 1}));

    SCOPED_TRACE(to_string(method));
    EXPECT_NEAR(fraction_in_part(partition, 0), 0.4, 0.05 * 0.4);
    for (int p = 1; p < 4; ++p)
      EXPECT_NEAR(fraction_in_part(partition, p), 0.2, 0.05 * 0.2);
  }
}

TEST(PartitionRealGraphs, ParmetisInOneProcessCutsCloseToMetisOn4elt) {
  TESSERA_REQUIRE_DATA("metis_4elt/4elt.graph");
  const auto dataset = load_shared("4elt");
  for (const int parts : {4, 8}) {
    const Quality metis =
        measure(dataset.adjacency,
                partition_graph(dataset.adjacency, options_for(Method::MetisKway, parts)));
    const Quality parmetis =
        measure(dataset.adjacency,
                partition_graph(dataset.adjacency, options_for(Method::PtScotch, parts)));
    EXPECT_LT(parmetis.total_volume, 1.5 * static_cast<double>(metis.total_volume)) << parts;
    EXPECT_LE(parmetis.vertex_balance, 1.06) << parts;
  }
}

TEST(PartitionRealGraphs, FourEltIsOneComponent) {
  TESSERA_REQUIRE_DATA("metis_4elt/4elt.graph");
  const auto dataset = load_shared("4elt");

  const Components components = connected_components(dataset.adjacency);

  EXPECT_EQ(components.count, 1);
  EXPECT_EQ(components.largest, dataset.num_nodes);
}

// ---- limits and bad input ---------------------------------------------------------------------

TEST(MetisLimits, GraphsBeyondInt32AreRefusedNamingTheCounts) {
  const std::int64_t too_many = std::int64_t{3} << 30;

  EXPECT_NO_THROW(detail::check_metis_limits(2147483647, 2147483647));
  try {
    detail::check_metis_limits(too_many, 10);
    FAIL() << "expected MetisError";
  } catch (const MetisError& e) {
    EXPECT_THAT(e.what(), HasSubstr("3221225472 nodes"));
  }
  try {
    detail::check_metis_limits(10, too_many);
    FAIL() << "expected MetisError";
  } catch (const MetisError& e) {
    EXPECT_THAT(e.what(), HasSubstr("3221225472 nonzeros"));
  }
}

TEST(PartitionGraph, BadOptionsThrowInvalidArgument) {
  const Csr a = random_graph(20, 30, 14);
  Options negative_width = options_for(Method::Block, 2);
  negative_width.feature_width = -1;

  EXPECT_THROW(partition_graph(a, options_for(Method::MetisKway, 0)), InvalidArgument);
  EXPECT_THROW(partition_graph(a, options_for(Method::MetisKway, 21)), InvalidArgument);
  EXPECT_THROW(partition_graph(a, options_for(Method::MetisKway, 4, {1, 1})), InvalidArgument);
  EXPECT_THROW(partition_graph(a, options_for(Method::Block, 2, {1, 0})), InvalidArgument);
  EXPECT_THROW(partition_graph(a, options_for(Method::Random, 2, {1, -2})), InvalidArgument);
  // Shares whose sum is no number, or one METIS would read as zero, name the setting.
  EXPECT_THAT(
      [&] {
        partition_graph(a, options_for(Method::Block, 2, {1e308, 1e308}));
      },
      ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("part weights sum beyond")));
  EXPECT_THAT(
      [&] {
        partition_graph(a, options_for(Method::MetisKway, 2, {1e-300, 1}));
      },
      ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("part weight 1e-300 is below")));
  EXPECT_THROW(partition_graph(a, negative_width), InvalidArgument);
  EXPECT_THROW(partition_graph(Csr(make_cpu_backend(), 3, 4, 0), options_for(Method::Block, 2)),
               InvalidArgument);
}

TEST(PartitionGraph, VolumeObjectiveOnAnythingButMetisKwayIsRefusedNamingTheMethod) {
  const Csr a = random_graph(30, 60, 4);
  for (const Method method : {Method::MetisRecursive, Method::Block, Method::Random}) {
    Options options = options_for(method, 2);
    options.objective = Objective::Volume;
    try {
      partition_graph(a, options);
      FAIL() << "expected InvalidArgument for " << to_string(method);
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.what(), HasSubstr(to_string(method)));
      EXPECT_THAT(e.what(), HasSubstr("k-way"));
    }
  }
}

TEST(ParseOptions, NamesRoundTrip) {
  for (const Method method : kAllMethods)
    EXPECT_EQ(parse_method(to_string(method)), method);
  EXPECT_EQ(parse_method("metis"), Method::MetisKway);
  // PT-Scotch's method is named for what it is; its old name, which stores made before record,
  // still reads as it.
  EXPECT_EQ(to_string(Method::PtScotch), "ptscotch");
  EXPECT_EQ(parse_method("parmetis"), Method::PtScotch);
  EXPECT_EQ(parse_vertex_weight("uniform"), VertexWeight::Uniform);
  EXPECT_EQ(parse_vertex_weight("degree"), VertexWeight::Degree);
  EXPECT_EQ(parse_vertex_weight("compute"), VertexWeight::Compute);
  EXPECT_EQ(parse_vertex_weight("cost"), VertexWeight::Cost);
  for (const VertexWeight weight :
       {VertexWeight::Uniform, VertexWeight::Degree, VertexWeight::Compute, VertexWeight::Cost})
    EXPECT_EQ(parse_vertex_weight(to_string(weight)), weight);
  for (const Balance balance : {Balance::None, Balance::Given, Balance::Measured})
    EXPECT_EQ(parse_balance(to_string(balance)), balance);
  EXPECT_EQ(parse_objective("cut"), Objective::EdgeCut);
  EXPECT_EQ(parse_objective("volume"), Objective::Volume);
  EXPECT_EQ(to_string(Objective::Volume), "volume");
}

TEST(ParseOptions, BadTextThrowsInvalidArgumentListingValidValues) {
  try {
    parse_method("kway");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("metis, metis-recursive, block, random"));
  }
  try {
    parse_vertex_weight("edges");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("uniform, degree, compute"));
  }
  EXPECT_THROW(parse_balance("fast"), InvalidArgument);
}

} // namespace
} // namespace tessera::partition
