// The data-parallel half of distributed training: every rank's gradients summed over the ranks,
// in one message per step.
#pragma once

#include <vector>

#include "tessera/comm/communicator.hpp"
#include "tessera/core/device.hpp"
#include "tessera/core/tensor.hpp"

namespace tessera::comm {

/// Sums a fixed set of gradient tensors (all on `backend`) over the communicator's ranks: packs
/// them into one buffer (allocated once), allreduces it, and unpacks. The buffer lives on the
/// gradients' device when the communicator takes device memory (NCCL), else on the host.
/// Register the same tensors, in the same order, on every rank — the gradients of
/// model.parameters() of the same model are. The trainer runs one after every backward.
class GradientAllreduce {
 public:
  /// Allocates the packed buffer; no communication. `comm` and the gradients must outlive this
  /// object, and the gradients keep the shapes they have now.
  GradientAllreduce(Communicator& comm, const BackendPtr& backend, std::vector<Dense*> gradients);

  /// g ← Σ over ranks of g, for every registered gradient g. Collective. Through NCCL the sum is
  /// stream-ordered: later kernels on the backend's stream see it.
  void run();

  /// Floats summed per run.
  std::int64_t size() const noexcept { return packed_.size(); }

 private:
  Communicator& comm_;
  BackendPtr backend_;
  std::vector<Dense*> gradients_;
  Buffer<float> packed_;
};

}  // namespace tessera::comm
