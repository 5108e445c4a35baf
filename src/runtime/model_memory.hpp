// What a model needs in memory, estimated from its widths before anything is allocated, so that
// a size taken from a file or a flag (a feature width of 10^9, --hidden 10000000) is refused
// naming where it came from instead of failing as "out of memory allocating N bytes".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::runtime {

/// Where a model's widths and rows come from, for messages ("FILE: array 'attr_shape'",
/// "--hidden 64"). Empty: said generically ("the data's feature width").
struct SizeSources {
  std::string input;  ///< sizes.front(): the data's feature width
  std::string hidden; ///< the widths between: a flag
  std::string rows;   ///< the row count: the data
};

/// This machine's physical memory in bytes (0 when unknown).
std::uint64_t physical_memory_bytes() noexcept;

/// Refuses (InvalidArgument) a model of layer widths `sizes` over `rows` rows whose parameters
/// (each with its gradient and two Adam moments, 16 bytes) and activations (about three float
/// rows of every layer's width per row, plus `input_bytes` of input) would need more than
/// `available_bytes`, naming the estimate, the largest part (a layer's [in, out] or the rows of a
/// width) and where its sizes come from. The products are taken in double: they cannot wrap.
void check_model_memory(const std::vector<std::int64_t>& sizes, std::int64_t rows,
                        double input_bytes, const SizeSources& sources,
                        std::uint64_t available_bytes = physical_memory_bytes());

} // namespace tessera::runtime
