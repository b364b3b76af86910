// File-system helpers shared by the atomic writers (not public API).
#pragma once

#include <string>

namespace tapeflow::io::internal {

// Durably publishes a complete temporary file: fsync(tmp), rename(tmp, path), fsync(dir of path).
// Errors: std::runtime_error naming `path` and the failing call; `tmp` is left for the caller.
void publish_temp_file(const std::string& tmp, const std::string& path);

// "<errno text>" for the current errno.
std::string errno_text();

}  // namespace tapeflow::io::internal
