// Writing files so that a reader never sees half of one, and the folders they go in: the one
// place every file Tessera writes (array files, manifests, reports) goes through.
#pragma once

#include <cstddef>
#include <string>

namespace tessera::io {

/// Writes `head_bytes` of `head` then `payload_bytes` of `payload` to `path`: to "path.tmp",
/// flushed to disk, then renamed onto `path`. Throws IoError naming the file and the reason.
void write_file_atomically(const std::string& path, const void* head, std::size_t head_bytes,
                           const void* payload, std::size_t payload_bytes);

/// Writes `text` to `path` as write_file_atomically does. Throws IoError naming the file.
void write_text_file(const std::string& path, const std::string& text);

/// Creates `path` and its parents (nothing when they exist); remove_file removes one file
/// (nothing when absent). Each throws IoError naming the path and the reason.
void create_folder(const std::string& path);
void remove_file(const std::string& path);

} // namespace tessera::io
