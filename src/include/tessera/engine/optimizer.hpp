// Adam / AdamW over a set of parameters, with per-parameter weight decay.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/engine/module.hpp"
#include "tessera/ops/ops.hpp"

namespace tessera {

/// torch.optim.Adam (L2 decay) or AdamW (decoupled decay) by config.decoupled. Decay applies to
/// parameters whose `decay` flag is set. State (m, v) is allocated once at construction.
template <typename T>
class Adam {
 public:
  Adam(BackendPtr backend, std::vector<Parameter<T>*> parameters, ops::AdamConfig config);

  /// One update of every parameter from its current gradient.
  void step();
  std::int64_t steps() const noexcept { return steps_; }
  const ops::AdamConfig& config() const noexcept { return config_; }
  std::size_t bytes() const;

 private:
  BackendPtr backend_;
  std::vector<Parameter<T>*> parameters_;
  std::vector<DenseT<T>> m_, v_;
  ops::AdamConfig config_;
  std::int64_t steps_ = 0;
};

}  // namespace tessera
