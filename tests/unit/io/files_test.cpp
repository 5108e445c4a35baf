// io safe writes: only regular files are replaced, devices are written in place, links are never
// followed, failures leave the target as it was; output folders are claimed by one writer only;
// JSON with bad UTF-8 never throws.
#include "tessera/core/error.hpp"
#include "tessera/io/array_file.hpp"
#include "tessera/io/files.hpp"

#include <filesystem>
#include <fstream>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

/// A fresh folder for one test, removed afterwards.
class Files : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessera-files-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  static std::string read(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  /// The names in `folder`, sorted.
  static std::vector<std::string> names_in(const std::string& folder) {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(folder))
      names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  /// A character device node like /dev/null (1, 3) or /dev/full (1, 7) in the test folder, so
  /// that a regression replaces a copy rather than the system's device. False without CAP_MKNOD.
  bool make_device(const std::string& name, unsigned minor) const {
    return ::mknod(path(name).c_str(), S_IFCHR | 0666, ::makedev(1, minor)) == 0;
  }

  fs::path dir_;
};

// ---- safe writes -------------------------------------------------------------------------------

TEST_F(Files, NullDeviceIsWrittenInPlaceAndStaysADevice) {
  if (!make_device("null", 3)) GTEST_SKIP() << "cannot create a device node here (no CAP_MKNOD)";

  io::write_text_file(path("null"), "{\"report\": 1}\n");

  EXPECT_TRUE(fs::is_character_file(fs::symlink_status(path("null"))));
  EXPECT_EQ(names_in(dir_.string()), std::vector<std::string>{"null"});
}

TEST_F(Files, FullDeviceFailsNamingTheFileAndStaysADevice) {
  if (!make_device("full", 7)) GTEST_SKIP() << "cannot create a device node here (no CAP_MKNOD)";

  EXPECT_THAT([&] { io::write_text_file(path("full"), "x"); },
              ThrowsMessage<IoError>(AllOf(HasSubstr(path("full")), HasSubstr("No space left"))));
  EXPECT_TRUE(fs::is_character_file(fs::symlink_status(path("full"))));
  EXPECT_EQ(names_in(dir_.string()), std::vector<std::string>{"full"});
}

TEST_F(Files, SymlinkTargetIsRefusedAndItsVictimUntouched) {
  std::ofstream(path("victim")) << "precious";
  fs::create_symlink(path("victim"), path("report.json"));

  EXPECT_THAT(
      [&] { io::write_text_file(path("report.json"), "x"); },
      ThrowsMessage<IoError>(AllOf(HasSubstr(path("report.json")), HasSubstr("a symbolic link"))));
  EXPECT_EQ(read(path("victim")), "precious");
  EXPECT_TRUE(fs::is_symlink(path("report.json")));
}

TEST_F(Files, FolderFifoAndSocketTargetsAreRefusedNamingWhatTheyAre) {
  fs::create_directory(path("folder"));
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0666), 0);
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof address.sun_path, "%s", path("sock").c_str());
  ASSERT_EQ(::bind(sock, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);

  EXPECT_THAT([&] { io::write_text_file(path("folder"), "x"); },
              ThrowsMessage<IoError>(AllOf(HasSubstr(path("folder")), HasSubstr("a folder"))));
  EXPECT_THAT([&] { io::write_text_file(path("fifo"), "x"); },
              ThrowsMessage<IoError>(AllOf(HasSubstr(path("fifo")), HasSubstr("FIFO"))));
  EXPECT_THAT([&] { io::write_text_file(path("sock"), "x"); },
              ThrowsMessage<IoError>(AllOf(HasSubstr(path("sock")), HasSubstr("a socket"))));
  ::close(sock);
  EXPECT_TRUE(fs::is_directory(fs::symlink_status(path("folder"))));
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(path("fifo"))));
  EXPECT_TRUE(fs::is_socket(fs::symlink_status(path("sock"))));
  EXPECT_EQ(names_in(dir_.string()), (std::vector<std::string>{"fifo", "folder", "sock"}));
}

TEST_F(Files, PlantedTemporaryLinkIsNeitherFollowedNorRemoved) {
  std::ofstream(path("victim")) << "precious";
  fs::create_symlink(path("victim"), path("report.json.tmp"));
  fs::create_symlink(path("victim"), path("x.bin.tmp"));

  io::write_text_file(path("report.json"), "new\n");
  io::write_array<float>(path("x.bin"), std::vector<float>{1.0f, 2.0f}, 2);

  EXPECT_EQ(read(path("victim")), "precious");
  EXPECT_TRUE(fs::is_symlink(path("report.json.tmp")));
  EXPECT_TRUE(fs::is_symlink(path("x.bin.tmp")));
  EXPECT_EQ(read(path("report.json")), "new\n");
}

