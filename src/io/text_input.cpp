// Line-by-line reading of plain or gzip'd text files, with parse errors that point at file:line.
#include "tessera/io/text_input.hpp"

#include "tessera/core/error.hpp"
#include "tessera/io/input_file.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <zlib.h>

namespace tessera::io {

namespace {

constexpr std::size_t kChunk = std::size_t{1} << 20;

/// The size of the regular file at `path`, -1 for anything else.
std::int64_t regular_file_bytes(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return st.st_size;
  return -1;
}

} // namespace

void require_readable(const std::string& path) {
  const InputFile probe(path);
}

std::string first_existing(const std::vector<std::string>& candidates) {
  for (const auto& candidate : candidates) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec)) return candidate;
  }
  return candidates.front();
}

/// A plain or gzip'd file read as its text. gzip is recognised by its magic bytes; its members
/// are inflated one after another, zero padding after the last is skipped, and anything else
/// after the gzip data is refused: zlib's gzread ignores such bytes, which would make a file with
/// data appended after its stream load as if it ended there.
class TextSource {
public:
  explicit TextSource(const std::string& path) : path_(path), file_(path), input_(kChunk) {
    fill(0);
    compressed_ = available() >= 2 && input_[begin_] == 0x1f && input_[begin_ + 1] == 0x8b;
    if (compressed_ && inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) {
      throw FormatError(path_ + ": cannot start zlib's inflate");
    }
  }
  ~TextSource() {
    if (compressed_) inflateEnd(&z_);
  }
  TextSource(const TextSource&) = delete;
  TextSource& operator=(const TextSource&) = delete;

  bool compressed() const noexcept { return compressed_; }
  /// Bytes of the file consumed so far.
  std::uint64_t offset() const noexcept { return file_offset_ - available(); }

  /// Up to `capacity` bytes of text into `out`; 0 at the end of the text.
  std::size_t read(char* out, std::size_t capacity) {
    if (!compressed_) {
      if (available() == 0) fill(0);
      const std::size_t n = std::min(capacity, available());
      std::memcpy(out, input_.data() + begin_, n);
      begin_ += n;
      return n;
    }
    while (true) {
      if (member_ended_ && !next_member()) return 0;
      if (available() == 0) fill(0);
      z_.next_in = input_.data() + begin_;
      z_.avail_in = static_cast<uInt>(std::min<std::size_t>(available(), UINT32_MAX));
      z_.next_out = reinterpret_cast<Bytef*>(out);
      z_.avail_out = static_cast<uInt>(std::min<std::size_t>(capacity, UINT32_MAX));
      const uInt in_before = z_.avail_in;
      const int status = inflate(&z_, Z_NO_FLUSH);
      begin_ += in_before - z_.avail_in;
      const std::size_t produced = std::min<std::size_t>(capacity, UINT32_MAX) - z_.avail_out;
      if (status == Z_STREAM_END) {
        member_ended_ = true;
      } else if (status == Z_BUF_ERROR && available() == 0 && at_end_) {
        throw FormatError(path_ +
                          ": corrupt or truncated gzip data: the file ends inside the "
                          "gzip stream (at byte " +
                          std::to_string(offset()) + ")");
      } else if (status != Z_OK && status != Z_BUF_ERROR) {
        throw FormatError(path_ + ": corrupt or truncated gzip data at byte " +
                          std::to_string(offset()) + ": " +
                          (z_.msg != nullptr ? z_.msg : "zlib error"));
      }
      if (produced > 0) return produced;
    }
  }

private:
  std::size_t available() const noexcept { return end_ - begin_; }

  /// Reads more of the file until at least `want` bytes are unconsumed (or the file ends).
  void fill(std::size_t want) {
    if (begin_ > 0) {
      std::memmove(input_.data(), input_.data() + begin_, available());
      end_ -= begin_;
      begin_ = 0;
    }
    do {
      if (at_end_) return;
      const ssize_t got = ::read(file_.fd(), input_.data() + end_, input_.size() - end_);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw IoError("cannot read '" + path_ + "': " + std::strerror(errno));
      if (got == 0) at_end_ = true;
      end_ += static_cast<std::size_t>(got);
      file_offset_ += static_cast<std::uint64_t>(got);
    } while (available() < std::max<std::size_t>(want, 1));
  }

  /// After a member ended: true when another member follows (inflate reset for it), false at the
  /// end of the file (zero padding skipped). Anything else is refused.
  bool next_member() {
    while (true) {
      if (available() < 2) fill(2);
      while (available() > 0 && input_[begin_] == 0)
        ++begin_;
      if (available() >= 2 || at_end_) break;
    }
    if (available() == 0) return false;
    if (available() < 2 || input_[begin_] != 0x1f || input_[begin_ + 1] != 0x8b) {
      const std::uint64_t at = offset();
      std::uint64_t trailing = available();
      while (!at_end_) {
        begin_ = end_;
        fill(0);
        trailing += available();
      }
      throw FormatError(path_ + ": " + std::to_string(trailing) +
                        " bytes after the end of the gzip data (from byte " + std::to_string(at) +
                        "): not gzip data; the file was appended to or is corrupt");
    }
    if (inflateReset(&z_) != Z_OK) throw FormatError(path_ + ": cannot restart zlib's inflate");
    member_ended_ = false;
    return true;
  }

  std::string path_;
  InputFile file_;
  std::vector<unsigned char> input_;
  std::size_t begin_ = 0, end_ = 0; // the unconsumed bytes input_[begin_, end_)
  std::uint64_t file_offset_ = 0;   // bytes read from the file
  bool at_end_ = false;
  bool compressed_ = false;
  bool member_ended_ = false;
  z_stream z_{};
};

