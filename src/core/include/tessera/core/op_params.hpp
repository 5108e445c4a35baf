// The value types an op hands to its kernels: which operand of a product is transposed, the
// global ids of a matrix's rows (for random draws), and Adam's scalars. They live in core so the
// kernels below the ops can take them without reaching up into the ops layer.
#pragma once

#include "tessera/core/types.hpp"

#include <cstdint>

namespace tessera {

/// Whether gemm uses an operand as stored (No) or its transpose (Yes).
enum class Transpose { No, Yes };

/// Global vertex id of each local row, for random draws that must not depend on the tiling:
/// ids[r] when ids is set, else offset + r.
struct RowIds {
  const GlobalId* ids = nullptr; ///< [n] in the memory of the op's backend, or nullptr
  GlobalId offset = 0;           ///< global id of row 0 when ids is nullptr
  /// Global id of local row r.
  GlobalId operator()(std::int64_t r) const noexcept {
    return ids != nullptr ? ids[r] : offset + r;
  }
};

/// Hyper-parameters of one Adam/AdamW step.
struct AdamConfig {
  float lr = 0.01f;          ///< learning rate, >= 0
  float beta1 = 0.9f;        ///< decay of the first moment, in [0, 1)
  float beta2 = 0.999f;      ///< decay of the second moment, in [0, 1)
  float eps = 1e-8f;         ///< added to sqrt(v̂), >= 0
  float weight_decay = 0.0f; ///< >= 0; how it applies depends on `decoupled`
  /// false: Adam with L2 (decay added to the gradient, as torch.optim.Adam);
  /// true: AdamW (decoupled decay, as torch.optim.AdamW).
  bool decoupled = false;
};

} // namespace tessera
