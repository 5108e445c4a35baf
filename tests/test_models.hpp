// A small model and its inputs that tests of the engine's hooks and the runtime's simulations
// share: Linear(3 -> 4) then ReLU, on a batch of 5 rows.
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

} // namespace tessera::testing
