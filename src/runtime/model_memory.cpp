// A model's memory estimated from its widths, checked before any of it is allocated.
#include "model_memory.hpp"

#include "tessera/core/error.hpp"

#include <algorithm>
#include <fmt/core.h>
#include <unistd.h>

namespace tessera::runtime {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
/// A parameter's value, gradient and Adam's two moments, in float.
constexpr double kParameterBytes = 4.0 * sizeof(float);
/// Float rows each layer keeps per graph row: its output, an aggregate and a gradient.
constexpr double kActivationCopies = 3.0;

std::string or_default(const std::string& text, const char* fallback) {
  return text.empty() ? fallback : text;
}

} // namespace

std::uint64_t physical_memory_bytes() noexcept {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0
             ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page)
             : 0;
}

void check_model_memory(const std::vector<std::int64_t>& sizes, std::int64_t rows,
                        double input_bytes, const SizeSources& sources,
                        std::uint64_t available_bytes) {
  if (available_bytes == 0 || sizes.size() < 2) return;
  double parameters = 0.0, widest = 0.0, activation_width = 0.0, widest_activation = 0.0;
  std::size_t widest_layer = 0;
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    const double weights = static_cast<double>(sizes[i]) * static_cast<double>(sizes[i + 1]);
    parameters += weights + static_cast<double>(sizes[i + 1]);
    if (weights > widest) widest = weights, widest_layer = i;
    activation_width += static_cast<double>(sizes[i + 1]);
    widest_activation = std::max(widest_activation, static_cast<double>(sizes[i + 1]));
  }
  const double parameter_bytes = kParameterBytes * parameters;
  const double activation_bytes =
      kActivationCopies * sizeof(float) * static_cast<double>(rows) * activation_width;
  const double total = parameter_bytes + activation_bytes + input_bytes;
  if (total <= static_cast<double>(available_bytes)) return;

  // The largest part, and where the sizes behind it come from.
  const std::string input = or_default(sources.input, "the data's feature width");
  const std::string hidden = or_default(sources.hidden, "the hidden width");
  const std::string rows_from = or_default(sources.rows, "the data's node count");
  std::string part, cause;
  if (parameter_bytes >= activation_bytes && parameter_bytes >= input_bytes) {
    const std::int64_t in = sizes[widest_layer], out = sizes[widest_layer + 1];
    part = fmt::format("layer {}'s weights [{}, {}] with their gradient and Adam state: {:.1f} GiB",
                       widest_layer + 1, in, out,
                       kParameterBytes * static_cast<double>(in) * static_cast<double>(out) / kGiB);
    // The larger of the two widths is the one that asked for this much.
    const bool first = widest_layer == 0, last = widest_layer + 2 == sizes.size();
    if (in >= out) {
      cause = first ? fmt::format("the input width {} ({})", in, input)
                    : fmt::format("{} {}", hidden, in);
    } else {
      cause = last ? fmt::format("the class count {} (the data's labels)", out)
                   : fmt::format("{} {}", hidden, out);
    }
  } else if (activation_bytes >= input_bytes) {
    part = fmt::format("activations of {} rows over layers of widths up to {}: {:.1f} GiB", rows,
                       static_cast<std::int64_t>(widest_activation), activation_bytes / kGiB);
    cause = fmt::format("{} rows ({}) at {} {}", rows, rows_from, hidden,
                        static_cast<std::int64_t>(widest_activation));
  } else {
    part = fmt::format("the input features held dense: {:.1f} GiB", input_bytes / kGiB);
    cause = fmt::format("{} rows of the input width {} ({})", rows, sizes.front(), input);
  }
  throw InvalidArgument(fmt::format(
      "the model would need about {:.1f} GiB of memory ({}), more than this machine's {:.1f} "
      "GiB: the size comes from {}. Nothing was allocated; use smaller widths",
      total / kGiB, part, static_cast<double>(available_bytes) / kGiB, cause));
}

} // namespace tessera::runtime
