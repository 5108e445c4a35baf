// Reading and writing .npz archives: zip files (stored or deflated) whose members are .npy arrays.
#include "npz.hpp"

#include "tessera/core/error.hpp"
#include "tessera/core/sizes.hpp"
#include "tessera/io/array_file.hpp"
#include "tessera/io/input_file.hpp"

#include <array>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/core.h>
#include <limits>
#include <map>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <zlib.h>

namespace tessera::datasets::detail {

namespace {

constexpr std::uint32_t kLocalHeaderSignature = 0x04034b50;
constexpr std::uint32_t kCentralHeaderSignature = 0x02014b50;
constexpr std::uint32_t kEndSignature = 0x06054b50;
constexpr std::uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr std::size_t kLocalHeaderBytes = 30;
constexpr std::size_t kCentralHeaderBytes = 46;
constexpr std::size_t kEndBytes = 22;
constexpr std::size_t kMaxEndSearch = kEndBytes + 0xFFFF;
constexpr std::uint16_t kMethodStored = 0;
constexpr std::uint16_t kMethodDeflated = 8;
constexpr std::uint16_t kDosDate1980 = (0 << 9) | (1 << 5) | 1; // 1980-01-01
constexpr std::size_t kIoChunk = std::size_t{1} << 20;
constexpr std::string_view kNpyMagic = "\x93NUMPY";

std::uint16_t get16(const unsigned char* p) noexcept {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}
std::uint32_t get32(const unsigned char* p) noexcept {
  return static_cast<std::uint32_t>(get16(p)) | (static_cast<std::uint32_t>(get16(p + 2)) << 16);
}
void put16(std::string& out, std::uint16_t v) {
  out.push_back(static_cast<char>(v & 0xFF));
  out.push_back(static_cast<char>(v >> 8));
}
void put32(std::string& out, std::uint32_t v) {
  put16(out, static_cast<std::uint16_t>(v & 0xFFFF));
  put16(out, static_cast<std::uint16_t>(v >> 16));
}

std::size_t item_size(DType dtype) noexcept {
  switch (dtype) {
  case DType::Int8:
  case DType::UInt8:
  case DType::Bool:
    return 1;
  case DType::Int32:
  case DType::Float32:
    return 4;
  case DType::Int64:
  case DType::Float64:
    return 8;
  }
  return 0;
}

bool is_floating(DType dtype) noexcept {
  return dtype == DType::Float32 || dtype == DType::Float64;
}

std::optional<DType> parse_descr(std::string_view descr) noexcept {
  if (descr == "<i4") return DType::Int32;
  if (descr == "<i8") return DType::Int64;
  if (descr == "<f4") return DType::Float32;
  if (descr == "<f8") return DType::Float64;
  if (descr == "|i1" || descr == "<i1") return DType::Int8;
  if (descr == "|u1" || descr == "<u1") return DType::UInt8;
  if (descr == "|b1") return DType::Bool;
  return std::nullopt;
}

/// Strings, bytes, objects and records: arrays that are not numbers at all.
bool is_non_numeric(std::string_view descr) noexcept {
  if (descr.size() < 2) return false;
  const char kind = descr[1];
  return descr.front() == '[' || kind == 'U' || kind == 'S' || kind == 'O' || kind == 'V' ||
         kind == 'a';
}

/// Parses the Python dict literal of an .npy header, e.g.
/// {'descr': '<f4', 'fortran_order': False, 'shape': (2708, 1433), }
class HeaderParser {
public:
  HeaderParser(std::string_view text, const NpzReader& reader, const std::string& key)
      : text_(text), reader_(reader), key_(key) {}

