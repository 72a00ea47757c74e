#include "foxhunt/core/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "foxhunt/core/error.h"

namespace foxhunt {

namespace testing_hooks {
bool fail_before_rename = false;
}

namespace {

std::string errno_text() {
  return std::strerror(errno);
}

std::string dir_of(const std::string& path) {
  auto pos = path.find_last_of('/');
  if (pos == std::string::npos) return ".";
  if (pos == 0) return "/";
  return path.substr(0, pos);
}

std::string base_of(const std::string& path) {
  const auto pos = path.find_last_of('/');
  return pos == std::string::npos ? path : path.substr(pos + 1);
}

// The pid of a temp file name "BASE.tmp.PID.N" of `base` (write_file_atomic's), else 0.
pid_t temp_owner(const std::string& name, const std::string& base) {
  const std::string prefix = base + ".tmp.";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return 0;
  const auto dot = name.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size() || dot + 1 == name.size()) return 0;
  const auto digits = [&](size_t from, size_t to) {
    return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(from),
                       name.begin() + static_cast<std::ptrdiff_t>(to),
                       [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!digits(prefix.size(), dot) || !digits(dot + 1, name.size()) || dot - prefix.size() > 9)
    return 0;
  return static_cast<pid_t>(std::stol(name.substr(prefix.size(), dot - prefix.size())));
}

// A process killed between writing a temp file and renaming it (kill -9, a power cut) leaves
// "PATH.tmp.PID.N" behind. The next write of PATH removes those of processes that no longer run,
// so that a rerun after a crash leaves none; a live writer's (another process writing PATH now,
// or a pid reused since) is kept. Best effort: a failure here never fails the write.
void remove_stale_temps(const std::string& path) {
  const std::string base = base_of(path);
  DIR* d = ::opendir(dir_of(path).c_str());
  if (!d) return;
  std::vector<std::string> stale;
  while (const dirent* e = ::readdir(d)) {
    const pid_t owner = temp_owner(e->d_name, base);
    if (owner <= 0 || owner == ::getpid()) continue;
    if (::kill(owner, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to probe)
    stale.push_back(e->d_name);
  }
  ::closedir(d);
  for (const auto& name : stale) ::unlink((dir_of(path) + "/" + name).c_str());
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& bytes) {
  static std::atomic<unsigned> counter{0};
  const std::string tmp =
      path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    // A path the user gave that cannot hold a file is bad input (exit 2), named as given (not
    // the temporary file); anything else (no space, I/O) is a runtime failure (exit 1).
    const int e = errno;
    const std::string reason = std::strerror(e);
    if (e == ENOENT || e == ENOTDIR || e == EACCES || e == EROFS || e == EISDIR ||
        e == ENAMETOOLONG || e == EPERM)
      throw InputError("io", "cannot write '" + path + "': " + reason +
                                 (e == ENOENT ? " (its directory does not exist)" : ""));
    FOXHUNT_FAIL("io", "cannot write '", path, "': ", reason);
  }
  auto fail = [&](const std::string& what) {
    const std::string reason = errno_text();
    ::close(fd);
    ::unlink(tmp.c_str());
    FOXHUNT_FAIL("io", what, " '", path, "': ", reason);
  };
  std::size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write failed for");
    }
    off += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) fail("fsync failed for");
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    FOXHUNT_FAIL("io", "close failed for '", path, "': ", errno_text());
  }
  if (testing_hooks::fail_before_rename) {
    ::unlink(tmp.c_str());
    FOXHUNT_FAIL("io", "simulated crash before rename of '", path, "'");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    if (e == EISDIR || e == ENOTDIR)  // the target is a directory: a bad --out
      throw InputError("io", "cannot write '" + path + "': " + std::strerror(e));
    FOXHUNT_FAIL("io", "rename to '", path, "' failed: ", std::strerror(e));
  }
  remove_stale_temps(path);
  // Make the rename itself durable.
  int dfd = ::open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("io", "cannot open '" + path + "' for reading: " + errno_text());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw InputError("io", "read error on '" + path + "'");
  return ss.str();
}

void check_output_dir(const std::string& dir, const std::string& what) {
  namespace fs = std::filesystem;
  FOXHUNT_CHECK(!dir.empty(), "io", what, ": expected a directory, got an empty path");
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  if (fs::exists(p, ec)) {
    FOXHUNT_CHECK(fs::is_directory(p, ec), "io", what, " ", dir,
                  ": expected a directory for the output files, got an existing file");
    FOXHUNT_CHECK(::access(p.c_str(), W_OK) == 0, "io", what, " ", dir,
                  ": expected a writable directory, got one this process cannot write to");
    return;
  }
  fs::path parent = p.parent_path();
  while (!parent.empty() && !fs::exists(parent, ec) && parent != parent.parent_path())
    parent = parent.parent_path();
  FOXHUNT_CHECK(fs::is_directory(parent, ec), "io", what, " ", dir, ": cannot be created: '",
                parent.string(), "' is not a directory");
  FOXHUNT_CHECK(::access(parent.c_str(), W_OK) == 0, "io", what, " ", dir, ": cannot be created: '",
                parent.string(), "' is not writable");
}

unsigned int crc32(const void* data, std::size_t size, unsigned int seed) {
  static const std::array<unsigned int, 256> table = [] {
    std::array<unsigned int, 256> t{};
    for (unsigned int i = 0; i < 256; ++i) {
      unsigned int c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  unsigned int c = ~seed;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) c = table[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
  return ~c;
}

ScopedDirectory::ScopedDirectory(const std::string& dir, const std::string& prefix)
    : temporary_(dir.empty()) {
  namespace fs = std::filesystem;
  static std::atomic<int> counter{0};
  path_ = temporary_ ? (fs::temp_directory_path() / (prefix + "-" + std::to_string(::getpid()) +
                                                     "-" + std::to_string(counter++)))
                           .string()
                     : dir;
  fs::create_directories(path_);
}

namespace {

int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  ::remove(path);  // files and links, then (FTW_DEPTH) their emptied directories
  return 0;
}

}  // namespace

ScopedDirectory::~ScopedDirectory() {
  // POSIX nftw (children first, links not followed) rather than std::filesystem::remove_all: on
  // an H200 machine (Ubuntu 24.04, GCC 13) remove_all(path, error_code&) called a null function
  // pointer here, at the end of `foxhunt stress --device cuda`, every run. A destructor must not
  // throw; a leftover temp dir is harmless.
  if (temporary_) ::nftw(path_.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

}  // namespace foxhunt