LineReader::LineReader(std::string path, std::size_t max_line_bytes)
    : path_(std::move(path)), max_line_bytes_(max_line_bytes),
      file_bytes_(regular_file_bytes(path_)),
      progress_("reading " + std::filesystem::path(path_).filename().string(),
                std::max<std::int64_t>(file_bytes_, 0), "bytes") {
  source_ = std::make_unique<TextSource>(path_);
  buffer_.resize(std::min(kChunk, max_line_bytes_ + 1));
}

LineReader::~LineReader() = default;

void LineReader::fail(const std::string& message) const {
  throw FormatError(path_ + ":" + std::to_string(line_) + ": " + message);
}

std::int64_t LineReader::max_records(std::int64_t min_record_bytes) const noexcept {
  // Deflate expands at most 1032:1, so a gzip'd file bounds its text too.
  constexpr std::int64_t kMaxDeflateRatio = 1032;
  constexpr std::int64_t kUnbounded = std::numeric_limits<std::int64_t>::max();
  if (file_bytes_ < 0 || min_record_bytes <= 0) return kUnbounded;
  const std::int64_t records = (file_bytes_ + 1) / min_record_bytes;
  if (!source_->compressed()) return records;
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
  std::size_t got = 0;
  try {
    got = source_->read(buffer_.data() + end_, buffer_.size() - end_);
  } catch (const FormatError& e) {
    throw FormatError(std::string(e.what()) + " (after line " + std::to_string(line_) + ")");
  }
  if (got == 0) {
    at_eof_ = true;
    return false;
  }
  end_ += got;
  refuse_nul(end_ - got);
  progress_.advance(static_cast<std::int64_t>(source_->offset()));
  return true;
}

void LineReader::skip_byte_order_mark(std::string_view& line) const noexcept {
  // The UTF-8 byte order mark some editors and spreadsheet exports put before the first line.
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  if (line_ == 1 && line.starts_with(kBom)) line.remove_prefix(kBom.size());
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
      skip_byte_order_mark(line);
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
      skip_byte_order_mark(line);
      return true;
    }
  }
}

std::string read_text_file(const std::string& path, std::size_t max_bytes) {
  TextSource source(path);
  std::string text;
  std::vector<char> chunk(kChunk);
  while (const std::size_t got = source.read(chunk.data(), chunk.size())) {
    // Text holds no NUL byte; stopping at one (or at the size bound) keeps a binary file or an
    // endless stream from being read into memory.
    const auto* nul = static_cast<const char*>(std::memchr(chunk.data(), '\0', got));
    if (nul != nullptr) {
      throw FormatError(path + ": NUL byte at byte offset " +
                        std::to_string(text.size() + static_cast<std::size_t>(nul - chunk.data())) +
                        ": not a text file");
    }
    if (text.size() + got > max_bytes) {
      throw FormatError(path + ": more than " + std::to_string(max_bytes) +
                        " bytes, the most a text side file may hold");
    }
    text.append(chunk.data(), got);
  }
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

bool is_comment(std::string_view line, std::string_view marks) noexcept {
  return !line.empty() && marks.find(line.front()) != std::string_view::npos;
}

bool next_content_line(LineReader& in, std::string_view& line, std::string_view marks) {
  while (in.next(line)) {
    if (!is_blank(line) && !is_comment(line, marks)) return true;
  }
  return false;
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

std::string not_finite_reason(double value) {
  return std::isfinite(value) ? "is beyond float32's range (+-3.4e38), in which Tessera computes"
                              : "is not finite (NaN and infinite values are refused)";
}

namespace {

/// The UTF-8 encodings of characters a terminal shows as nothing or as a space, and their names:
/// in a message they would make "found '1'" look like valid input.
constexpr std::pair<std::string_view, std::string_view> kInvisible[] = {
    {"\xC2\xA0", "\\u00a0"},     {"\xC2\xAD", "\\u00ad"},     {"\xE2\x80\x8B", "\\u200b"},
    {"\xE2\x80\x8C", "\\u200c"}, {"\xE2\x80\x8D", "\\u200d"}, {"\xE2\x80\x8E", "\\u200e"},
    {"\xE2\x80\x8F", "\\u200f"}, {"\xE2\x80\xA8", "\\u2028"}, {"\xE2\x80\xA9", "\\u2029"},
    {"\xE2\x81\xA0", "\\u2060"}, {"\xEF\xBB\xBF", "\\ufeff"}};

} // namespace

std::string quote(std::string_view text) {
  constexpr std::size_t kMax = 60;
  const bool shorten = text.size() > kMax;
  text = text.substr(0, kMax);
  std::string out;
  out.reserve(text.size() + 5);
  out.push_back('\'');
  // Control and invisible characters escaped: a raw carriage return would make the terminal
  // overwrite the message with what follows it, a no-break space or a byte order mark would not
  // show at all.
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const auto byte = static_cast<unsigned char>(c);
    const auto* invisible =
        std::find_if(std::begin(kInvisible), std::end(kInvisible),
                     [&](const auto& entry) { return text.substr(i).starts_with(entry.first); });
    if (invisible != std::end(kInvisible)) {
      out.append(invisible->second);
      i += invisible->first.size() - 1;
    } else if (c == '\r') {
      out.append("\\r");
    } else if (c == '\t') {
      out.append("\\t");
    } else if (byte < 0x20 || byte == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out.append("\\x");
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 15]);
    } else {
      out.push_back(c);
    }
  }
  if (shorten) out.append("...");
  out.push_back('\'');
  return out;
}

} // namespace tessera::io
