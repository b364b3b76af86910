// Communicator: a private MPI communicator whose every wait has a deadline, with the "where are
// you?" protocol that names missing ranks when a collective times out (not public API).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tapeflow::distribute::internal {

class Communicator {
 public:
  // Duplicates MPI_COMM_WORLD twice (collectives; the diagnostic side channel) and gathers every
  // rank's host name (MPI_Get_processor_name). Collective.
  Communicator(double timeout_seconds, int rank, int size);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  MPI_Comm comm() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  void set_timeout(double seconds) { timeout_ = seconds; }
  // Rank r's host name (0 <= r < size()).
  const std::string& host(int r) const { return hosts_[static_cast<std::size_t>(r)]; }

  // Names the next collective (what this rank reports while it waits); returns its sequence number.
  std::int64_t begin(const std::string& name);
  // Waits until every request completes, answering other ranks' questions meanwhile. After the
  // timeout: asks every rank where it is, prints who is missing and calls MPI_Abort.
  void wait_all(std::span<MPI_Request> requests);
  void wait(MPI_Request& request) { wait_all(std::span<MPI_Request>(&request, 1)); }
  // Progresses requests without blocking; true when all are complete (null requests count as done).
  bool test_all(std::span<MPI_Request> requests);

  // Throws std::runtime_error "distribute: <what>: <MPI error string>" unless rc == MPI_SUCCESS.
  static void check(int rc, const std::string& what);

 private:
  void answer_queries();
  // After the timeout: asks, reports and aborts; returns only if the requests completed meanwhile.
  void time_out(std::span<MPI_Request> requests);

  double timeout_;
  int rank_, size_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm side_ = MPI_COMM_NULL;
  std::int64_t seq_ = 0;
  std::string name_;
  std::vector<std::string> hosts_;
};

}  // namespace tapeflow::distribute::internal
