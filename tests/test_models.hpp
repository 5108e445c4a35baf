// A small model and its inputs that tests of the engine's hooks and the runtime's simulations
// share: Linear(3 -> 4) then ReLU, on a batch of 5 rows; and a random graph (link prediction's
// and sampling's tests).
#pragma once

#include "tessera/tessera.hpp"

#include <memory>

namespace tessera::testing {

/// Linear(3 -> 4, seed 1, layer 0) then ReLU on `backend`.
inline std::unique_ptr<Sequential<float>> linear_relu(const BackendPtr& backend) {
  auto model = std::make_unique<Sequential<float>>();
  model->add(std::make_unique<Linear<float>>(backend, 3, 4, true, 1, 0));
  model->add(std::make_unique<Relu<float>>(backend));
  return model;
}

/// Its input [5, 3] of 0.5 and an output gradient [5, 4] of 1.
struct LinearReluBatch {
  explicit LinearReluBatch(const BackendPtr& backend)
      : x(DenseT<float>::zeros(backend, 5, 3)), dy(DenseT<float>::zeros(backend, 5, 4)) {
    x.fill(0.5f);
    dy.fill(1.0f);
  }
  DenseT<float> x, dy;
};

/// A symmetric random graph of `n` nodes and about n·degree/2 edges (self-loops dropped).
inline Csr random_graph(std::int64_t n, int degree, std::uint64_t seed) {
  graph::EdgeList edges;
  edges.num_nodes = n;
  const RngKey key = RngKey::make(seed, RngPurpose::Generator, 0);
  for (std::int64_t i = 0; i < n * degree / 2; ++i)
    edges.add(static_cast<GlobalId>(uniform_index(key, i, 0, static_cast<std::uint32_t>(n))),
              static_cast<GlobalId>(uniform_index(key, i, 1, static_cast<std::uint32_t>(n))));
  return graph::build_symmetric_csr(make_cpu_backend(1), edges);
}

} // namespace tessera::testing