  NpyInfo parse() {
    NpyInfo info;
    bool has_descr = false, has_order = false, has_shape = false;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string name = parse_string();
      expect(':');
      skip_space();
      if (name == "descr") {
        info.descr = peek() == '[' ? parse_bracketed() : parse_string();
        has_descr = true;
      } else if (name == "fortran_order") {
        info.fortran_order = parse_bool();
        has_order = true;
      } else if (name == "shape") {
        info.shape = parse_shape();
        has_shape = true;
      } else {
        fail("unexpected key '" + name + "'");
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') fail("expected ',' or '}'");
    }
    if (!has_descr || !has_order || !has_shape) {
      fail("missing 'descr', 'fortran_order' or 'shape'");
    }
    info.dtype = parse_descr(info.descr);
    return info;
  }

private:
  char peek() const noexcept { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() noexcept {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t'))
      ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string parse_string() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a quoted string");
    const std::size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string value(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return value;
  }
  std::string parse_bracketed() {
    int depth = 0;
    const std::size_t start = pos_;
    for (; pos_ < text_.size(); ++pos_) {
      if (text_[pos_] == '[') ++depth;
      if (text_[pos_] == ']' && --depth == 0) {
        ++pos_;
        return std::string(text_.substr(start, pos_ - start));
      }
    }
    fail("unterminated list");
  }
  bool parse_bool() {
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    fail("expected True or False");
  }
  std::vector<std::int64_t> parse_shape() {
    std::vector<std::int64_t> shape;
    expect('(');
    while (true) {
      skip_space();
      if (peek() == ')') break;
      std::int64_t value = 0;
      const std::size_t start = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        if (value > (std::numeric_limits<std::int64_t>::max() - 9) / 10)
          fail("dimension too large");
        value = value * 10 + (text_[pos_++] - '0');
      }
      if (pos_ == start) fail("expected a non-negative dimension");
      if (peek() == 'L') ++pos_; // Python 2 longs
      shape.push_back(value);
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != ')') {
        fail("expected ',' or ')' in shape");
      }
    }
    ++pos_;
    return shape;
  }
  [[noreturn]] void fail(const std::string& what) const {
    reader_.fail(key_, "bad .npy header: " + what + " at offset " + std::to_string(pos_) +
                           " of \"" + std::string(text_) + "\"");
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  const NpzReader& reader_;
  const std::string& key_;
};

std::string key_of(const std::string& member_name) {
  constexpr std::string_view kSuffix = ".npy";
  if (member_name.size() > kSuffix.size() && member_name.ends_with(kSuffix)) {
    return member_name.substr(0, member_name.size() - kSuffix.size());
  }
  return member_name;
}

template <typename T> constexpr const char* type_name() noexcept {
  if constexpr (std::is_same_v<T, std::int64_t>) return "int64";
  if constexpr (std::is_same_v<T, std::int32_t>) return "int32";
  if constexpr (std::is_same_v<T, std::int8_t>) return "int8";
  if constexpr (std::is_same_v<T, std::uint8_t>) return "uint8";
  if constexpr (std::is_same_v<T, float>) return "float32";
  if constexpr (std::is_same_v<T, double>) return "float64";
  return "?";
}

} // namespace

const char* descr_of(DType dtype) noexcept {
  switch (dtype) {
  case DType::Int8:
    return "|i1";
  case DType::UInt8:
    return "|u1";
  case DType::Bool:
    return "|b1";
  case DType::Int32:
    return "<i4";
  case DType::Int64:
    return "<i8";
  case DType::Float32:
    return "<f4";
  case DType::Float64:
    return "<f8";
  }
  return "?";
}

bool NpyInfo::holds_integers() const noexcept {
  return dtype && *dtype != DType::Bool && !is_floating(*dtype);
}

std::string NpyInfo::shape_string() const {
  return shape_text(shape);
}

// ---- reader ------------------------------------------------------------------------------------

/// The uncompressed bytes of one member, read in order; checks the CRC once all are read.
class NpzReader::MemberStream {
public:
  MemberStream(const NpzReader& reader, const Member& member, const std::string& key)
      : reader_(reader), member_(member), key_(key) {
    std::array<unsigned char, kLocalHeaderBytes> header{};
    if (member.local_header_offset + kLocalHeaderBytes > reader.file_size_) {
      fail("local header at offset " + std::to_string(member.local_header_offset) +
           " lies past the end of the file (truncated archive)");
    }
    reader.read_exact(member.local_header_offset, header.data(), header.size());
    if (get32(header.data()) != kLocalHeaderSignature) {
      fail("no zip local header at offset " + std::to_string(member.local_header_offset));
    }
    data_offset_ =
        member.local_header_offset + kLocalHeaderBytes + get16(&header[26]) + get16(&header[28]);
    if (data_offset_ + member.compressed_size > reader.file_size_) {
      fail("data needs bytes up to offset " +
           std::to_string(data_offset_ + member.compressed_size) + " but the file has " +
           std::to_string(reader.file_size_) + " (truncated archive)");
    }
    if (member.method == kMethodDeflated) {
      if (inflateInit2(&z_, -MAX_WBITS) != Z_OK) fail("cannot initialize zlib inflate");
      inflating_ = true;
      input_.resize(kIoChunk);
    }
  }
  ~MemberStream() {
    if (inflating_) inflateEnd(&z_);
  }
  MemberStream(const MemberStream&) = delete;
  MemberStream& operator=(const MemberStream&) = delete;

  std::uint64_t remaining() const noexcept { return member_.uncompressed_size - produced_; }

