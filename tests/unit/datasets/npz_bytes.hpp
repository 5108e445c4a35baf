// Hand-built .npz archives for the dataset tests: members written byte by byte, CRCs computed by
// zlib, independently of the reader under test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>
#include <zlib.h>

namespace tessera::datasets::tests {

/// One .npy member of a hand-built archive.
struct Member {
  std::string key;
  std::string descr;
  std::string shape;          ///< Python tuple, e.g. "(0,)" or "(3, 2)"
  std::string data;           ///< raw little-endian bytes
  bool fortran_order = false; ///< data laid out first index fastest
};

template <typename T> inline std::string bytes_of(const std::vector<T>& values) {
  return {reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T)};
}

inline void put16(std::string& out, std::uint32_t v) {
  out.push_back(static_cast<char>(v & 0xFF));
  out.push_back(static_cast<char>((v >> 8) & 0xFF));
}
inline void put32(std::string& out, std::uint32_t v) {
  put16(out, v & 0xFFFF);
  put16(out, v >> 16);
}

/// A stored (uncompressed) zip of .npy members with CRCs computed by zlib here, independently of
/// the code under test: what numpy's np.savez writes.
inline std::string npz_bytes(const std::vector<Member>& members) {
  std::string zip, directory;
  for (const auto& m : members) {
    std::string npy = "\x93NUMPY\x01";
    npy.push_back('\0');
    std::string dict = "{'descr': '" + m.descr +
                       "', 'fortran_order': " + std::string(m.fortran_order ? "True" : "False") +
                       ", 'shape': " + m.shape + ", }";
    dict.append((64 - (10 + dict.size() + 1) % 64) % 64, ' ');
    dict.push_back('\n');
    put16(npy, static_cast<std::uint32_t>(dict.size()));
    npy += dict + m.data;
    const auto crc = static_cast<std::uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(npy.data()), static_cast<uInt>(npy.size())));
    const std::string name = m.key + ".npy";
    const auto offset = static_cast<std::uint32_t>(zip.size());
    std::string fields; // version, flags, method, time, date, crc, sizes, name length
    put16(fields, 20);
    put16(fields, 0);
    put16(fields, 0);
    put16(fields, 0);
    put16(fields, 33);
    put32(fields, crc);
    put32(fields, static_cast<std::uint32_t>(npy.size()));
    put32(fields, static_cast<std::uint32_t>(npy.size()));
    put16(fields, static_cast<std::uint32_t>(name.size()));
    put16(fields, 0);
    put32(zip, 0x04034b50);
    zip += fields + name + npy;
    put32(directory, 0x02014b50);
    put16(directory, 20);
    directory += fields;
    put16(directory, 0);
    put16(directory, 0);
    put16(directory, 0);
    put32(directory, 0);
    put32(directory, offset);
    directory += name;
  }
  const auto directory_offset = static_cast<std::uint32_t>(zip.size());
  zip += directory;
  put32(zip, 0x06054b50);
  put16(zip, 0);
  put16(zip, 0);
  put16(zip, static_cast<std::uint32_t>(members.size()));
  put16(zip, static_cast<std::uint32_t>(members.size()));
  put32(zip, static_cast<std::uint32_t>(directory.size()));
  put32(zip, directory_offset);
  put16(zip, 0);
  return zip;
}

} // namespace tessera::datasets::tests
