// Adam / AdamW over a set of parameters, with per-parameter weight decay.
#pragma once

#include "tessera/engine/module.hpp"
#include "tessera/ops/ops.hpp"

#include <cstdint>
#include <vector>

namespace tessera {

/// What Adam carries from step to step, in host memory: a checkpoint of it resumes the updates
/// exactly.
template <typename T> struct AdamState {
  std::int64_t steps = 0;           ///< steps taken (the bias-correction count of the last)
  std::vector<std::vector<T>> m, v; ///< per parameter, in order: [rows * cols] moments
};

/// torch.optim.Adam (L2 decay) or AdamW (decoupled decay) by config.decoupled. Decay applies to
/// parameters whose `decay` flag is set. State (m, v) is allocated once at construction.
template <typename T> class Adam {
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
  /// A host copy of the state (moments and step count).
  AdamState<T> state() const;
  /// Replaces the state with `state` (from state(), perhaps of another run). Throws
  /// DimensionMismatch naming the parameter when the count or a size differs, InvalidArgument
  /// for a negative step count.
  void load_state(const AdamState<T>& state);
  /// The parameters it updates, in the order given (the order of state()'s moments).
  const std::vector<Parameter<T>*>& parameters() const noexcept { return parameters_; }
  /// Bytes of the optimizer state (m and v).
  std::size_t bytes() const;

private:
  BackendPtr backend_;
  std::vector<Parameter<T>*> parameters_;
  std::vector<DenseT<T>> m_, v_;
  AdamConfig config_;
  std::int64_t steps_ = 0;
};

} // namespace tessera
