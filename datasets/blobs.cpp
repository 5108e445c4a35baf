// Gaussian class clusters without a graph ("blobs"): the samples of a plain classifier whose
// width is a parameter, for model-size scaling. Every value is a pure function of (seed, index),
// so every rank generates the same data whatever its thread count.
#include "assembly.hpp"
#include "generator_params.hpp"
#include "loaders.hpp"
#include "tessera/core/rng.hpp"

#include <cmath>
#include <limits>

namespace tessera::datasets::detail {

namespace {

// Sub-streams of RngPurpose::Generator used here.
enum BlobStream : std::uint32_t { kLabels = 2, kFeatures = 3, kCentroids = 4 };

} // namespace

Dataset generate_blobs(const BackendPtr& backend, const std::string& params, std::uint64_t seed) {
  require_host(backend);
  const GeneratorParams p("blobs", params,
                          {"samples", "features", "classes", "separation", "noise", "seed"});
  const std::int64_t n = p.integer("samples", 10000, 1, std::numeric_limits<LocalId>::max() - 1);
  const std::int64_t num_features = p.integer("features", 64, 1, 1 << 20);
  const std::int64_t num_classes = p.integer("classes", 4, 1, std::min<std::int64_t>(n, 1 << 20));
  const double separation = p.real("separation", 6.0, 0.0, 1e6);
  const double noise = p.real("noise", 1.0, 0.0, 1e6);
  // A seed in the spec fixes the data while the run's seed varies the weights and batches.
  const bool own_seed = p.has("seed");
  if (own_seed) {
    seed = static_cast<std::uint64_t>(
        p.integer("seed", 0, 0, std::numeric_limits<std::int64_t>::max()));
  }

  Dataset ds;
  ds.name = "blobs:samples=" + std::to_string(n) + ",features=" + std::to_string(num_features) +
            ",classes=" + std::to_string(num_classes) +
            ",separation=" + GeneratorParams::format(separation) +
            ",noise=" + GeneratorParams::format(noise) +
            (own_seed ? ",seed=" + std::to_string(seed) : std::string());
  ds.num_nodes = n;
  ds.adjacency = graph::build_symmetric_csr(backend, graph::EdgeList{n, {}, {}}); // no edges

  const RngKey label_key = RngKey::make(seed, RngPurpose::Generator, kLabels);
  ds.labels.resize(static_cast<std::size_t>(n));
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    ds.labels[i] = static_cast<std::int32_t>(
        uniform_index(label_key, i, 0, static_cast<std::uint32_t>(num_classes)));
  }
  ds.num_classes = static_cast<std::int32_t>(num_classes);

  // Centroid entries ~ N(0, separation² / (2F)): two centroids lie about `separation` apart at
  // any width, so the task is as hard at 16 features as at 16384 (Bayes error of a pair of
  // classes Φ(-separation / (2·noise))).
  const RngKey centroid_key = RngKey::make(seed, RngPurpose::Generator, kCentroids);
  const auto scale =
      static_cast<float>(separation / std::sqrt(2.0 * static_cast<double>(num_features)));
  Dense centroids(backend, num_classes, num_features);
  for (std::int64_t c = 0; c < num_classes; ++c) {
    for (std::int64_t j = 0; j < num_features; ++j)
      centroids(c, j) = scale * normal(centroid_key, c, j);
  }
  const RngKey noise_key = RngKey::make(seed, RngPurpose::Generator, kFeatures);
  const auto sigma = static_cast<float>(noise);
  Dense x(backend, n, num_features);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    const float* centre = centroids.data() + ds.labels[i] * num_features;
    float* row = x.data() + i * num_features;
    for (std::int64_t j = 0; j < num_features; ++j)
      row[j] = centre[j] + sigma * normal(noise_key, i, j);
  }
  ds.features.dense = std::move(x);
  make_random_split(ds, 0.8, 0.1, seed);
  return ds;
}

} // namespace tessera::datasets::detail
