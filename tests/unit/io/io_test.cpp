// io: files are written whole or not at all; array files round-trip and refuse what is not
// theirs, naming the file; text input reads plain and gzip'd lines and points at file:line.
#include "tessera/core/error.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/io/array_file.hpp"
#include "tessera/io/files.hpp"
#include "tessera/io/text_input.hpp"

#include <filesystem>
#include <fstream>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <limits>
#include <unistd.h>
#include <zlib.h>

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

/// A fresh folder for one test, removed afterwards.
class Io : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessera-io-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST_F(Io, TextFileReplacesTheOldOneAndLeavesNoTemporary) {
  std::ofstream(path("a.json")) << "old";

  io::write_text_file(path("a.json"), "new\n");

  std::ifstream in(path("a.json"));
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "new");
  EXPECT_FALSE(fs::exists(path("a.json.tmp")));
}

TEST_F(Io, WriteIntoAMissingFolderNamesTheFile) {
  EXPECT_THAT([&] { io::write_text_file(path("no/such/a.json"), "x"); },
              ::testing::ThrowsMessage<IoError>(HasSubstr("no/such/a.json")));
}

TEST_F(Io, ArraysRoundTripWithShapeAndChecksum) {
  const std::vector<float> values{1.0f, -2.5f, 3.0f, 4.0f, 5.0f, 6.0f};
  const std::vector<std::int64_t> ids{7, 1, 9};

  const std::uint32_t crc = io::write_array<float>(path("x.bin"), values, 2, 3);
  io::write_array<std::int64_t>(path("ids.bin"), ids, 3);
  const auto x = io::read_array<float>(path("x.bin"), true, 2, 3);
  const auto back = io::read_array<std::int64_t>(path("ids.bin"), false, 3);

  EXPECT_EQ(x.rows, 2);
  EXPECT_EQ(x.cols, 3);
  EXPECT_EQ(x.crc, crc);
  EXPECT_EQ(x.data, values);
  EXPECT_EQ(back.cols, -1);
  EXPECT_EQ(back.data, ids);
}

TEST_F(Io, ArrayOfAnotherTypeOrShapeIsRefusedNamingTheFile) {
  io::write_array<float>(path("x.bin"), std::vector<float>(6, 1.0f), 2, 3);

  EXPECT_THAT([&] { io::read_array<std::int32_t>(path("x.bin"), true); },
              ::testing::ThrowsMessage<FormatError>(HasSubstr("x.bin")));
  EXPECT_THAT([&] { io::read_array<float>(path("x.bin"), true, 3, 2); },
              ::testing::ThrowsMessage<FormatError>(HasSubstr("x.bin")));
}

