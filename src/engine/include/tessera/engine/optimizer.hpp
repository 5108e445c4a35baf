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
  /// m and v start at zero, shaped like each parameter's value. The parameters must outlive
  /// this object and keep their shapes. The config is checked at each step().
  Adam(BackendPtr backend, std::vector<Parameter<T>*> parameters, AdamConfig config);

  /// One update of every parameter from its current gradient. Throws InvalidArgument for a
  /// config outside torch.optim's ranges (see ops::adam_step).
  void step();
  /// Steps taken so far (the bias-correction count of the last step).
  std::int64_t steps() const noexcept { return steps_; }
  /// The hyper-parameters given at construction.
  const AdamConfig& config() const noexcept { return config_; }
  /// Bytes of the optimizer state (m and v).
  std::size_t bytes() const;

 private:
  BackendPtr backend_;
  std::vector<Parameter<T>*> parameters_;
  std::vector<DenseT<T>> m_, v_;
  AdamConfig config_;
  std::int64_t steps_ = 0;
};

}  // namespace tessera
