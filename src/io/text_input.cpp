// Line-by-line reading of plain or gzip'd text files, with parse errors that point at file:line.
#include "tessera/io/text_input.hpp"

#include "tessera/core/error.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sys/stat.h>
#include <zlib.h>

namespace tessera::io {

namespace {

constexpr std::size_t kChunk = std::size_t{1} << 20;

[[noreturn]] void throw_open_error(const std::string& path, int error_number) {
  throw IoError("cannot open '" + path + "': " + std::strerror(error_number));
}

/// The size of the regular file at `path`, -1 for anything else.
std::int64_t regular_file_bytes(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return st.st_size;
  return -1;
}

} // namespace

void require_readable(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) throw_open_error(path, ENOENT);
  if (std::filesystem::is_directory(status)) throw_open_error(path, EISDIR);
  std::ifstream probe(path, std::ios::binary);
  if (!probe) throw_open_error(path, errno != 0 ? errno : EACCES);
}

std::string first_existing(const std::vector<std::string>& candidates) {
  for (const auto& candidate : candidates) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec)) return candidate;
  }
  return candidates.front();
}

LineReader::LineReader(std::string path, std::size_t max_line_bytes)
    : path_(std::move(path)), max_line_bytes_(max_line_bytes),
      file_bytes_(regular_file_bytes(path_)),
      progress_("reading " + std::filesystem::path(path_).filename().string(),
                std::max<std::int64_t>(file_bytes_, 0), "bytes") {
  require_readable(path_);
  file_ = gzopen(path_.c_str(), "rb");
  if (file_ == nullptr) throw_open_error(path_, errno != 0 ? errno : ENOMEM);
  gzbuffer(file_, 1u << 18);
  compressed_ = gzdirect(file_) == 0;
  buffer_.resize(std::min(kChunk, max_line_bytes_ + 1));
}

LineReader::~LineReader() {
  if (file_ != nullptr) gzclose(file_);
}

void LineReader::fail(const std::string& message) const {
  throw FormatError(path_ + ":" + std::to_string(line_) + ": " + message);
}

std::int64_t LineReader::max_records(std::int64_t min_record_bytes) const noexcept {
  // Deflate expands at most 1032:1, so a gzip'd file bounds its text too.
  constexpr std::int64_t kMaxDeflateRatio = 1032;
  constexpr std::int64_t kUnbounded = std::numeric_limits<std::int64_t>::max();
  if (file_bytes_ < 0 || min_record_bytes <= 0) return kUnbounded;
  const std::int64_t records = (file_bytes_ + 1) / min_record_bytes;
  if (!compressed_) return records;
  if (file_bytes_ + 1 > kUnbounded / kMaxDeflateRatio) return kUnbounded;
  return (file_bytes_ + 1) * kMaxDeflateRatio / min_record_bytes;
}

void LineReader::refuse_nul(std::size_t from) const {
  const char* start = buffer_.data() + from;
  const auto* nul = static_cast<const char*>(std::memchr(start, '\0', end_ - from));
  if (nul == nullptr) return;
  // The bytes after begin_ belong to the lines after the last one returned.
  const char* first = buffer_.data() + begin_;
  const auto line = line_ + 1 + std::count(first, nul, '\n');
  throw FormatError(
      path_ + ":" + std::to_string(line) + ": NUL byte at byte offset " +
      std::to_string(consumed_before_ + static_cast<std::size_t>(nul - buffer_.data())) +
      ": not a text file");
}
bool LineReader::refill() {
  if (at_eof_) return false;
  // Keep the unconsumed tail (a partial line) at the front; grow when one line fills the buffer.
  const std::size_t tail = end_ - begin_;
  if (begin_ > 0) std::memmove(buffer_.data(), buffer_.data() + begin_, tail);
  consumed_before_ += begin_;
  begin_ = 0;
  end_ = tail;
  if (end_ == buffer_.size()) buffer_.resize(std::min(buffer_.size() * 2, max_line_bytes_ + 1));
  const int got =
      gzread(file_, buffer_.data() + end_, static_cast<unsigned>(buffer_.size() - end_));
  int status = Z_OK;
  const char* message = gzerror(file_, &status);
  if (got < 0 || (status != Z_OK && status != Z_STREAM_END)) {
    if (status == Z_ERRNO) {
      throw IoError("cannot read '" + path_ + "': " + std::strerror(errno));
    }
    throw FormatError(path_ + ": corrupt or truncated gzip data after line " +
                      std::to_string(line_) + ": " + message);
  }
  if (got == 0) {
    at_eof_ = true;
    return false;
  }
  end_ += static_cast<std::size_t>(got);
  refuse_nul(end_ - static_cast<std::size_t>(got));
  progress_.advance(gzoffset(file_));
  return true;
}

