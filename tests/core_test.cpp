#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "foxhunt/core/container.h"
#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "test_util.h"

namespace foxhunt {
namespace {

using foxhunt::testing::TempDir;

TEST(ErrorTest, CheckThrowsInputErrorWithComponentPrefix) {
  try {
    FOXHUNT_CHECK(1 == 2, "tft", "expected rank ", 3, ", got ", 2);
    FAIL() << "no throw";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "[tft] expected rank 3, got 2");
    EXPECT_EQ(e.component(), "tft");
    EXPECT_EQ(e.message(), "expected rank 3, got 2");
  }
}

TEST(ErrorTest, ExitCodesByKind) {
  // Bad input or usage -> 2; a failed run-time check, OOM or any other failure -> 1.
  EXPECT_EQ(exit_code_for(InputError("x", "bad flag")), kExitUsage);
  EXPECT_EQ(exit_code_for(CheckFailure("x", "diverged")), kExitCheckFailed);
  EXPECT_EQ(exit_code_for(OutOfMemoryError("x", "cap", 1, 2, 3)), kExitCheckFailed);
  EXPECT_EQ(exit_code_for(Error("x", "io")), kExitCheckFailed);
  EXPECT_EQ(exit_code_for(std::runtime_error("other")), kExitCheckFailed);
  EXPECT_EQ(kExitUsage, 2);
  EXPECT_EQ(kExitCheckFailed, 1);
  try {
    FOXHUNT_ENSURE(1 + 1 == 3, "demo", "expected ", 3, ", got ", 2);
    FAIL() << "FOXHUNT_ENSURE did not throw";
  } catch (const InputError&) {
    FAIL() << "FOXHUNT_ENSURE must not throw an InputError";
  } catch (const CheckFailure& e) {
    EXPECT_STREQ(e.what(), "[demo] expected 3, got 2");
  }
}

TEST(ErrorTest, OutOfMemoryErrorCarriesNumbers) {
  OutOfMemoryError e("memory", "cap exceeded", 100, 50, 120);
  EXPECT_EQ(e.requested(), 100u);
  EXPECT_EQ(e.live(), 50u);
  EXPECT_EQ(e.limit(), 120u);
  EXPECT_NE(std::string(e.what()).find("[memory]"), std::string::npos);
}

TEST(ErrorTest, InternalAssertNamesTheBug) {
  try {
    FOXHUNT_INTERNAL_ASSERT(false, "x=", 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("foxhunt bug"), std::string::npos);
  }
}

TEST(FileIoTest, ScopedDirectoryRemovesOnlyWhatItCreated) {
  namespace fs = std::filesystem;
  std::string temp_path;
  {
    ScopedDirectory a("", "foxhunt-core-test");
    ScopedDirectory b("", "foxhunt-core-test");
    EXPECT_TRUE(a.temporary());
    EXPECT_NE(a.path(), b.path());
    write_file_atomic((fs::path(a.path()) / "x").string(), "data");
    fs::create_directories(fs::path(a.path()) / "d1" / "d2");
    write_file_atomic((fs::path(a.path()) / "d1" / "d2" / "y").string(), "data");
    // A link to b: removed as a link, b's contents untouched.
    write_file_atomic((fs::path(b.path()) / "z").string(), "data");
    fs::create_directory_symlink(b.path(), fs::path(a.path()) / "d1" / "to_b");
    temp_path = a.path();
    EXPECT_TRUE(fs::exists(temp_path));
  }
  EXPECT_FALSE(fs::exists(temp_path));  // removed with its contents
  {
    // The link's target survives its link: only what a created is removed (checked before b
    // goes, so b is removed second, by its own scope).
    ScopedDirectory t("", "foxhunt-core-test");
    fs::create_directory(fs::path(t.path()) / "keep");
    write_file_atomic((fs::path(t.path()) / "keep" / "k").string(), "data");
    {
      ScopedDirectory u("", "foxhunt-core-test");
      fs::create_directory_symlink(fs::path(t.path()) / "keep", fs::path(u.path()) / "link");
    }
    EXPECT_TRUE(fs::exists(fs::path(t.path()) / "keep" / "k"));
  }
  foxhunt::testing::TempDir keep;
  const auto given = keep.file("kept/sub");
  {
    ScopedDirectory c(given, "unused");
    EXPECT_FALSE(c.temporary());
    EXPECT_EQ(c.path(), given);
    EXPECT_TRUE(fs::is_directory(given));  // created
  }
  EXPECT_TRUE(fs::is_directory(given));  // a given directory is kept
}

TEST(FileIoTest, AtomicWriteReplacesContents) {
  TempDir dir;
  const auto path = dir.file("a.bin");
  write_file_atomic(path, "first");
  EXPECT_EQ(read_file(path), "first");
  write_file_atomic(path, std::string("sec\0ond", 7));
  EXPECT_EQ(read_file(path), std::string("sec\0ond", 7));
  // No temp files left behind.
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST(FileIoTest, CrashBeforeRenameKeepsPreviousFile) {
  TempDir dir;
  const auto path = dir.file("a.bin");
  write_file_atomic(path, "good");
  testing_hooks::fail_before_rename = true;
  EXPECT_THROW(write_file_atomic(path, "half-written"), Error);
  testing_hooks::fail_before_rename = false;
  EXPECT_EQ(read_file(path), "good");
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

// kill -9 between writing a temp file and renaming it leaves PATH.tmp.PID.N: the next write of
// PATH removes those of dead processes, and only those (a live writer's temp is its own business).
TEST(FileIoTest, AWriteRemovesTheTempFilesOfDeadProcesses) {
  TempDir dir;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);  // reaped: the pid runs nothing now
  const std::string dead = std::to_string(child), self = std::to_string(::getpid());
  const std::vector<std::string> stale = {"a.bin.tmp." + dead + ".0", "a.bin.tmp." + dead + ".12"};
  const std::vector<std::string> kept = {
      "a.bin.tmp." + self + ".99",  // this process: perhaps another thread's write in flight
      "a.bin.tmp.1.0",              // init runs: a live (or foreign) process
      "b.bin.tmp." + dead + ".0",   // another file's: its own next write cleans it
      "a.bin.tmp." + dead,          // not write_file_atomic's name
      "a.bin.tmp.x.0"};
  for (const auto& n : stale) std::ofstream(dir.file(n)) << "half";
  for (const auto& n : kept) std::ofstream(dir.file(n)) << "other";
  write_file_atomic(dir.file("a.bin"), "whole");
  EXPECT_EQ(read_file(dir.file("a.bin")), "whole");
  for (const auto& n : stale) EXPECT_FALSE(std::filesystem::exists(dir.file(n))) << n;
  for (const auto& n : kept) EXPECT_TRUE(std::filesystem::exists(dir.file(n))) << n;
}

TEST(FileIoTest, WriteIntoMissingDirectoryFails) {
  // A path that cannot hold a file is bad input, named as given (not the temporary file).
  try {
    write_file_atomic("/nonexistent-dir-foxhunt/x.bin", "x");
    ADD_FAILURE() << "wrote into a missing directory";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "[io] cannot write '/nonexistent-dir-foxhunt/x.bin': No such file or directory (its "
              "directory does not exist)");
  }
  EXPECT_THROW(read_file("/nonexistent-dir-foxhunt/x.bin"), InputError);
  // A directory in the way is bad input too, and stays as it was (no temporary file left).
  TempDir dir;
  const auto sub = dir.file("sub");
  std::filesystem::create_directories(sub);
  EXPECT_THROW(write_file_atomic(sub, "x"), InputError);
  EXPECT_TRUE(std::filesystem::is_directory(sub));
  int entries = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) entries += e.exists() ? 1 : 0;
  EXPECT_EQ(entries, 1);
  // Commands answer it with exit 2, naming the path the user gave.
  const auto r =
      foxhunt::testing::run_cli("data generate --bars 50 --out /nonexistent-dir-foxhunt/b.csv");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("cannot write '/nonexistent-dir-foxhunt/b.csv'"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find(".tmp."), std::string::npos) << r.err;
}