  /// Reads exactly `bytes` uncompressed bytes into `out`.
  void read(void* out, std::size_t bytes) {
    if (bytes > remaining()) {
      fail("member ends after " + std::to_string(member_.uncompressed_size) +
           " bytes, but more are needed (truncated array)");
    }
    if (inflating_) {
      inflate_into(static_cast<unsigned char*>(out), bytes);
    } else {
      reader_.read_exact(data_offset_ + produced_, out, bytes);
    }
    crc_ = io::crc32_update(crc_, out, bytes);
    produced_ += bytes;
  }

  /// Checks the CRC; call after reading every byte.
  void finish() const {
    if (produced_ == member_.uncompressed_size && crc_ != member_.crc) {
      fail("CRC-32 mismatch (corrupt archive)");
    }
  }

private:
  void inflate_into(unsigned char* out, std::size_t bytes) {
    std::size_t done = 0;
    while (done < bytes) {
      if (z_.avail_in == 0 && consumed_ < member_.compressed_size) {
        const auto n = static_cast<std::size_t>(
            std::min<std::uint64_t>(input_.size(), member_.compressed_size - consumed_));
        reader_.read_exact(data_offset_ + consumed_, input_.data(), n);
        consumed_ += n;
        z_.next_in = input_.data();
        z_.avail_in = static_cast<uInt>(n);
      }
      const std::size_t want = std::min<std::size_t>(bytes - done, std::size_t{1} << 30);
      z_.next_out = out + done;
      z_.avail_out = static_cast<uInt>(want);
      const int status = inflate(&z_, Z_NO_FLUSH);
      done += want - z_.avail_out;
      if (status == Z_STREAM_END) {
        if (done < bytes) fail("deflate stream ends early (truncated array)");
        return;
      }
      if (status == Z_BUF_ERROR && z_.avail_in == 0 && consumed_ == member_.compressed_size) {
        fail("deflate data ends early (truncated archive)");
      }
      if (status != Z_OK && status != Z_BUF_ERROR) {
        fail(std::string("corrupt deflate data: ") + (z_.msg != nullptr ? z_.msg : "zlib error"));
      }
    }
  }
  [[noreturn]] void fail(const std::string& what) const { reader_.fail(key_, what); }