bool LineReader::next(std::string_view& line) {
  while (true) {
    const char* start = buffer_.data() + begin_;
    const auto* newline = static_cast<const char*>(std::memchr(start, '\n', end_ - begin_));
    if (newline == nullptr && end_ - begin_ > max_line_bytes_) {
      throw FormatError(path_ + ":" + std::to_string(line_ + 1) + ": line longer than " +
                        std::to_string(max_line_bytes_) +
                        " bytes without a newline: not a line-oriented text file");
    }
    if (newline != nullptr) {
      std::size_t length = static_cast<std::size_t>(newline - start);
      begin_ += length + 1;
      if (length > 0 && start[length - 1] == '\r') --length;
      line = {start, length};
      ++line_;
      return true;
    }
    if (!refill()) {
      if (begin_ == end_) return false;
      // The last line has no newline.
      std::size_t length = end_ - begin_;
      if (buffer_[begin_ + length - 1] == '\r') --length;
      line = {buffer_.data() + begin_, length};
      begin_ = end_;
      ++line_;
      return true;
    }
  }
}

std::string read_text_file(const std::string& path, std::size_t max_bytes) {
  require_readable(path);
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) throw_open_error(path, errno != 0 ? errno : ENOMEM);
  std::string text;
  std::vector<char> chunk(kChunk);
  while (true) {
    const int got = gzread(file, chunk.data(), static_cast<unsigned>(chunk.size()));
    int status = Z_OK;
    const std::string message = gzerror(file, &status);
    if (got < 0 || (status != Z_OK && status != Z_STREAM_END)) {
      const int error_number = errno;
      gzclose(file);
      if (status == Z_ERRNO) {
        throw IoError("cannot read '" + path + "': " + std::strerror(error_number));
      }
      throw FormatError(path + ": corrupt or truncated gzip data: " + message);
    }
    if (got == 0) break;
    // Text holds no NUL byte; stopping at one (or at the size bound) keeps a binary file or an
    // endless stream such as /dev/zero from being read into memory.
    const auto* nul =
        static_cast<const char*>(std::memchr(chunk.data(), '\0', static_cast<std::size_t>(got)));
    if (nul != nullptr || text.size() + static_cast<std::size_t>(got) > max_bytes) {
      gzclose(file);
      if (nul != nullptr) {
        throw FormatError(
            path + ": NUL byte at byte offset " +
            std::to_string(text.size() + static_cast<std::size_t>(nul - chunk.data())) +
            ": not a text file");
      }
      throw FormatError(path + ": more than " + std::to_string(max_bytes) +
                        " bytes, the most a text side file may hold");
    }
    text.append(chunk.data(), static_cast<std::size_t>(got));
  }
  gzclose(file);
  return text;
}

void split_whitespace(std::string_view line, std::vector<std::string_view>& fields) {
  fields.clear();
  std::size_t i = 0;
  const std::size_t n = line.size();
  while (true) {
    while (i < n && (line[i] == ' ' || line[i] == '\t'))
      ++i;
    if (i == n) return;
    const std::size_t start = i;
    while (i < n && line[i] != ' ' && line[i] != '\t')
      ++i;
    fields.push_back(line.substr(start, i - start));
  }
}

void split_on(std::string_view line, char delimiter, std::vector<std::string_view>& fields) {
  fields.clear();
  std::size_t start = 0;
  while (true) {
    const std::size_t end = line.find(delimiter, start);
    if (end == std::string_view::npos) {
      fields.push_back(line.substr(start));
      return;
    }
    fields.push_back(line.substr(start, end - start));
    start = end + 1;
  }
}

bool is_blank(std::string_view line) noexcept {
  return line.find_first_not_of(" \t") == std::string_view::npos;
}

bool try_parse_int(std::string_view field, std::int64_t& value) noexcept {
  const char* end = field.data() + field.size();
  const auto [ptr, ec] = std::from_chars(field.data(), end, value);
  return ec == std::errc{} && ptr == end && !field.empty();
}

std::int64_t parse_int(const LineReader& in, std::string_view field, std::string_view what) {
  std::int64_t value = 0;
  const char* end = field.data() + field.size();
  const auto [ptr, ec] = std::from_chars(field.data(), end, value);
  if (ec == std::errc{} && ptr == end && !field.empty()) return value;
  const bool too_long = ec == std::errc::result_out_of_range && ptr == end;
  in.fail("expected " + std::string(what) + ", found " + quote(field) +
          (too_long ? ", which is beyond the 64-bit integer range" : ""));
}

double parse_double(const LineReader& in, std::string_view field, std::string_view what) {
  double value = 0.0;
  const char* end = field.data() + field.size();
  const auto [ptr, ec] = std::from_chars(field.data(), end, value);
  if (ec != std::errc{} || ptr != end || field.empty()) {
    in.fail("expected " + std::string(what) + ", found " + quote(field));
  }
  return value;
}

std::string quote(std::string_view text) {
  constexpr std::size_t kMax = 60;
  const bool shorten = text.size() > kMax;
  std::string out;
  out.reserve(std::min(text.size(), kMax) + 5);
  out.push_back('\'');
  out.append(text.substr(0, kMax));
  if (shorten) out.append("...");
  out.push_back('\'');
  return out;
}

} // namespace tessera::io