TEST(FileIoTest, Crc32KnownAnswer) {
  // Standard check value of CRC-32/ISO-HDLC.
  EXPECT_EQ(crc32("123456789", 9), 0xCBF43926u);
}

TEST(ContainerTest, RoundTrip) {
  Container c;
  c.header = {{"kind", "test"}, {"n", 3}};
  c.blobs["a"] = std::string("\0\1\2", 3);
  c.blobs["b"] = "hello";
  auto d = decode_container(encode_container(c), "mem");
  EXPECT_EQ(d.header, c.header);
  EXPECT_EQ(d.blobs, c.blobs);
}

TEST(ContainerTest, EveryTruncationIsRejected) {
  Container c;
  c.header = {{"kind", "test"}};
  c.blobs["a"] = std::string(100, 'x');
  const auto bytes = encode_container(c);
  for (size_t n = 0; n < bytes.size(); n += 7)
    EXPECT_THROW(decode_container(bytes.substr(0, n), "mem"), InputError) << "length " << n;
}

TEST(ContainerTest, EveryByteFlipIsRejected) {
  Container c;
  c.header = {{"kind", "test"}};
  c.blobs["a"] = std::string(64, 'y');
  const auto bytes = encode_container(c);
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ 0x5A);
    EXPECT_THROW(decode_container(bad, "mem"), InputError) << "offset " << i;
  }
}