  const NpzReader& reader_;
  const Member& member_;
  const std::string& key_;
  std::uint64_t data_offset_ = 0;
  std::uint64_t consumed_ = 0; // compressed bytes taken from the file
  std::uint64_t produced_ = 0; // uncompressed bytes handed out
  std::uint32_t crc_ = 0;
  z_stream z_{};
  bool inflating_ = false;
  std::vector<unsigned char> input_;
};

namespace {

/// Reads and parses the .npy header at the start of `stream`.
template <typename Stream>
NpyInfo read_npy_header(Stream& stream, const NpzReader& reader, const std::string& key) {
  std::array<unsigned char, 10> prefix{};
  if (stream.remaining() < prefix.size()) {
    reader.fail(key, "member holds " + std::to_string(stream.remaining()) +
                         " bytes, too few for an .npy header");
  }
  stream.read(prefix.data(), 8);
  if (std::string_view(reinterpret_cast<const char*>(prefix.data()), 6) != kNpyMagic) {
    reader.fail(key, "not an .npy array (bad magic bytes)");
  }
  const int major = prefix[6], minor = prefix[7];
  std::uint64_t header_length = 0;
  std::uint64_t prefix_bytes = 0;
  if (major == 1) {
    stream.read(prefix.data() + 8, 2);
    header_length = get16(prefix.data() + 8);
    prefix_bytes = 10;
  } else if (major == 2 || major == 3) {
    std::array<unsigned char, 4> length{};
    stream.read(length.data(), 4);
    header_length = get32(length.data());
    prefix_bytes = 12;
  } else {
    reader.fail(key, "unsupported .npy format version " + std::to_string(major) + "." +
                         std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)");
  }
  if (header_length > stream.remaining()) {
    reader.fail(key, "bad .npy header: length " + std::to_string(header_length) +
                         " exceeds the member (truncated array)");
  }
  std::string text(header_length, '\0');
  stream.read(text.data(), text.size());
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\0')) {
    text.pop_back();
  }
  NpyInfo info = HeaderParser(text, reader, key).parse();
  info.header_bytes = prefix_bytes + header_length;
  // The one product of the shape: a count that wraps (200 x 2^62 is 0 mod 2^64) would pass every
  // check made with it and size what is allocated.
  const std::optional<std::int64_t> count = checked_product(info.shape);
  if (!count) {
    reader.fail(key, "bad .npy header: shape " + info.shape_string() +
                         " holds more elements than a 64-bit count (its product overflows)");
  }
  info.count = *count;
  return info;
}

/// Checks that `info` describes a numeric array whose bytes fill the member exactly.
void check_readable(const NpyInfo& info, std::uint64_t member_bytes, const NpzReader& reader,
                    const std::string& key) {
  if (!info.dtype) {
    if (is_non_numeric(info.descr)) {
      reader.fail(key, "holds strings or objects (dtype '" + info.descr +
                           "'), not numbers; only numeric arrays can be read");
    }
    reader.fail(key, "unsupported dtype '" + info.descr +
                         "' (supported: <i4 <i8 <f4 <f8 |i1 |u1 |b1, little-endian)");
  }
  const std::int64_t count = info.size();
  const auto item = static_cast<std::int64_t>(item_size(*info.dtype));
  // Elements times their size, plus the header, must be a byte count: it is compared with the
  // member's size next, and a product that wrapped would match a short member.
  const auto limit =
      std::numeric_limits<std::int64_t>::max() - static_cast<std::int64_t>(info.header_bytes);
  if (!checked_product({count, item}, limit)) {
    reader.fail(key, "shape " + info.shape_string() + " of " + info.descr +
                         " holds more bytes than a 64-bit size (its element count times " +
                         std::to_string(item) + " overflows)");
  }
  const std::uint64_t expected = info.header_bytes + static_cast<std::uint64_t>(count) * item;
  if (expected != member_bytes) {
    reader.fail(key, "shape " + info.shape_string() + " of " + info.descr + " needs " +
                         std::to_string(expected - info.header_bytes) + " data bytes, found " +
                         std::to_string(member_bytes - info.header_bytes) +
                         (expected > member_bytes ? " (truncated array)" : ""));
  }
}

/// Converts `n` values from `src` to T, failing on values T cannot hold.
template <typename T, typename S>
void convert(const S* src, T* dst, std::size_t n, std::uint64_t first_index,
             const NpzReader& reader, const std::string& key) {
  for (std::size_t i = 0; i < n; ++i) {
    if constexpr (std::is_integral_v<T> && std::is_integral_v<S>) {
      if (!std::in_range<T>(src[i])) {
        reader.fail(key, "value " + std::to_string(src[i]) + " at index " +
                             std::to_string(first_index + i) + " does not fit " + type_name<T>());
      }
    } else if constexpr (std::is_same_v<T, float> && std::is_same_v<S, double>) {
      // A finite float64 beyond float32's range would read as infinite and be refused as such.
      if (std::isfinite(src[i]) && std::abs(src[i]) > std::numeric_limits<float>::max()) {
        reader.fail(key, "value " + fmt::format("{}", src[i]) + " at index " +
                             std::to_string(first_index + i) +
                             " is beyond float32's range (+-3.4e38), in which Tessera computes");
      }
    }
    dst[i] = static_cast<T>(src[i]);
  }
}

/// Copies `stored`, an array of `shape` laid out in Fortran order (first index fastest), to `out`
/// in C order (last index fastest), as numpy hands such an array to a C-order reader.
template <typename T>
void fortran_to_c_order(std::span<const T> stored, const std::vector<std::int64_t>& shape,
                        std::span<T> out) {
  const std::size_t rank = shape.size();
  std::vector<std::int64_t> stride(rank), index(rank, 0);
  std::int64_t step = 1;
  for (std::size_t a = 0; a < rank; ++a) {
    stride[a] = step;
    step *= shape[a];
  }
  std::int64_t from = 0;
  for (T& value : out) {
    value = stored[static_cast<std::size_t>(from)];
    for (std::size_t a = rank; a-- > 0;) {
      from += stride[a];
      if (++index[a] < shape[a]) break;
      from -= stride[a] * shape[a];
      index[a] = 0;
    }
  }
}

} // namespace