TEST_F(Files, ReplacedFileKeepsItsPermissionsAndLeavesNoTemporary) {
  std::ofstream(path("a.json")) << "old";
  fs::permissions(path("a.json"), fs::perms::owner_read | fs::perms::owner_write);

  io::write_text_file(path("a.json"), "new");

  EXPECT_EQ(read(path("a.json")), "new");
  EXPECT_EQ(fs::status(path("a.json")).permissions(),
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(names_in(dir_.string()), std::vector<std::string>{"a.json"});
}

TEST_F(Files, UncommittedFileLeavesTheTargetAndNoTemporary) {
  std::ofstream(path("a.bin")) << "old";

  {
    io::AtomicFile file(path("a.bin"));
    file.write("new bytes", 9);
  }

  EXPECT_EQ(read(path("a.bin")), "old");
  EXPECT_EQ(names_in(dir_.string()), std::vector<std::string>{"a.bin"});
}

TEST_F(Files, TargetThatBecomesAFolderBeforeCommitIsNotReplaced) {
  io::AtomicFile file(path("a.bin"));
  file.write("x", 1);
  fs::create_directory(path("a.bin"));

  EXPECT_THAT([&] { file.commit(); },
              ThrowsMessage<IoError>(AllOf(HasSubstr(path("a.bin")), HasSubstr("a folder"))));
  EXPECT_TRUE(fs::is_directory(path("a.bin")));
  EXPECT_EQ(names_in(dir_.string()), std::vector<std::string>{"a.bin"});
}

TEST_F(Files, ConcurrentWritersOfOneFileUseDistinctTemporaries) {
  io::AtomicFile first(path("a.txt"));
  io::AtomicFile second(path("a.txt"));
  first.write("first", 5);
  second.write("second", 6);

  first.commit();
  second.commit();

  EXPECT_EQ(read(path("a.txt")), "second");
  EXPECT_EQ(names_in(dir_.string()), std::vector<std::string>{"a.txt"});
}

TEST_F(Files, WriteAtPatchesEarlierBytesAcrossTheBuffer) {
  const std::string big(3u << 20, 'b');
  io::AtomicFile file(path("a.bin"));
  file.write("hhhh", 4);
  file.write(big.data(), big.size());
  file.write("tt", 2);

  file.write_at(0, "HEAD", 4);
  file.write_at(4 + big.size(), "TT", 2);
  EXPECT_THROW(file.write_at(file.size() - 1, "xx", 2), InvalidArgument);
  file.commit();

  EXPECT_EQ(read(path("a.bin")), "HEAD" + big + "TT");
}

// ---- preflight of an output file ---------------------------------------------------------------

TEST_F(Files, OutputFileInAMissingFolderIsRefusedBeforeAnyWork) {
  EXPECT_THAT([&] { io::check_output_file(path("no/such/run.json")); },
              ThrowsMessage<IoError>(
                  AllOf(HasSubstr(path("no/such/run.json")), HasSubstr("does not exist"))));
}

TEST_F(Files, OutputFileThatIsALinkOrFolderIsRefused) {
  fs::create_directory(path("folder"));
  fs::create_symlink(path("elsewhere"), path("link.json"));

  EXPECT_THAT([&] { io::check_output_file(path("folder")); },
              ThrowsMessage<IoError>(AllOf(HasSubstr(path("folder")), HasSubstr("a folder"))));
  EXPECT_THAT(
      [&] { io::check_output_file(path("link.json")); },
      ThrowsMessage<IoError>(AllOf(HasSubstr(path("link.json")), HasSubstr("a symbolic link"))));
  EXPECT_THAT([&] { io::check_output_file(path("folder/")); },
              ThrowsMessage<IoError>(HasSubstr("names a folder")));
}

TEST_F(Files, WritableOutputFilePassesAndNothingStays) {
  std::ofstream(path("old.json")) << "old";

  io::check_output_file(path("new.json"));
  io::check_output_file(path("old.json"));

  EXPECT_EQ(names_in(dir_.string()), std::vector<std::string>{"old.json"});
  EXPECT_EQ(read(path("old.json")), "old");
}

// ---- JSON --------------------------------------------------------------------------------------

TEST_F(Files, JsonWithInvalidUtf8NeverThrowsAndMarksTheBadBytes) {
  const std::string bad_path = "/data/caf\xe9/x.npz";
  const nlohmann::json plain = {{"source", bad_path}};
  const nlohmann::ordered_json ordered = {{"source", bad_path}, {"n", 1}};

  const std::string text = io::json_text(plain);
  const std::string ordered_text = io::json_text(ordered);

  EXPECT_EQ(text, "{\n  \"source\": \"/data/caf\xef\xbf\xbd/x.npz\"\n}\n");
  EXPECT_THAT(ordered_text, HasSubstr("caf\xef\xbf\xbd/x.npz"));
  EXPECT_EQ(nlohmann::json::parse(ordered_text).at("n"), 1);
}

// ---- output folders ----------------------------------------------------------------------------

TEST_F(Files, NewOutputFolderIsCreatedAndMarkedWithItsKind) {
  const std::string out = path("a/b/store");

  {
    io::OutputFolder folder(out, "partition store", false);
    EXPECT_EQ(folder.path(), out);
  }

  EXPECT_TRUE(fs::is_directory(out));
  EXPECT_THAT(read(out + "/.tessera-output"), HasSubstr("partition store"));
}

TEST_F(Files, SecondConcurrentWriterOfAFolderFails) {
  const std::string out = path("store");
  io::OutputFolder first(out, "partition store", true);

  EXPECT_THAT([&] { io::OutputFolder second(out, "partition store", true); },
              ThrowsMessage<IoError>(HasSubstr("another process is writing '" + out + "'")));
  EXPECT_THAT([&] { io::check_output_folder(out, "partition store", true); },
              ThrowsMessage<IoError>(HasSubstr("another process is writing '" + out + "'")));
}

TEST_F(Files, WriterInAnotherProcessIsDetectedAndItsCrashLeavesNoLock) {
  const std::string out = path("store");
  int ready[2];
  int go[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(go), 0);

  const pid_t child = ::fork();
  if (child == 0) {
    // Claims the folder, says so, waits, then dies without running any destructor.
    io::OutputFolder folder(out, "partition store", false);
    char byte = 1;
    (void)!::write(ready[1], &byte, 1);
    (void)!::read(go[0], &byte, 1);
    ::_exit(0);
  }
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  EXPECT_THAT([&] { io::OutputFolder second(out, "partition store", true); },
              ThrowsMessage<IoError>(HasSubstr("another process is writing")));
  ASSERT_EQ(::write(go[1], &byte, 1), 1);
  int status = 0;
  ::waitpid(child, &status, 0);

  EXPECT_NO_THROW(io::OutputFolder(out, "partition store", true));
  for (const int fd : {ready[0], ready[1], go[0], go[1]})
    ::close(fd);
}

TEST_F(Files, ExistingOutputIsReplacedOnlyWhenAsked) {
  const std::string out = path("store");
  { io::OutputFolder first(out, "partition store", false); }
  std::ofstream(out + "/manifest.json") << "{}";

  EXPECT_THAT([&] { io::OutputFolder again(out, "partition store", false); },
              ThrowsMessage<OutputExists>(
                  AllOf(HasSubstr(out), HasSubstr("replacing it was not asked for"))));
  EXPECT_THAT([&] { io::check_output_folder(out, "partition store", false); },
              ThrowsMessage<OutputExists>(
                  AllOf(HasSubstr(out), HasSubstr("replacing it was not asked for"))));
  EXPECT_NO_THROW(io::check_output_folder(out, "partition store", true));
  EXPECT_NO_THROW(io::OutputFolder(out, "partition store", true));
}

TEST_F(Files, InterruptedOutputCountsAsOurs) {
  const std::string out = path("store");
  { io::OutputFolder first(out, "native dataset", false); }
  std::ofstream(out + "/features.bin.partial") << "half";

  EXPECT_THAT([&] { io::OutputFolder again(out, "native dataset", false); },
              ThrowsMessage<OutputExists>(HasSubstr("replacing it was not asked for")));
  EXPECT_NO_THROW(io::OutputFolder(out, "native dataset", true));
}

TEST_F(Files, OutputOfAnotherKindIsRefusedEvenWithReplace) {
  const std::string out = path("data");
  { io::OutputFolder first(out, "native dataset", false); }

  EXPECT_THAT([&] { io::OutputFolder store(out, "partition store", true); },
              ThrowsMessage<IoError>(AllOf(HasSubstr(out), HasSubstr("native dataset"))));
  EXPECT_THAT([&] { io::check_output_folder(out, "partition store", true); },
              ThrowsMessage<IoError>(AllOf(HasSubstr(out), HasSubstr("native dataset"))));
}

TEST_F(Files, NonEmptyForeignFolderIsRefusedAndLeftAsItWas) {
  const std::string out = path("datasets");
  fs::create_directory(out);
  std::ofstream(out + "/cora.npz") << "not ours";

  EXPECT_THAT([&] { io::check_output_folder(out, "partition store", true); },
              ThrowsMessage<IoError>(
                  AllOf(HasSubstr(out), HasSubstr("cora.npz"), HasSubstr("not a Tessera output"))));
  EXPECT_THAT([&] { io::OutputFolder folder(out, "partition store", true); },
              ThrowsMessage<IoError>(AllOf(HasSubstr(out), HasSubstr("not a Tessera output"))));
  EXPECT_EQ(names_in(out), std::vector<std::string>{"cora.npz"});
}

TEST_F(Files, RootFolderIsRefused) {
  for (const std::string root : {"/", "//", "/tmp/..", "/./"}) {
    EXPECT_THAT([&] { io::check_output_folder(root, "partition store", true); },
                ThrowsMessage<IoError>(AllOf(HasSubstr("'" + root + "'"), HasSubstr("root"))));
    EXPECT_THAT([&] { io::OutputFolder folder(root, "partition store", true); },
                ThrowsMessage<IoError>(AllOf(HasSubstr("'" + root + "'"), HasSubstr("root"))));
  }
}

TEST_F(Files, LinkInPlaceOfTheFolderIsRefusedNotFollowed) {
  fs::create_directory(path("real"));
  fs::create_symlink(path("real"), path("out"));

  for (const std::string& out : {path("out"), path("out") + "/"}) {
    EXPECT_THAT([&] { io::OutputFolder folder(out, "partition store", true); },
                ThrowsMessage<IoError>(AllOf(HasSubstr(out), HasSubstr("symbolic link"))));
    EXPECT_THAT([&] { io::check_output_folder(out, "partition store", true); },
                ThrowsMessage<IoError>(AllOf(HasSubstr(out), HasSubstr("symbolic link"))));
  }
  EXPECT_TRUE(names_in(path("real")).empty());
}

TEST_F(Files, LinkInPlaceOfTheMarkerIsRefusedNotFollowed) {
  const std::string out = path("store");
  fs::create_directory(out);
  std::ofstream(path("victim")) << "precious";
  fs::create_symlink(path("victim"), out + "/.tessera-output");

  EXPECT_THAT([&] { io::OutputFolder folder(out, "partition store", true); },
              ThrowsMessage<IoError>(
                  AllOf(HasSubstr(out + "/.tessera-output"), HasSubstr("symbolic link"))));
  EXPECT_THAT([&] { io::check_output_folder(out, "partition store", true); },
              ThrowsMessage<IoError>(HasSubstr("symbolic link")));
  EXPECT_EQ(read(path("victim")), "precious");
}

TEST_F(Files, FileInPlaceOfTheFolderIsRefused) {
  std::ofstream(path("out")) << "x";

  EXPECT_THAT([&] { io::OutputFolder folder(path("out"), "partition store", true); },
              ThrowsMessage<IoError>(AllOf(HasSubstr(path("out")), HasSubstr("not a folder"))));
  EXPECT_THAT(
      [&] { io::check_output_folder(path("out/store"), "partition store", true); },
      ThrowsMessage<IoError>(AllOf(HasSubstr(path("out/store")), HasSubstr("not a folder"))));
}

TEST_F(Files, PreflightOfAMissingFolderCreatesNothing) {
  const std::string out = path("a/b/store");

  io::check_output_folder(out, "partition store", false);

  EXPECT_FALSE(fs::exists(path("a")));
}

// ---- checksums ---------------------------------------------------------------------------------

TEST(Crc32, EmptyUpdateKeepsTheRunningValue) {
  const char bytes[] = "123456789";
  const std::uint32_t crc = io::crc32_update(0, bytes, 9);

  EXPECT_EQ(crc, 0xcbf43926u);
  EXPECT_EQ(io::crc32_update(crc, nullptr, 0), crc);
  EXPECT_EQ(io::crc32_update(crc, bytes, 0), crc);
  EXPECT_EQ(io::crc32_update(io::crc32_update(0, bytes, 4), bytes + 4, 5), crc);
}

} // namespace
} // namespace tessera
