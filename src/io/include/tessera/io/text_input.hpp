// Line-by-line reading of plain or gzip'd text files, with parse errors that point at file:line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

struct gzFile_s;

namespace tessera::io {

/// Throws IoError naming `path` unless it is a regular file that can be opened for reading.
void require_readable(const std::string& path);

/// The first of `candidates` that exists, or the first candidate when none does (so that opening
/// it reports the missing file).
std::string first_existing(const std::vector<std::string>& candidates);

/// Reads a plain or gzip'd text file (zlib's gzread reads both) one line at a time. Lines come
/// without their "\n" or "\r\n"; blank lines are returned too (METIS gives them meaning).
class LineReader {
public:
  /// Opens `path`; throws IoError when it cannot be opened.
  explicit LineReader(std::string path);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  /// Sets `line` to the next line (valid until the next call) and returns true, or returns false
  /// at the end of the file. Throws IoError on a read error and FormatError on corrupt gzip data.
  bool next(std::string_view& line);

  /// 1-based number of the line last returned by next().
  std::int64_t line_number() const noexcept { return line_; }
  const std::string& path() const noexcept { return path_; }

  /// Throws FormatError "path:line: message".
  [[noreturn]] void fail(const std::string& message) const;

private:
  /// Reads more bytes after the unconsumed tail; false at the end of the file.
  bool refill();

  std::string path_;
  gzFile_s* file_ = nullptr;
  std::vector<char> buffer_;
  std::size_t begin_ = 0; // first unconsumed byte
  std::size_t end_ = 0;   // one past the last byte read
  bool at_eof_ = false;
  std::int64_t line_ = 0;
};

/// The whole content of a plain or gzip'd text file.
std::string read_text_file(const std::string& path);

/// Splits `line` at runs of spaces and tabs into `fields` (cleared first); no empty fields.
void split_whitespace(std::string_view line, std::vector<std::string_view>& fields);

/// Splits `line` at every `delimiter` into `fields` (cleared first); empty fields are kept.
void split_on(std::string_view line, char delimiter, std::vector<std::string_view>& fields);

/// True for lines that hold only spaces and tabs.
bool is_blank(std::string_view line) noexcept;

/// `field` parsed as a whole decimal integer, else FormatError "path:line: expected <what>,
/// found '<field>'".
std::int64_t parse_int(const LineReader& in, std::string_view field, std::string_view what);

/// `field` parsed as a whole floating-point number, else FormatError like parse_int.
double parse_double(const LineReader& in, std::string_view field, std::string_view what);

/// `field` as an integer, or false when it is not one (no exception).
bool try_parse_int(std::string_view field, std::int64_t& value) noexcept;

/// `text` quoted for an error message, shortened when long.
std::string quote(std::string_view text);

} // namespace tessera::io
