// The data-parallel half of distributed training: every rank's parameter gradients summed over
// the ranks, in one message per step.
#pragma once

#include <vector>

#include "tessera/comm/communicator.hpp"
#include "tessera/core/device.hpp"
#include "tessera/core/tensor.hpp"
#include "tessera/engine/module.hpp"

namespace tessera::comm {

/// Sums the gradients of a fixed set of parameters (all on `backend`) over the communicator's
/// ranks: packs them into one buffer (allocated once), allreduces it, and unpacks. The buffer
/// lives on the gradients' device when the communicator takes device memory (NCCL), else on the
/// host. Register the same parameters, in the same order, on every rank — model.parameters()
/// of the same model does. The trainer runs one after every backward.
class GradientAllreduce {
 public:
  /// Allocates the packed buffer; no communication. `comm` and `params` must outlive this
  /// object, and the gradients keep the shapes they have now.
  GradientAllreduce(Communicator& comm, const BackendPtr& backend,
                    std::vector<Parameter<float>*> params);

  /// grad ← Σ over ranks of grad, for every registered parameter. Collective. Through NCCL the
  /// sum is stream-ordered: later kernels on the backend's stream see it.
  void run();

  /// Floats summed per run.
  std::int64_t size() const noexcept { return packed_.size(); }

 private:
  Communicator& comm_;
  BackendPtr backend_;
  std::vector<Parameter<float>*> params_;
  Buffer<float> packed_;
};

}  // namespace tessera::comm
