#include "distribute/internal/communicator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

namespace tapeflow::distribute::internal {
namespace {

constexpr int kQueryTag = 101;   // "where are you?" (payload: the asking rank)
constexpr int kAnswerTag = 102;  // "<seq>|<collective name>"
constexpr int kAnswerBytes = 160;
// How long a timed-out rank collects answers before it aborts.
constexpr double kAnswerGraceSeconds = 1.5;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Waits politely: spin with yields for the first millisecond, then sleep briefly (ranks share cores).
void pause_after(Clock::time_point start) {
  if (seconds_since(start) < 1e-3) std::this_thread::yield();
  else std::this_thread::sleep_for(std::chrono::microseconds(50));
}

}  // namespace

void Communicator::check(int rc, const std::string& what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw std::runtime_error("distribute: " + what + ": " + std::string(text, static_cast<std::size_t>(len)));
}

Communicator::Communicator(double timeout_seconds, int rank, int size)
    : timeout_(timeout_seconds), rank_(rank), size_(size) {
  check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
  check(MPI_Comm_dup(MPI_COMM_WORLD, &side_), "MPI_Comm_dup");
  // Errors come back as codes (check() turns them into exceptions) instead of aborting inside MPI.
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(side_, MPI_ERRORS_RETURN);
  char mine[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(mine, &len);
  std::vector<char> all(static_cast<std::size_t>(size_) * MPI_MAX_PROCESSOR_NAME);
  check(MPI_Allgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm_),
        "MPI_Allgather (host names)");
  for (int r = 0; r < size_; ++r) {
    const char* p = all.data() + static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME;
    hosts_.emplace_back(p, strnlen(p, MPI_MAX_PROCESSOR_NAME));
  }
}

Communicator::~Communicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  if (side_ != MPI_COMM_NULL) MPI_Comm_free(&side_);
}

std::int64_t Communicator::begin(const std::string& name) {
  name_ = name;
  return ++seq_;
}

void Communicator::answer_queries() {
  for (;;) {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kQueryTag, side_, &flag, &status);
    if (!flag) return;
    int asker = 0;
    MPI_Recv(&asker, 1, MPI_INT, status.MPI_SOURCE, kQueryTag, side_, MPI_STATUS_IGNORE);
    char answer[kAnswerBytes] = {};
    std::snprintf(answer, sizeof answer, "%lld|%s", static_cast<long long>(seq_), name_.c_str());
    MPI_Request r;  // small: sent eagerly; the asker aborts the job soon anyway
    MPI_Isend(answer, kAnswerBytes, MPI_CHAR, status.MPI_SOURCE, kAnswerTag, side_, &r);
    MPI_Request_free(&r);
  }
}

bool Communicator::test_all(std::span<MPI_Request> requests) {
  int done = 1;
  if (!requests.empty()) check(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done,
                                           MPI_STATUSES_IGNORE), "MPI_Testall (" + name_ + ")");
  return done != 0;
}

void Communicator::wait_all(std::span<MPI_Request> requests) {
  const Clock::time_point start = Clock::now();
  for (std::uint64_t i = 0;; ++i) {
    if (test_all(requests)) return;
    // Every 16th turn: each MPI call polls the sockets (a system call), and a rank that timed out
    // waits 1.5 s for answers.
    if ((i & 15) == 0) answer_queries();
    if ((i & 63) == 0 && seconds_since(start) > timeout_) {
      time_out(requests);
      return;  // a late rank arrived after all
    }
    pause_after(start);
  }
}

void Communicator::time_out(std::span<MPI_Request> requests) {
  // Ask everyone where they are; ranks that wait in a collective answer from their wait loop.
  int me = rank_;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    MPI_Request q;
    MPI_Isend(&me, 1, MPI_INT, r, kQueryTag, side_, &q);
    MPI_Request_free(&q);
  }
  std::vector<std::string> answers(static_cast<std::size_t>(size_));
  const Clock::time_point asked = Clock::now();
  int answered = 0;
  while (answered < size_ - 1 && seconds_since(asked) < kAnswerGraceSeconds) {
    if (test_all(requests)) return;  // a late rank arrived after all: carry on
    answer_queries();
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kAnswerTag, side_, &flag, &status);
    if (flag) {
      char answer[kAnswerBytes] = {};
      MPI_Recv(answer, kAnswerBytes, MPI_CHAR, status.MPI_SOURCE, kAnswerTag, side_, MPI_STATUS_IGNORE);
      answer[kAnswerBytes - 1] = '\0';
      std::string& slot = answers[static_cast<std::size_t>(status.MPI_SOURCE)];
      if (slot.empty()) ++answered;
      slot = answer;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  const std::string mine = std::to_string(seq_) + "|" + name_;
  std::string missing;
  std::vector<int> silent;  // ranks that did not answer
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const std::string& a = answers[static_cast<std::size_t>(r)];
    if (a == mine) continue;  // waiting in the same collective
    if (!missing.empty()) missing += "; ";
    const std::string who = "rank " + std::to_string(r) + " (" + host(r) + ")";
    if (a.empty()) {
      missing += who + " did not answer (busy outside collectives, hung or dead)";
      silent.push_back(r);
    } else {
      const std::size_t bar = a.find('|');
      missing += who + " is in '" + a.substr(bar + 1) + "' (#" + a.substr(0, bar) + ")";
    }
  }
  if (missing.empty()) missing = "every rank is in this collective (MPI made no progress)";
  // Hosts none of whose ranks answered: the machine or its link is down (named once, with its ranks).
  for (std::size_t i = 0; i < silent.size(); ++i) {
    const std::string& h = host(silent[i]);
    if (h == host(rank_)) continue;
    bool first = true, all_silent = true;
    std::string ranks;
    for (int r = 0; r < size_; ++r) {
      if (host(r) != h) continue;
      first = first && r >= silent[i];
      all_silent = all_silent && std::find(silent.begin(), silent.end(), r) != silent.end();
      if (!ranks.empty()) ranks += ", ";
      ranks += std::to_string(r);
    }
    if (first && all_silent)
      missing += "; no rank on host " + h + " answered (ranks " + ranks + "): is the host or its link down?";
  }
  std::fprintf(stderr,
               "distribute: collective '%s' (#%lld) did not complete within %g s on rank %d of %d: missing: %s; "
               "aborting the job\n",
               name_.c_str(), static_cast<long long>(seq_), timeout_, rank_, size_, missing.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::abort();  // MPI_Abort does not return
}

}  // namespace tapeflow::distribute::internal
