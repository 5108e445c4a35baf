// The chunk engine's settings as text: tensor kinds and policies by name, byte sizes printed, and
// the ratios of its statistics.
#include "tessera/engine/chunk_manager.hpp"

#include "tessera/core/error.hpp"

#include <cmath>
#include <cstdint>
#include <string>

namespace tessera {

std::string to_string(TensorKind kind) {
  switch (kind) {
  case TensorKind::Input:
    return "input";
  case TensorKind::Matrix:
    return "matrix";
  case TensorKind::Activation:
    return "activation";
  case TensorKind::Gradient:
    return "gradient";
  case TensorKind::Weight:
    return "weight";
  case TensorKind::WeightGrad:
    return "weight-grad";
  case TensorKind::OptimizerState:
    return "optimizer-state";
  }
  return "unknown";
}

std::string to_string(EvictionPolicy policy) {
  return policy == EvictionPolicy::Lru ? "lru" : "farthest-next-use";
}

EvictionPolicy parse_eviction_policy(const std::string& text) {
  if (text == "lru") return EvictionPolicy::Lru;
  if (text == "farthest-next-use") return EvictionPolicy::FarthestNextUse;
  throw InvalidArgument("unknown eviction policy '" + text + "'; valid: lru, farthest-next-use");
}

std::string format_bytes(std::uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  if (unit == 0 || value == std::floor(value)) {
    std::snprintf(text, sizeof text, "%.0f %s", value, units[unit]);
  } else {
    std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  }
  return text;
}

double OffloadStats::hit_rate() const noexcept {
  return acquires == 0 ? 1.0 : static_cast<double>(hits) / static_cast<double>(acquires);
}

double OffloadStats::input_hit_rate() const noexcept {
  const std::uint64_t touches = input_hits + input_misses;
  return touches == 0 ? 1.0 : static_cast<double>(input_hits) / static_cast<double>(touches);
}

} // namespace tessera
