// Line-by-line reading of plain or gzip'd text files, with parse errors that point at file:line.
#pragma once

#include "tessera/core/progress.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::io {

/// The text of a plain or gzip'd file, read in order (text_input.cpp).
class TextSource;

/// Throws IoError naming `path` unless it is a regular file that can be opened for reading.
void require_readable(const std::string& path);

/// The first of `candidates` that exists, or the first candidate when none does (so that opening
/// it reports the missing file).
std::string first_existing(const std::vector<std::string>& candidates);

/// The longest line LineReader accepts by default: far above any real record (a LINQS line of
/// 4,000 features is 8 KiB), low enough that a stream without newlines fails in a moment.
inline constexpr std::size_t kMaxLineBytes = std::size_t{64} << 20;

/// The most bytes read_text_file reads by default (JSON side files are a few MiB).
inline constexpr std::size_t kMaxTextFileBytes = std::size_t{1} << 30;

/// Reads a plain or gzip'd text file one line at a time. A gzip'd file may hold several members
/// (as `cat a.gz b.gz` makes), read as one text, and zero bytes after the last (as Python's gzip
/// allows); any other byte after the gzip data is refused (FormatError naming the file and the
/// offset), as is gzip data that ends early. Only regular files are read (open_input_file). Lines
/// come without their "\n" or "\r\n"; blank lines are returned too (METIS gives them meaning). Text
/// never holds a NUL byte, and a line never runs past `max_line_bytes`: both are refused with a
/// FormatError as soon as they are read, so a binary file or a stream such as /dev/zero fails at
/// once instead of being read into memory. Reading reports progress ("reading NAME", in bytes of
/// the file as stored) while the reader lives.
class LineReader {
public:
  /// Opens `path`; throws IoError when it cannot be opened.
  explicit LineReader(std::string path, std::size_t max_line_bytes = kMaxLineBytes);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  /// Sets `line` to the next line (valid until the next call; without its line ending, and without
  /// a UTF-8 byte order mark on line 1) and returns true, or returns false at the end of the file.
  /// Throws IoError on a read error and FormatError on corrupt gzip data.
  bool next(std::string_view& line);

  /// 1-based number of the line last returned by next().
  std::int64_t line_number() const noexcept { return line_; }
  const std::string& path() const noexcept { return path_; }

  /// The most records of at least `min_record_bytes` bytes each (its newline included; the last
  /// may lack it) that the file can hold: (size + 1) / min_record_bytes for a plain file, times
  /// 1032 (deflate's largest expansion) for a gzip'd one, no bound (INT64_MAX) for a stream that
  /// is not a regular file. Loaders check counts announced in a header against it before sizing
  /// anything by them.
  std::int64_t max_records(std::int64_t min_record_bytes) const noexcept;

  /// Throws FormatError "path:line: message".
  [[noreturn]] void fail(const std::string& message) const;

private:
  /// Drops a UTF-8 byte order mark from the start of the first line.
  void skip_byte_order_mark(std::string_view& line) const noexcept;
  /// Reads more bytes after the unconsumed tail; false at the end of the file.
  bool refill();
  /// Throws FormatError when bytes [from, end_) of the buffer hold a NUL byte.
  void refuse_nul(std::size_t from) const;

  std::string path_;
  std::size_t max_line_bytes_;
  std::int64_t file_bytes_ = -1;      // -1: not a regular file
  std::uint64_t consumed_before_ = 0; // bytes of the text before buffer_[0]
  std::unique_ptr<TextSource> source_;
  std::vector<char> buffer_;
  std::size_t begin_ = 0; // first unconsumed byte
  std::size_t end_ = 0;   // one past the last byte read
  bool at_eof_ = false;
  std::int64_t line_ = 0;
  ProgressStage progress_;
};

/// The whole content of a plain or gzip'd text file (read as LineReader reads it). Throws
/// FormatError naming the file when it holds a NUL byte (not text), more than `max_bytes` bytes
/// or bytes after its gzip data, IoError when it cannot be read or is not a regular file.
std::string read_text_file(const std::string& path, std::size_t max_bytes = kMaxTextFileBytes);

/// Splits `line` at runs of spaces and tabs into `fields` (cleared first); no empty fields.
void split_whitespace(std::string_view line, std::vector<std::string_view>& fields);

/// Splits `line` at every `delimiter` into `fields` (cleared first); empty fields are kept.
void split_on(std::string_view line, char delimiter, std::vector<std::string_view>& fields);

/// True for lines that hold only spaces and tabs.
bool is_blank(std::string_view line) noexcept;

/// True for lines that start with one of the characters of `marks` ("%", "#%").
bool is_comment(std::string_view line, std::string_view marks) noexcept;

/// Sets `line` to the next line of `in` that is neither blank nor a comment (is_comment with
/// `marks`) and returns true; false at the end of the file.
bool next_content_line(LineReader& in, std::string_view& line, std::string_view marks);

/// `field` parsed as a whole decimal integer, else FormatError "path:line: expected <what>,
/// found '<field>'" (adding that it is beyond the 64-bit range for a longer integer).
std::int64_t parse_int(const LineReader& in, std::string_view field, std::string_view what);

/// `field` parsed as a whole floating-point number, else FormatError like parse_int.
double parse_double(const LineReader& in, std::string_view field, std::string_view what);

/// `field` as an integer, or false when it is not one (no exception).
bool try_parse_int(std::string_view field, std::int64_t& value) noexcept;

/// Why `value`, read from text, cannot be used as a float32: "is not finite (NaN and infinite
/// values are refused)" or, for a finite value beyond +-3.4e38, "is beyond float32's range
/// (+-3.4e38), in which Tessera computes".
std::string not_finite_reason(double value);

/// `text` quoted for an error message, shortened when long, control characters escaped (\r, \t,
/// \xNN).
std::string quote(std::string_view text);

} // namespace tessera::io
