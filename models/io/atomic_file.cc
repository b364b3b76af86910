#include "models/io/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>

#include "models/io/internal/fs_util.h"

namespace tapeflow::io {
namespace {

namespace fs = std::filesystem;

// Closes a POSIX file descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { if (fd_ >= 0) ::close(fd_); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now and reports failure (close can report deferred write errors).
  bool close() { int fd = fd_; fd_ = -1; return ::close(fd) == 0; }

 private:
  int fd_;
};

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error(path + ": " + what + ": " + internal::errno_text());
}

void fsync_path(const std::string& target, const std::string& open_path, int flags) {
  Fd fd(::open(open_path.c_str(), flags | O_CLOEXEC));
  if (fd.get() < 0) fail(target, "cannot open '" + open_path + "' to fsync");
  if (::fsync(fd.get()) != 0) fail(target, "fsync of '" + open_path + "' failed");
}

std::string parent_dir(const std::string& path) {
  fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

}  // namespace

namespace internal {

std::string errno_text() { return std::strerror(errno); }

void publish_temp_file(const std::string& tmp, const std::string& path) {
  fsync_path(path, tmp, O_RDONLY);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(path, "cannot rename '" + tmp + "' into place");
  fsync_path(path, parent_dir(path), O_RDONLY | O_DIRECTORY);
}

}  // namespace internal

std::string make_temp_path(const std::string& path) {
  // random_device reads the kernel's entropy source, so forked children get distinct names too.
  std::random_device rd;
  std::uint64_t r = (std::uint64_t{rd()} << 32) ^ rd();
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, ".tmp-%ld-%016llx", static_cast<long>(::getpid()),
                static_cast<unsigned long long>(r));
  return path + suffix;
}

void atomic_write_file(const std::string& path, const std::string& contents) {
  const std::string tmp = make_temp_path(path);
  try {
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
    if (fd.get() < 0) fail(path, "cannot create temporary file '" + tmp + "'");
    const char* p = contents.data();
    std::size_t left = contents.size();
    while (left > 0) {
      ssize_t n = ::write(fd.get(), p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail(path, "write to '" + tmp + "' failed");
      p += n;
      left -= static_cast<std::size_t>(n);
    }
    if (!fd.close()) fail(path, "close of '" + tmp + "' failed");
    internal::publish_temp_file(tmp, path);  // fsync, rename, fsync the directory
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
}

int remove_stale_temp_files(const std::string& path) {
  const fs::path target(path);
  const std::string prefix = target.filename().string() + ".tmp-";
  std::error_code ec;
  fs::directory_iterator it(parent_dir(path), ec);
  if (ec) throw std::runtime_error(path + ": cannot list directory '" + parent_dir(path) + "': " + ec.message());
  int removed = 0;
  for (const fs::directory_entry& entry : it) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    // "<pid>-<hex>" follows the prefix; anything else is not ours.
    const std::string rest = name.substr(prefix.size());
    const std::size_t dash = rest.find('-');
    if (dash == 0 || dash == std::string::npos) continue;
    long pid = 0;
    bool digits = true;
    for (std::size_t i = 0; i < dash; ++i) {
      if (rest[i] < '0' || rest[i] > '9' || pid > 100000000) { digits = false; break; }
      pid = pid * 10 + (rest[i] - '0');
    }
    if (!digits || pid <= 0) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
    if (fs::remove(entry.path(), ec)) ++removed;
  }
  return removed;
}

}  // namespace tapeflow::io
