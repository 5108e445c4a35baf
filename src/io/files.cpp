// Writing files so that a reader never sees half of one: whole under "<name>.tmp", flushed to
// disk, then renamed; folders created and files removed with errors that name the path.
#include "tessera/io/files.hpp"

#include "tessera/core/error.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace tessera::io {

void write_file_atomically(const std::string& path, const void* head, std::size_t head_bytes,
                           const void* payload, std::size_t payload_bytes) {
  const std::string temp = path + ".tmp";
  std::FILE* file = std::fopen(temp.c_str(), "wb");
  if (file == nullptr) {
    throw IoError("cannot write '" + path + "': cannot create '" + temp +
                  "': " + std::strerror(errno));
  }
  bool ok = (head_bytes == 0 || std::fwrite(head, 1, head_bytes, file) == head_bytes) &&
            (payload_bytes == 0 || std::fwrite(payload, 1, payload_bytes, file) == payload_bytes) &&
            std::fflush(file) == 0 && ::fsync(::fileno(file)) == 0;
  const int saved_errno = errno;
  ok = (std::fclose(file) == 0) && ok;
  if (!ok) {
    std::remove(temp.c_str());
    throw IoError("cannot write '" + path + "': " + std::strerror(saved_errno));
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    std::remove(temp.c_str());
    throw IoError("cannot write '" + path + "': cannot rename '" + temp + "': " + ec.message());
  }
}

void write_text_file(const std::string& path, const std::string& text) {
  write_file_atomically(path, nullptr, 0, text.data(), text.size());
}

void create_folder(const std::string& path) {
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error) throw IoError("cannot create folder '" + path + "': " + error.message());
}

void remove_file(const std::string& path) {
  std::error_code error;
  std::filesystem::remove(path, error);
  if (error) throw IoError("cannot remove '" + path + "': " + error.message());
}

} // namespace tessera::io
