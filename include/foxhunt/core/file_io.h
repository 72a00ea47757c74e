#pragma once
/// \file file_io.h
/// Atomic file writes (temp file + fsync + rename) and whole-file reads.

#include <string>

#include "foxhunt/core/no_copy.h"

namespace foxhunt {

/// Writes `bytes` to `path` atomically: a temp file in the same directory (PATH.tmp.PID.N) is
/// written, flushed, fsync'ed and renamed over `path`. On any failure the temp file is removed and
/// `path` keeps its previous contents; a process killed before the rename leaves its temp file,
/// never a partial `path`, and the next write of `path` removes the temp files of processes that
/// no longer run. A path that cannot hold a file (missing directory, no permission, read-only
/// file system, a directory in the way) throws InputError("[io] cannot write 'PATH': ...") naming
/// `path` as given (exit 2 in the CLI); other failures (no space, I/O errors) throw
/// foxhunt::Error (exit 1).
void write_file_atomic(const std::string& path, const std::string& bytes);

/// Reads a whole file. Throws foxhunt::InputError("[io] ...") when it cannot be opened.
std::string read_file(const std::string& path);

/// Checks, before any work, that a directory can receive output files: `dir` is a writable
/// directory, or does not exist yet and its nearest existing ancestor is a writable directory
/// (it is created when the files are written). Throws InputError "[io] WHAT DIR: ..." naming
/// what was expected (a file in the way, a read-only parent, a missing drive).
void check_output_dir(const std::string& dir, const std::string& what);

/// CRC-32 (IEEE 802.3, reflected) of a byte range; used to detect corrupted files.
unsigned int crc32(const void* data, std::size_t size, unsigned int seed = 0);

/// A working directory for the length of a scope: `dir` itself when given (created, and kept
/// afterwards), else a fresh TMPDIR/<prefix>-<pid>-<n> that is removed with everything in it
/// when the object is destroyed, whatever happened in between.
class ScopedDirectory {
 public:
  ScopedDirectory(const std::string& dir, const std::string& prefix);
  ~ScopedDirectory();
  FOXHUNT_NO_COPY(ScopedDirectory);
  /// The directory.
  const std::string& path() const { return path_; }
  /// True when it is removed at the end of the scope.
  bool temporary() const { return temporary_; }

 private:
  std::string path_;
  bool temporary_;
};

namespace testing_hooks {
/// Test-only: when set, write_file_atomic throws after writing the temp file and before the rename,
/// emulating a crash at the worst moment. Reset to false by the caller.
extern bool fail_before_rename;
}  // namespace testing_hooks

}  // namespace foxhunt
