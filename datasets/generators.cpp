// Synthetic graphs: R-MAT (Graph500 parameters) and a stochastic block model with class-centred
// features. Every edge and feature is a pure function of (seed, index), so the result does not
// depend on the thread count.
#include "assembly.hpp"
#include "generator_params.hpp"
#include "loaders.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/rng.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <string_view>
#include <utility>

namespace tessera::datasets::detail {

namespace {

// Sub-streams of RngPurpose::Generator.
enum GeneratorStream : std::uint32_t {
  kEdges = 0,
  kPermutation = 1,
  kLabels = 2,
  kFeatures = 3,
  kCentroids = 4
};

RngKey stream_key(std::uint64_t seed, GeneratorStream stream) {
  return RngKey::make(seed, RngPurpose::Generator, stream);
}

/// The m edges (draw(e).first, draw(e).second) over n nodes; draw must be a pure function of e.
template <typename Draw>
graph::EdgeList draw_edges(std::int64_t n, std::int64_t m, const Draw& draw) {
  graph::EdgeList edges;
  edges.num_nodes = n;
  edges.src.resize(static_cast<std::size_t>(m));
  edges.dst.resize(static_cast<std::size_t>(m));
#pragma omp parallel for schedule(static)
  for (std::int64_t e = 0; e < m; ++e) {
    const auto [u, v] = draw(e);
    edges.src[e] = u;
    edges.dst[e] = v;
  }
  return edges;
}

/// Dense [n, f] features uniform in [0, 1).
Dense uniform_features(const BackendPtr& backend, std::int64_t n, std::int64_t f,
                       const RngKey& key) {
  Dense x(backend, n, f);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    float* row = x.data() + i * f;
    for (std::int64_t j = 0; j < f; j += 4) {
      const auto bits = random_bits4(key, i, static_cast<std::uint32_t>(j / 4));
      for (std::int64_t k = 0; k < 4 && j + k < f; ++k)
        row[j + k] = bits_to_unit_float(bits[k]);
    }
  }
  return x;
}

} // namespace

Dataset generate_rmat(const BackendPtr& backend, const std::string& params, std::uint64_t seed) {
  require_host(backend);
  const GeneratorParams p("rmat", params, {"scale", "edge-factor", "features", "classes"});
  const std::int64_t scale = p.integer("scale", 10, 1, 30);
  const std::int64_t edge_factor = p.integer("edge-factor", 16, 1, 1 << 16);
  const std::int64_t num_features = p.integer("features", 128, 0, 1 << 20);
  const std::int64_t num_classes = p.integer("classes", 16, 1, 1 << 20);
  const std::int64_t n = std::int64_t{1} << scale;
  const std::int64_t m = edge_factor * n;

  Dataset ds;
  ds.name = "rmat:scale=" + std::to_string(scale) + ",edge-factor=" + std::to_string(edge_factor) +
            ",features=" + std::to_string(num_features) + ",classes=" + std::to_string(num_classes);
  ds.num_nodes = n;

  // Graph500 quadrant probabilities a, b, c (d = 1 - a - b - c) as 16-bit thresholds (one
  // Philox call serves 8 levels), and a vertex permutation so that degree does not follow the id.
  constexpr double kA = 0.57, kB = 0.19, kC = 0.19;
  constexpr double kScale16 = 65536.0;
  constexpr auto t_a = static_cast<std::uint32_t>(kA * kScale16);
  constexpr auto t_ab = static_cast<std::uint32_t>((kA + kB) * kScale16);
  constexpr auto t_abc = static_cast<std::uint32_t>((kA + kB + kC) * kScale16);
  const std::vector<std::int32_t> perm = random_permutation(n, stream_key(seed, kPermutation));
  const RngKey edge_key = stream_key(seed, kEdges);

  // Each of the `scale` levels picks a quadrant of the adjacency matrix: one bit of u and of v.
  ds.adjacency = graph::build_symmetric_csr(
      backend, draw_edges(n, m, [&](std::int64_t e) {
        std::int64_t u = 0, v = 0;
        for (std::int64_t level = 0; level < scale; level += 8) {
          const auto bits = random_bits4(edge_key, e, static_cast<std::uint32_t>(level / 8));
          for (std::int64_t k = 0; k < 8 && level + k < scale; ++k) {
            const std::uint32_t r = (bits[k / 2] >> (16 * (k % 2))) & 0xFFFFu;
            u = (u << 1) | (r >= t_ab ? 1 : 0);
            v = (v << 1) | ((r >= t_a && r < t_ab) || r >= t_abc ? 1 : 0);
          }
        }
        return std::pair<GlobalId, GlobalId>(perm[u], perm[v]);
      }));

  if (num_features > 0) {
    ds.features.dense = uniform_features(backend, n, num_features, stream_key(seed, kFeatures));
  }
  const RngKey label_key = stream_key(seed, kLabels);
  ds.labels.resize(static_cast<std::size_t>(n));
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    ds.labels[i] = static_cast<std::int32_t>(
        uniform_index(label_key, i, 0, static_cast<std::uint32_t>(num_classes)));
  }
  ds.num_classes = static_cast<std::int32_t>(num_classes);
  make_random_split(ds, 0.6, 0.2, seed);
  return ds;
}

