// Index types shared by every layer: global vertex ids are 64-bit, local (per-tile) ids 32-bit.
#pragma once

#include <cstdint>

namespace tessera {

/// A vertex id in the whole graph.
using GlobalId = std::int64_t;
/// A vertex or column id inside one tile or one local matrix.
using LocalId = std::int32_t;
/// An offset into an array of nonzeros (row pointers).
using Offset = std::int64_t;

}  // namespace tessera