TEST_F(Io, TruncatedOrCorruptArrayIsRefused) {
  io::write_array<float>(path("x.bin"), std::vector<float>(100, 1.0f), 100);
  fs::copy_file(path("x.bin"), path("short.bin"));
  fs::resize_file(path("short.bin"), fs::file_size(path("x.bin")) - 4);
  {
    std::fstream f(path("x.bin"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(io::kArrayHeaderBytes) + 8);
    f.put('\x7f');
  }

  EXPECT_THROW(io::read_array<float>(path("short.bin"), false), FormatError);
  EXPECT_THAT([&] { io::read_array<float>(path("x.bin"), false); },
              ::testing::ThrowsMessage<FormatError>(HasSubstr("x.bin")));
  EXPECT_THROW(io::read_array<float>(path("missing.bin"), false), IoError);
}

// Found by tests/fuzz (array_file): a consistent header of [20, 83886080] floats and 400 bytes of
// payload made read_array allocate 6.7 GB before it found the payload missing.
TEST_F(Io, HeaderClaimingMoreThanTheFileHoldsIsRefusedBeforeAllocating) {
  io::write_array<float>(path("x.bin"), std::vector<float>(100, 1.0f), 20, 5);
  {
    std::fstream f(path("x.bin"), std::ios::in | std::ios::out | std::ios::binary);
    const std::int64_t cols = std::int64_t{5} << 24;
    const std::uint64_t payload = 20 * static_cast<std::uint64_t>(cols) * sizeof(float);
    f.seekp(24);
    f.write(reinterpret_cast<const char*>(&cols), sizeof cols);
    f.write(reinterpret_cast<const char*>(&payload), sizeof payload);
  }

  EXPECT_THAT([&] { io::read_array<float>(path("x.bin"), true); },
              ::testing::ThrowsMessage<FormatError>(::testing::AllOf(
                  HasSubstr("x.bin"), HasSubstr("the file holds 400 payload bytes, the header says "
                                                "6710886400"))));
}

TEST_F(Io, RowReadsEqualTheSameRowsOfAWholeRead) {
  std::vector<float> values(7 * 3);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<float>(i) - 4.5f;
  io::write_array<float>(path("x.bin"), values, 7, 3);
  const io::ArrayReader<float> reader(path("x.bin"), true, 7, 3);

  for (const auto& [first, last] : {std::pair{0, 0}, {0, 2}, {3, 3}, {4, 7}, {0, 7}, {7, 7}}) {
    const std::vector<float> rows = reader.read_rows(first, last);

    EXPECT_EQ(rows, std::vector<float>(values.begin() + first * 3, values.begin() + last * 3))
        << "rows [" << first << ", " << last << ")";
  }
  EXPECT_EQ(reader.rows(), 7);
  EXPECT_EQ(reader.cols(), 3);
}

TEST_F(Io, RowRangeOutsideTheRowsIsRefusedNamingFileRangeAndRowCount) {
  io::write_array<std::int64_t>(path("ids.bin"), std::vector<std::int64_t>(10, 1), 10);
  const io::ArrayReader<std::int64_t> reader(path("ids.bin"), false);

  EXPECT_THAT([&] { reader.read_rows(8, 11); },
              ::testing::ThrowsMessage<InvalidArgument>(::testing::AllOf(
                  HasSubstr("ids.bin"), HasSubstr("rows [8, 11)"), HasSubstr("rows [0, 10)"))));
  EXPECT_THAT([&] { reader.read_rows(-1, 2); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("rows [-1, 2)")));
  EXPECT_THAT([&] { reader.read_rows(5, 4); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("are not a range")));
}

TEST_F(Io, RowReaderChecksTheHeaderAsReadArrayDoes) {
  io::write_array<float>(path("x.bin"), std::vector<float>(6, 1.0f), 2, 3);
  fs::copy_file(path("x.bin"), path("short.bin"));
  fs::resize_file(path("short.bin"), fs::file_size(path("x.bin")) - 4);

  EXPECT_THAT([&] { io::ArrayReader<std::int32_t>(path("x.bin"), true); },
              ::testing::ThrowsMessage<FormatError>(HasSubstr("x.bin': dtype float32")));
  EXPECT_THAT([&] { io::ArrayReader<float>(path("x.bin"), true, 3); },
              ::testing::ThrowsMessage<FormatError>(HasSubstr("shape [2, 3], expected [3, *]")));
  EXPECT_THAT([&] { io::ArrayReader<float>(path("short.bin"), true); },
              ::testing::ThrowsMessage<FormatError>(HasSubstr("short.bin': truncated")));
  EXPECT_THAT([&] { io::ArrayReader<float>(dir_.string(), true); },
              ::testing::ThrowsMessage<IoError>(HasSubstr("it is a folder, not a regular file")));
  EXPECT_THROW(io::ArrayReader<float>(path("missing.bin"), true), IoError);
}

// The CRC covers the whole payload: a read of some rows cannot check it, a read of all rows does.
TEST_F(Io, OnlyAReadOfEveryRowChecksTheCrc) {
  io::write_array<float>(path("x.bin"), std::vector<float>(100, 1.0f), 100);
  {
    std::fstream f(path("x.bin"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(io::kArrayHeaderBytes + 90 * sizeof(float)));
    f.put('\x7f');
  }
  const io::ArrayReader<float> reader(path("x.bin"), false);

  EXPECT_EQ(reader.read_rows(0, 50), std::vector<float>(50, 1.0f));
  EXPECT_THAT([&] { reader.read_rows(0, 100); },
              ::testing::ThrowsMessage<FormatError>(HasSubstr("CRC-32 mismatch")));
}

TEST_F(Io, FileCutShortAfterOpeningFailsTheReadNamingTheFile) {
  io::write_array<float>(path("x.bin"), std::vector<float>(100, 1.0f), 100);
  const io::ArrayReader<float> reader(path("x.bin"), false);
  fs::resize_file(path("x.bin"), io::kArrayHeaderBytes + 60 * sizeof(float));

  EXPECT_EQ(reader.read_rows(10, 60).size(), 50u);
  EXPECT_THAT([&] { reader.read_rows(50, 70); },
              ::testing::ThrowsMessage<FormatError>(
                  ::testing::AllOf(HasSubstr("x.bin"), HasSubstr("truncated: 40 of the 80"))));
}

TEST_F(Io, LinesOfPlainAndGzipTextReadTheSame) {
  std::ofstream(path("plain.txt")) << "1 2\n\n3 4\r\n";
  gzFile gz = gzopen(path("packed.txt.gz").c_str(), "wb");
  gzputs(gz, "1 2\n\n3 4\r\n");
  gzclose(gz);

  for (const char* name : {"plain.txt", "packed.txt.gz"}) {
    io::LineReader in(path(name));
    std::vector<std::string> lines;
    for (std::string_view line; in.next(line);)
      lines.emplace_back(line);
    EXPECT_EQ(lines, (std::vector<std::string>{"1 2", "", "3 4"})) << name;
  }
}

TEST_F(Io, ContentLinesSkipBlankLinesAndCommentsOfTheGivenMarks) {
  std::ofstream(path("graph.txt")) << "% a comment\n\n  \t\n# another\n1 2\n%\n3 4\n";
  io::LineReader in(path("graph.txt"));
  std::vector<std::string> lines;

  for (std::string_view line; io::next_content_line(in, line, "#%");)
    lines.emplace_back(line);

  EXPECT_EQ(lines, (std::vector<std::string>{"1 2", "3 4"}));
  io::LineReader percent_only(path("graph.txt"));
  std::string_view first;
  ASSERT_TRUE(io::next_content_line(percent_only, first, "%"));
  EXPECT_EQ(first, "# another"); // '#' is content where only '%' marks comments
  EXPECT_EQ(percent_only.line_number(), 4);
}

TEST_F(Io, ReadingTextReportsTheFileBytesAsStored) {
  gzFile gz = gzopen(path("edges.txt.gz").c_str(), "wb");
  for (int i = 0; i < 200000; ++i)
    gzprintf(gz, "%d %d\n", i, i * 7919 % 200000);
  gzclose(gz);
  const auto stored = static_cast<std::int64_t>(fs::file_size(path("edges.txt.gz")));
  // The event's strings belong to the stage: kept as copies, not views.
  std::vector<ProgressEvent> events;
  std::vector<std::string> stages, units;
  const ProgressScope scope([&](const ProgressEvent& e) {
    events.push_back(e);
    stages.emplace_back(e.stage);
    units.emplace_back(e.unit);
  });

  {
    io::LineReader in(path("edges.txt.gz"));
    for (std::string_view line; in.next(line);) {
    }
  }

  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(stages.front(), "reading edges.txt.gz");
  EXPECT_EQ(events.front().total, stored);
  EXPECT_EQ(events.back().kind, ProgressEvent::Kind::End);
  EXPECT_EQ(events.back().done, stored);
  EXPECT_EQ(units.back(), "bytes");
}

TEST_F(Io, ParseErrorsPointAtFileAndLine) {
  std::ofstream(path("edges.txt")) << "1 2\n3 x\n";
  io::LineReader in(path("edges.txt"));
  std::string_view line;
  std::vector<std::string_view> fields;
  in.next(line);
  in.next(line);
  io::split_whitespace(line, fields);

  EXPECT_THAT([&] { io::parse_int(in, fields[1], "a node id"); },
              ::testing::ThrowsMessage<FormatError>(
                  HasSubstr("edges.txt:2: expected a node id, found 'x'")));
}

TEST_F(Io, IntegerBeyond64BitsIsRefusedSayingSo) {
  std::ofstream(path("edges.txt")) << "1 99999999999999999999999\n";
  io::LineReader in(path("edges.txt"));
  std::string_view line;
  in.next(line);

  EXPECT_THAT([&] { io::parse_int(in, line.substr(2), "a node id"); },
              ::testing::ThrowsMessage<FormatError>(HasSubstr(
                  "edges.txt:1: expected a node id, found '99999999999999999999999', which is "
                  "beyond the 64-bit integer range")));
  EXPECT_EQ(io::parse_int(in, "-9223372036854775808", "a node id"),
            std::numeric_limits<std::int64_t>::min());
}

} // namespace
} // namespace tessera