Dataset generate_sbm(const BackendPtr& backend, const std::string& params, std::uint64_t seed) {
  require_host(backend);
  const GeneratorParams p(
      "sbm", params,
      {"nodes", "classes", "avg-degree", "p-in", "features", "noise", "structure-seed"});
  const std::int64_t n = p.integer("nodes", 10000, 1, std::numeric_limits<LocalId>::max() - 1);
  const std::int64_t num_classes = p.integer("classes", 8, 1, n);
  const double avg_degree = p.real("avg-degree", 10.0, 0.0, static_cast<double>(n));
  const double p_in = p.real("p-in", 0.8, 0.0, 1.0);
  const std::int64_t num_features = p.integer("features", 64, 0, 1 << 20);
  const double noise = p.real("noise", 1.0, 0.0, 1e6);
  // The class centroids follow `seed`; which node is in which class, the edges, each node's
  // feature noise and the split follow the structure seed: another graph of the same classes
  // and feature distributions (what an inductive model is applied to).
  const bool own_structure = p.has("structure-seed");
  const auto structure_seed = static_cast<std::uint64_t>(
      p.integer("structure-seed", 0, 0, std::numeric_limits<std::int64_t>::max()));
  const std::uint64_t graph_seed = own_structure ? structure_seed : seed;

  Dataset ds;
  ds.name = "sbm:nodes=" + std::to_string(n) + ",classes=" + std::to_string(num_classes) +
            ",avg-degree=" + GeneratorParams::format(avg_degree) +
            ",p-in=" + GeneratorParams::format(p_in) + ",features=" + std::to_string(num_features) +
            ",noise=" + GeneratorParams::format(noise) +
            (own_structure ? ",structure-seed=" + std::to_string(structure_seed) : "");
  ds.num_nodes = n;

  // Classes are contiguous ranges of positions (so a random member of a class is one draw);
  // perm maps positions to node ids, hiding the ranges.
  std::vector<std::int64_t> class_start(static_cast<std::size_t>(num_classes) + 1);
  for (std::int64_t c = 0; c <= num_classes; ++c)
    class_start[c] = c * n / num_classes;
  const std::vector<std::int32_t> perm =
      random_permutation(n, stream_key(graph_seed, kPermutation));
  ds.labels.resize(static_cast<std::size_t>(n));
  for (std::int64_t c = 0; c < num_classes; ++c) {
    for (std::int64_t pos = class_start[c]; pos < class_start[c + 1]; ++pos) {
      ds.labels[perm[pos]] = static_cast<std::int32_t>(c);
    }
  }
  ds.num_classes = static_cast<std::int32_t>(num_classes);

  // Edge e starts at position e mod n, so every node draws about avg-degree / 2 edges.
  const auto m = static_cast<std::int64_t>(std::llround(static_cast<double>(n) * avg_degree / 2));
  const RngKey edge_key = stream_key(graph_seed, kEdges);
  ds.adjacency = graph::build_symmetric_csr(
      backend, draw_edges(n, m, [&](std::int64_t e) {
        const std::int64_t pos = e % n;
        const std::int32_t c = ds.labels[perm[pos]];
        const auto bits = random_bits4(edge_key, e, 0);
        std::int64_t other = 0;
        if (bits_to_unit_float(bits[0]) < p_in) {
          const auto size = static_cast<std::uint64_t>(class_start[c + 1] - class_start[c]);
          other = class_start[c] + static_cast<std::int64_t>((bits[1] * size) >> 32);
        } else {
          other = static_cast<std::int64_t>((bits[1] * static_cast<std::uint64_t>(n)) >> 32);
        }
        return std::pair<GlobalId, GlobalId>(perm[pos], perm[other]);
      }));

  if (num_features > 0) {
    // Features: the class centroid (a standard normal vector per class) plus noise · N(0, 1).
    const RngKey centroid_key = stream_key(seed, kCentroids);
    const RngKey noise_key = stream_key(graph_seed, kFeatures);
    Dense centroids(backend, num_classes, num_features);
    for (std::int64_t c = 0; c < num_classes; ++c) {
      for (std::int64_t j = 0; j < num_features; ++j)
        centroids(c, j) = normal(centroid_key, c, j);
    }
    Dense x(backend, n, num_features);
    const auto sigma = static_cast<float>(noise);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      const float* centre = centroids.data() + ds.labels[i] * num_features;
      float* row = x.data() + i * num_features;
      for (std::int64_t j = 0; j < num_features; ++j) {
        row[j] = centre[j] + sigma * normal(noise_key, i, j);
      }
    }
    ds.features.dense = std::move(x);
  }
  make_random_split(ds, 0.1, 0.1, graph_seed);
  return ds;
}

} // namespace tessera::datasets::detail
