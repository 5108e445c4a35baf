// write_npy and write_npz: arrays out as numpy reads them, through the safe writes of io.
#include "tessera/datasets/numpy_files.hpp"

#include "npz.hpp"
#include "tessera/core/error.hpp"

#include <set>

namespace tessera::datasets {

namespace {

/// The element count of `array`'s values.
std::int64_t count_of(const NumpyArray& array) {
  return std::visit([](auto values) { return static_cast<std::int64_t>(values.size()); },
                    array.values);
}

} // namespace

void write_npy(const std::string& path, const NumpyArray& array) {
  detail::check_npy_shape(array.name.empty() ? path : array.name, array.shape, count_of(array));
  std::visit(
      [&](auto values) {
        using T = typename decltype(values)::value_type;
        const std::string header =
            detail::npy_header(detail::dtype_of<std::remove_const_t<T>>(), array.shape);
        io::write_file_atomically(path, header.data(), header.size(), values.data(),
                                  values.size_bytes());
      },
      array.values);
}

void write_npz(const std::string& path, std::span<const NumpyArray> arrays) {
  std::set<std::string> names;
  for (const NumpyArray& array : arrays) {
    if (array.name.empty()) throw InvalidArgument("an array of npz '" + path + "' has no name");
    if (!names.insert(array.name).second) {
      throw InvalidArgument("npz '" + path + "' names array '" + array.name + "' twice");
    }
    detail::check_npy_shape(array.name, array.shape, count_of(array));
  }
  detail::NpzWriter out(path);
  for (const NumpyArray& array : arrays) {
    std::visit(
        [&](auto values) {
          using T = std::remove_const_t<typename decltype(values)::value_type>;
          out.add<T>(array.name, array.shape, values);
        },
        array.values);
  }
  out.commit();
}

IntegerArray read_npz_integers(const std::string& path, const std::string& key) {
  const detail::NpzReader npz(path);
  if (!npz.contains(key)) {
    std::string have;
    for (const std::string& k : npz.keys())
      have += (have.empty() ? "" : ", ") + k;
    npz.fail(key, "missing (the file has: " + (have.empty() ? "nothing" : have) + ")");
  }
  const detail::NpyInfo info = npz.readable_info(key);
  if (!info.holds_integers()) {
    npz.fail(key, "holds " + info.descr + " values, not integers (node ids)");
  }
  IntegerArray out;
  out.shape = info.shape;
  out.values = npz.read<std::int64_t>(key).data;
  return out;
}

} // namespace tessera::datasets
