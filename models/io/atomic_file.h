// Crash-safe replacement of small files (a checkpoint index, a config) and temp-file housekeeping.
#pragma once

#include <string>

namespace tapeflow::io {

// Replaces `path` with `contents` so that after a crash `path` holds either the old or the new
// contents in full: writes "<path>.tmp-<pid>-<random hex>" in the same directory, fsyncs it,
// renames it over `path`, then fsyncs the directory.
// Errors:   std::runtime_error naming the file and the failing system call (errno text); the
//           temporary file is removed on failure.
void atomic_write_file(const std::string& path, const std::string& contents);

// Returns a fresh temporary name for `path`: "<path>.tmp-<pid>-<16 random hex digits>".
std::string make_temp_path(const std::string& path);

// Deletes "<path>.tmp-<pid>-*" files whose writer process <pid> no longer exists (left behind by
// a killed save); files of live processes are kept. Returns the number of files removed.
// Errors:   none thrown for files that vanish meanwhile; std::runtime_error if the directory
//           cannot be listed.
int remove_stale_temp_files(const std::string& path);

}  // namespace tapeflow::io