NpzReader::NpzReader(std::string path) : path_(std::move(path)) {
  fd_ = io::open_input_file(path_);
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int error_number = errno;
    ::close(fd_);
    throw IoError("cannot read '" + path_ + "': " + std::strerror(error_number));
  }
  file_size_ = static_cast<std::uint64_t>(st.st_size);
  try {
    read_central_directory();
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

NpzReader::~NpzReader() {
  if (fd_ >= 0) ::close(fd_);
}

void NpzReader::fail(const std::string& key, const std::string& message) const {
  throw FormatError(path_ + ": array '" + key + "': " + message);
}

void NpzReader::read_exact(std::uint64_t offset, void* out, std::size_t bytes) const {
  auto* p = static_cast<char*>(out);
  while (bytes > 0) {
    const ssize_t got = ::pread(fd_, p, std::min<std::size_t>(bytes, std::size_t{1} << 30),
                                static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      throw IoError("cannot read '" + path_ + "': " + std::strerror(errno));
    }
    if (got == 0) {
      throw FormatError(path_ + ": unexpected end of file at offset " + std::to_string(offset) +
                        " (truncated archive)");
    }
    p += got;
    bytes -= static_cast<std::size_t>(got);
    offset += static_cast<std::uint64_t>(got);
  }
}

void NpzReader::read_central_directory() {
  const auto fail_archive = [&](const std::string& what) {
    throw FormatError(path_ + ": not a readable npz archive: " + what);
  };
  if (file_size_ < kEndBytes) {
    fail_archive("the file has " + std::to_string(file_size_) +
                 " bytes, too few for a zip archive (truncated or not a zip file)");
  }
  // The end-of-central-directory record is the last 22 bytes plus an optional comment.
  const std::size_t tail_size =
      static_cast<std::size_t>(std::min<std::uint64_t>(file_size_, kMaxEndSearch));
  std::vector<unsigned char> tail(tail_size);
  read_exact(file_size_ - tail_size, tail.data(), tail_size);
  std::size_t end_pos = std::string::npos;
  for (std::size_t i = tail_size - kEndBytes + 1; i-- > 0;) {
    if (get32(&tail[i]) == kEndSignature) {
      end_pos = i;
      break;
    }
  }
  if (end_pos == std::string::npos) {
    std::array<unsigned char, 4> head{};
    read_exact(0, head.data(), head.size());
    fail_archive(get32(head.data()) == kLocalHeaderSignature
                     ? "zip end-of-central-directory record missing (truncated archive)"
                     : "no zip end-of-central-directory record (not a zip file)");
  }
  const unsigned char* end = &tail[end_pos];
  const std::uint64_t end_offset = file_size_ - tail_size + end_pos;
  const std::uint16_t disk = get16(end + 4), cd_disk = get16(end + 6);
  const std::uint16_t entries = get16(end + 10);
  const std::uint32_t cd_size = get32(end + 12), cd_offset = get32(end + 16);
  const bool zip64_locator = end_pos >= 20 && get32(&tail[end_pos - 20]) == kZip64LocatorSignature;
  if (zip64_locator || entries == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF) {
    fail_archive("zip64 archives (over 4 GiB or 65535 members) are not supported");
  }
  if (disk != 0 || cd_disk != 0) fail_archive("multi-disk zip archives are not supported");
  if (std::uint64_t{cd_offset} + cd_size > end_offset) {
    fail_archive("central directory at offset " + std::to_string(cd_offset) + " (" +
                 std::to_string(cd_size) + " bytes) overlaps the end record at offset " +
                 std::to_string(end_offset) + " (truncated or corrupt archive)");
  }
  std::vector<unsigned char> cd(cd_size);
  read_exact(cd_offset, cd.data(), cd.size());
  std::size_t pos = 0;
  for (std::uint16_t e = 0; e < entries; ++e) {
    if (pos + kCentralHeaderBytes > cd.size() || get32(&cd[pos]) != kCentralHeaderSignature) {
      fail_archive("central directory entry " + std::to_string(e) + " is corrupt");
    }
    const unsigned char* h = &cd[pos];
    const std::uint16_t flags = get16(h + 8);
    Member m;
    m.method = get16(h + 10);
    m.crc = get32(h + 16);
    m.compressed_size = get32(h + 20);
    m.uncompressed_size = get32(h + 24);
    const std::uint16_t name_length = get16(h + 28), extra_length = get16(h + 30),
                        comment_length = get16(h + 32);
    m.local_header_offset = get32(h + 42);
    if (pos + kCentralHeaderBytes + name_length > cd.size()) {
      fail_archive("central directory entry " + std::to_string(e) + " is corrupt");
    }
    m.name.assign(reinterpret_cast<const char*>(h + kCentralHeaderBytes), name_length);
    const std::string key = key_of(m.name);
    if (m.compressed_size == 0xFFFFFFFF || m.uncompressed_size == 0xFFFFFFFF ||
        m.local_header_offset == 0xFFFFFFFF) {
      fail(key, "zip64 members (over 4 GiB) are not supported");
    }
    if ((flags & 1u) != 0) fail(key, "encrypted zip members are not supported");
    if (m.method != kMethodStored && m.method != kMethodDeflated) {
      fail(key, "zip compression method " + std::to_string(m.method) +
                    " is not supported (only stored and deflated)");
    }
    // A stored member's bytes are its data: its two sizes are one (the reader reads the
    // uncompressed size; the extent check below measures the compressed one).
    if (m.method == kMethodStored && m.compressed_size != m.uncompressed_size) {
      fail(key, "stored (uncompressed) member with compressed size " +
                    std::to_string(m.compressed_size) + " but uncompressed size " +
                    std::to_string(m.uncompressed_size) + " (corrupt or forged archive)");
    }
    members_.push_back(std::move(m));
    pos += kCentralHeaderBytes + name_length + extra_length + comment_length;
  }
  check_members(cd_offset);
}

void NpzReader::check_members(std::uint64_t cd_offset) const {
  // numpy's np.load reads an array by name from Python's zipfile, which keeps the last of two
  // members of one name, and reads "key" before "key.npy"; a reader that took the first would
  // see other data in the same file. Neither is a file numpy writes: refused.
  std::map<std::string, std::size_t> first_of_key;
  for (std::size_t j = 0; j < members_.size(); ++j) {
    const auto [at, added] = first_of_key.emplace(key_of(members_[j].name), j);
    if (added) continue;
    const std::size_t i = at->second;
    throw FormatError(path_ + ": members " + std::to_string(i) + " ('" + members_[i].name +
                      "') and " + std::to_string(j) + " ('" + members_[j].name +
                      "') both hold array '" + at->first +
                      "'; numpy would read only one of them: an archive with two arrays of one "
                      "name is refused");
  }
  // The name in each member's local header must be the central directory's, as Python's zipfile
  // (and so numpy) requires. Each member's bytes, local header to the end of its data, are its
  // own: they end before the next member's header and before the central directory.
  struct Extent {
    std::uint64_t begin, end;
    std::size_t member;
  };
  std::vector<Extent> extents;
  for (std::size_t i = 0; i < members_.size(); ++i) {
    const Member& m = members_[i];
    std::array<unsigned char, kLocalHeaderBytes> header{};
    if (m.local_header_offset + kLocalHeaderBytes > file_size_) {
      fail(key_of(m.name), "local header at offset " + std::to_string(m.local_header_offset) +
                               " lies past the end of the file (truncated archive)");
    }
    read_exact(m.local_header_offset, header.data(), header.size());
    if (get32(header.data()) != kLocalHeaderSignature) {
      fail(key_of(m.name),
           "no zip local header at offset " + std::to_string(m.local_header_offset));
    }
    const std::uint16_t length = get16(&header[26]);
    std::string local(length, '\0');
    if (m.local_header_offset + kLocalHeaderBytes + length > file_size_) {
      fail(key_of(m.name), "local header name runs past the end of the file (truncated archive)");
    }
    read_exact(m.local_header_offset + kLocalHeaderBytes, local.data(), local.size());
    if (local != m.name) {
      throw FormatError(path_ + ": member " + std::to_string(i) + " is named '" + m.name +
                        "' in the zip directory but '" + local +
                        "' in its own header; numpy refuses such an archive, and so does Tessera");
    }
    extents.push_back({m.local_header_offset,
                       m.local_header_offset + kLocalHeaderBytes + length + get16(&header[28]) +
                           m.compressed_size,
                       i});
  }
  std::sort(extents.begin(), extents.end(),
            [](const Extent& a, const Extent& b) { return a.begin < b.begin; });
  for (std::size_t k = 0; k < extents.size(); ++k) {
    const bool last = k + 1 == extents.size();
    const std::uint64_t limit = last ? cd_offset : extents[k + 1].begin;
    if (extents[k].end > limit) {
      fail(key_of(members_[extents[k].member].name),
           "its data runs to offset " + std::to_string(extents[k].end) + ", into " +
               (last ? "the zip central directory at offset " + std::to_string(cd_offset)
                     : "member '" + members_[extents[k + 1].member].name + "' at offset " +
                           std::to_string(limit)) +
               ": its stored size is wrong (corrupt or forged archive)");
    }
  }
}

std::vector<std::string> NpzReader::keys() const {
  std::vector<std::string> out;
  out.reserve(members_.size());
  for (const auto& m : members_)
    out.push_back(key_of(m.name));
  return out;
}

bool NpzReader::contains(const std::string& key) const noexcept {
  return std::any_of(members_.begin(), members_.end(),
                     [&](const Member& m) { return key_of(m.name) == key; });
}

const NpzReader::Member& NpzReader::member(const std::string& key) const {
  for (const auto& m : members_) {
    if (key_of(m.name) == key) return m;
  }
  std::string present;
  for (const auto& k : keys())
    present += (present.empty() ? "" : ", ") + k;
  throw FormatError(path_ + ": no array '" + key + "' (the archive holds: " + present + ")");
}

NpyInfo NpzReader::info(const std::string& key) const {
  MemberStream stream(*this, member(key), key);
  return read_npy_header(stream, *this, key);
}

NpyInfo NpzReader::readable_info(const std::string& key) const {
  const NpyInfo header = info(key);
  check_readable(header, member(key).uncompressed_size, *this, key);
  return header;
}

template <typename T>
void NpzReader::read_converted(MemberStream& stream, DType dtype, std::span<T> out,
                               const std::string& key) const {
  const std::size_t item = item_size(dtype);
  const std::size_t block_items = kIoChunk / 8;
  std::vector<unsigned char> raw(block_items * item);
  for (std::size_t begin = 0; begin < out.size(); begin += block_items) {
    const std::size_t n = std::min(block_items, out.size() - begin);
    stream.read(raw.data(), n * item);
    T* dst = out.data() + begin;
    const auto run = [&]<typename S>() {
      convert(reinterpret_cast<const S*>(raw.data()), dst, n, begin, *this, key);
    };
    switch (dtype) {
    case DType::Int8:
      run.template operator()<std::int8_t>();
      break;
    case DType::UInt8:
    case DType::Bool:
      run.template operator()<std::uint8_t>();
      break;
    case DType::Int32:
      run.template operator()<std::int32_t>();
      break;
    case DType::Int64:
      run.template operator()<std::int64_t>();
      break;
    case DType::Float32:
      run.template operator()<float>();
      break;
    case DType::Float64:
      run.template operator()<double>();
      break;
    }
  }
}

template <typename T> void NpzReader::read_into(const std::string& key, std::span<T> out) const {
  const Member& m = member(key);
  MemberStream stream(*this, m, key);
  const NpyInfo info = read_npy_header(stream, *this, key);
  check_readable(info, m.uncompressed_size, *this, key);
  if (static_cast<std::int64_t>(out.size()) != info.size()) {
    throw InvalidArgument("npz read of '" + key + "': output holds " + std::to_string(out.size()) +
                          " elements, the array " + std::to_string(info.size()));
  }
  const DType dtype = *info.dtype;
  if (is_floating(dtype) && !std::is_floating_point_v<T>) {
    fail(key, std::string("expected an integer array, found dtype ") + info.descr);
  }
  // A Fortran-order array (numpy writes np.asfortranarray data, and some published files, so) is
  // read as stored, then reordered: the caller always gets C order.
  std::vector<T> stored;
  const bool fortran = info.fortran_order && info.shape.size() > 1;
  if (fortran) stored.resize(out.size());
  const std::span<T> to = fortran ? std::span<T>(stored) : out;
  const bool same =
      dtype == dtype_of<T>() || (dtype == DType::Bool && dtype_of<T>() == DType::UInt8);
  if (same) {
    stream.read(to.data(), to.size_bytes());
  } else {
    read_converted(stream, dtype, to, key);
  }
  stream.finish();
  if (fortran) fortran_to_c_order<T>(stored, info.shape, out);
}

template <typename T> NpyArray<T> NpzReader::read(const std::string& key) const {
  const NpyInfo header = readable_info(key);
  NpyArray<T> array;
  array.shape = header.shape;
  array.data.resize(static_cast<std::size_t>(header.size()));
  read_into<T>(key, std::span<T>(array.data));
  return array;
}

template NpyArray<std::int64_t> NpzReader::read(const std::string&) const;
template NpyArray<std::int32_t> NpzReader::read(const std::string&) const;
template NpyArray<std::uint8_t> NpzReader::read(const std::string&) const;
template NpyArray<float> NpzReader::read(const std::string&) const;
template NpyArray<double> NpzReader::read(const std::string&) const;
template void NpzReader::read_into(const std::string&, std::span<std::int64_t>) const;
template void NpzReader::read_into(const std::string&, std::span<std::int32_t>) const;
template void NpzReader::read_into(const std::string&, std::span<std::uint8_t>) const;
template void NpzReader::read_into(const std::string&, std::span<float>) const;
template void NpzReader::read_into(const std::string&, std::span<double>) const;

// ---- writer ------------------------------------------------------------------------------------

std::string npy_header(DType dtype, const std::vector<std::int64_t>& shape) {
  // npy 1.0: the header dict is padded with spaces so the data starts at a multiple of 64.
  std::string dict = std::string("{'descr': '") + descr_of(dtype) +
                     "', 'fortran_order': False, 'shape': " + shape_text(shape) + ", }";
  const std::size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict.push_back('\n');
  std::string header(kNpyMagic);
  header.push_back(1);
  header.push_back(0);
  put16(header, static_cast<std::uint16_t>(dict.size()));
  return header + dict;
}

void check_npy_shape(const std::string& key, const std::vector<std::int64_t>& shape,
                     std::int64_t count) {
  const std::optional<std::int64_t> holds = checked_product(shape);
  if (holds != count) {
    throw InvalidArgument("npy array '" + key + "': shape " + shape_text(shape) + " holds " +
                          (holds ? std::to_string(*holds) : std::string("too many")) +
                          " elements, got " + std::to_string(count));
  }
}

NpzWriter::NpzWriter(std::string path) : path_(std::move(path)), file_(path_) {}

NpzWriter::~NpzWriter() = default;

void NpzWriter::fail_write(const std::string& what) const {
  throw IoError("cannot write '" + path_ + "': " + what);
}

void NpzWriter::write_raw(const void* data, std::size_t bytes) {
  file_.write(data, bytes);
}

void NpzWriter::write_data(const void* data, std::size_t bytes) {
  Entry& entry = entries_.back();
  entry.crc = io::crc32_update(entry.crc, data, bytes);
  write_raw(data, bytes);
}

void NpzWriter::begin_member(const std::string& key, DType dtype,
                             const std::vector<std::int64_t>& shape, std::int64_t count) {
  check_npy_shape(key, shape, count);
  const std::string header = npy_header(dtype, shape);

  const std::string name = key + ".npy";
  const std::uint64_t size = header.size() + static_cast<std::uint64_t>(count) * item_size(dtype);
  const std::uint64_t offset = file_.size();
  if (size >= 0xFFFFFFFFu || offset >= 0xFFFFFFFFu) {
    fail_write("array '" + key + "' (" + std::to_string(size) + " bytes at offset " +
               std::to_string(offset) +
               ") would need a zip64 archive, which this writer does not produce (limit 4 GiB)");
  }
  entries_.push_back({name, 0, size, offset});

  std::string local;
  put32(local, kLocalHeaderSignature);
  put16(local, 20); // version needed: 2.0
  put16(local, 0);  // flags
  put16(local, kMethodStored);
  put16(local, 0); // time
  put16(local, kDosDate1980);
  put32(local, 0); // CRC-32, patched by end_member()
  put32(local, static_cast<std::uint32_t>(size));
  put32(local, static_cast<std::uint32_t>(size));
  put16(local, static_cast<std::uint16_t>(name.size()));
  put16(local, 0); // extra length
  local += name;
  write_raw(local.data(), local.size());
  write_data(header.data(), header.size());
}

void NpzWriter::end_member() {
  const Entry& entry = entries_.back();
  std::string crc;
  put32(crc, entry.crc);
  file_.write_at(entry.offset + 14, crc.data(), crc.size()); // the local header's CRC field
}

void NpzWriter::commit() {
  const std::uint64_t cd_offset = file_.size();
  std::string cd;
  for (const auto& entry : entries_) {
    put32(cd, kCentralHeaderSignature);
    put16(cd, (3 << 8) | 20); // made by: Unix, zip 2.0
    put16(cd, 20);            // version needed
    put16(cd, 0);             // flags
    put16(cd, kMethodStored);
    put16(cd, 0);
    put16(cd, kDosDate1980);
    put32(cd, entry.crc);
    put32(cd, static_cast<std::uint32_t>(entry.size));
    put32(cd, static_cast<std::uint32_t>(entry.size));
    put16(cd, static_cast<std::uint16_t>(entry.name.size()));
    put16(cd, 0);              // extra
    put16(cd, 0);              // comment
    put16(cd, 0);              // disk
    put16(cd, 0);              // internal attributes
    put32(cd, 0100644u << 16); // external attributes: a regular file, rw-r--r--
    put32(cd, static_cast<std::uint32_t>(entry.offset));
    cd += entry.name;
  }
  if (cd_offset + cd.size() >= 0xFFFFFFFFu || entries_.size() >= 0xFFFF) {
    fail_write("the archive would need zip64, which this writer does not produce (limit 4 GiB)");
  }
  const auto cd_size = static_cast<std::uint32_t>(cd.size());
  put32(cd, kEndSignature);
  put16(cd, 0);
  put16(cd, 0);
  put16(cd, static_cast<std::uint16_t>(entries_.size()));
  put16(cd, static_cast<std::uint16_t>(entries_.size()));
  put32(cd, cd_size);
  put32(cd, static_cast<std::uint32_t>(cd_offset));
  put16(cd, 0); // comment length
  write_raw(cd.data(), cd.size());
  file_.commit();
}

} // namespace tessera::datasets::detail