TEST(ContainerTest, WrongVersionIsNamed) {
  Container c;
  auto bytes = encode_container(c);
  bytes[8] = 7;  // format version field
  try {
    decode_container(bytes, "x.ckpt");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("format version 7, expected 1"), std::string::npos)
        << e.what();
  }
}

// The bytes of a container whose header is `header` as it stands (no blobs, CRC right).
std::string container_with_header(const std::string& header) {
  std::string out("FOXHUNT\x01", 8);
  const auto put = [&](uint32_t v) {
    for (int k = 0; k < 4; ++k) out += static_cast<char>((v >> (8 * k)) & 0xff);
  };
  put(kContainerFormatVersion);
  put(static_cast<uint32_t>(header.size()));
  out += header;
  put(0);
  put(crc32(out.data(), out.size()));
  return out;
}

// {"a": [[...]]}: the root object and `arrays` arrays inside it.
std::string nested_header(int arrays) {
  return "{\"a\":" + std::string(arrays, '[') + std::string(arrays, ']') + "}";
}

TEST(ContainerTest, HeadersNestedDeeperThanTheLimitAreRefusedWhileParsing) {
  // kMaxHeaderDepth levels load (the root and kMaxHeaderDepth - 1 arrays) ...
  const auto at_limit =
      decode_container(container_with_header(nested_header(kMaxHeaderDepth - 1)), "deep.fhb");
  EXPECT_TRUE(at_limit.header.at("a").is_array());
  // ... one more is refused naming the file, and so is a header that would overflow the stack
  // of whatever compared, copied or printed it (200,000 levels).
  for (const int arrays : {kMaxHeaderDepth, 200000}) {
    SCOPED_TRACE(arrays);
    foxhunt::testing::expect_input_error(
        [&] { (void)decode_container(container_with_header(nested_header(arrays)), "deep.fhb"); },
        "checkpoint", {"'deep.fhb'", "deeper than 64 levels"});
  }
  EXPECT_THROW((void)parse_header(std::string(100000, '{'), "x"), InputError);
}

}  // namespace
}  // namespace foxhunt
