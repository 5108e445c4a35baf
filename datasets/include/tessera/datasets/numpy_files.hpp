// Arrays out as numpy reads them: one .npy file, or an uncompressed .npz archive of named arrays
// (what predictions, embeddings and exported weights are written as). Both are written by the
// safe-write rules of every output (io::AtomicFile: a temporary file beside the target, renamed
// onto it; never through a planted link or over a device node).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace tessera::datasets {

/// One array to write: its name (the key in an .npz; unused by write_npy), its shape (C order;
/// the product must be the element count) and its elements, float32, int64, int32 or uint8.
struct NumpyArray {
  std::string name;
  std::vector<std::int64_t> shape;
  std::variant<std::span<const float>, std::span<const std::int64_t>, std::span<const std::int32_t>,
               std::span<const std::uint8_t>>
      values;
};

/// Writes `array` to `path` as an .npy file (format 1.0, little-endian). Throws InvalidArgument
/// when the shape does not hold the elements, IoError naming the file when it cannot be written.
void write_npy(const std::string& path, const NumpyArray& array);

/// Writes `arrays` to `path` as an uncompressed .npz (np.load reads it; each array's name is its
/// key, names must differ). Archives and arrays are limited to 4 GiB (no zip64). Throws as
/// write_npy, and InvalidArgument for an empty or repeated name.
void write_npz(const std::string& path, std::span<const NumpyArray> arrays);

/// Whether `path` names an .npy file (ends in ".npy").
bool is_npy_path(std::string_view path) noexcept;

/// An integer array read from a file: its shape (C order) and elements.
struct IntegerArray {
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> values;
};

/// Reads the integer array `key` of the .npz at `path` (any integer dtype, as int64; its size
/// checked against the file's bytes before anything is allocated). Throws IoError when the file
/// cannot be read, FormatError naming the file and array for a missing array (naming those the
/// file has), a float or boolean one, or a malformed archive.
IntegerArray read_npz_integers(const std::string& path, const std::string& key);

} // namespace tessera::datasets
