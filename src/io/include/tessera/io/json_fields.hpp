// Integer fields of the JSON files Tessera reads (dataset.json, a store's manifest and part.json):
// nlohmann's get_to truncates 7.9 to 7 and wraps 2^40 into an int32 without a word.
#pragma once

#include "tessera/core/error.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

namespace tessera::io {

/// Field `key` of `object` (nlohmann::json or ordered_json) into the integer `out`: a JSON integer
/// within T's range. A fraction (7.9), a number written as a float (7.0), a string or a value
/// beyond T throws FormatError naming `path`, the field and its text. A missing field throws
/// what object.at(key) throws (json::out_of_range).
template <typename Json, typename T>
void get_integer(const Json& object, const char* key, T& out, const std::string& path) {
  const Json& value = object.at(key);
  const auto refuse = [&](const char* wanted) {
    throw FormatError(path + ": field '" + key + "' is " + value.dump() + ", not " + wanted);
  };
  if (!value.is_number_integer()) refuse("an integer");
  // nlohmann holds integers >= 0 as unsigned, negative ones as signed.
  if (value.is_number_unsigned()) {
    const auto v = value.template get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
      refuse("an integer in range");
  } else {
    const auto v = value.template get<std::int64_t>();
    if (!std::is_signed_v<T> || v < static_cast<std::int64_t>(std::numeric_limits<T>::min())) {
      refuse("an integer in range");
    }
  }
  out = value.template get<T>();
}

} // namespace tessera::io
