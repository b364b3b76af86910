// The transport's own floor (issue 33): what moving W1's gradients costs between two ranks with
// plain blocking MPI and no tapeflow code, to set against bench_distribute_w1's comm-only figure.
//   mpirun -np 2 bench_transport_floor [--bytes B] [--reps R]
//   scripts/test_hosts.sh mpirun --host tfh1:1,tfh2:1 -np 2 build/bench/distribute/bench_transport_floor
// Per size (default: W1's gradients, 1,081,384 bytes as float32 and 540,692 as half) and per pattern,
// the median of R timed repetitions (after 5 untimed ones), each started by an MPI_Barrier that is
// not timed:
//   exchange      MPI_Sendrecv of the whole buffer with the partner (a one-round allreduce's traffic)
//   halves        MPI_Alltoall of halves, then MPI_Allgather of halves (the traffic of tapeflow's
//                 reduce-scatter + allgather, without its sums)
//   nbc halves    the same through MPI_Ialltoall / MPI_Iallgather completed by MPI_Test in a spin
//                 (tapeflow's calls), and with sched_yield between tests
//   allreduce     MPI_Allreduce (MPI_SUM, MPI_FLOAT) of the float32 size, Open MPI's own choice
// "GB/s" counts the bytes each rank sends. Only 2 ranks (the partner is the other one).
#include <CLI/CLI.hpp>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename F>
double time_ms(int reps, F&& f) {
  for (int i = 0; i < 5; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    f();
    t.push_back(1e3 * (MPI_Wtime() - t0));
  }
  // Every rank reports the slower of the two ranks' medians (a collective ends when both are done).
  double m = median(t), worst = 0;
  MPI_Allreduce(&m, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<std::int64_t> sizes{1081384, 540692};
  int reps = 200;
  CLI::App app{"Plain MPI transfers of W1's gradient sizes between 2 ranks (the transport's floor)"};
  app.add_option("--bytes", sizes, "buffer sizes in bytes (multiples of 4)")
      ->check(CLI::Range(std::int64_t{4}, std::int64_t{1} << 30));
  app.add_option("--reps", reps, "timed repetitions")->check(CLI::Range(1, 1000000));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    MPI_Finalize();
    return rc;
  }
  if (size != 2) {
    if (rank == 0) std::fprintf(stderr, "bench_transport_floor: needs exactly 2 ranks, got %d\n", size);
    MPI_Finalize();
    return 2;
  }
  for (std::int64_t b : sizes)
    if (b % 4 != 0) {
      if (rank == 0) std::fprintf(stderr, "bench_transport_floor: --bytes %lld is not a multiple of 4\n", static_cast<long long>(b));
      MPI_Finalize();
      return 2;
    }
  char host[MPI_MAX_PROCESSOR_NAME] = {}, other[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  MPI_Sendrecv(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 1 - rank, 0, other, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
               1 - rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (rank == 0) std::printf("transport floor: rank 0 on %s, rank 1 on %s, %d reps\n", host, other, reps);
  for (std::int64_t b : sizes) {
    const auto n = static_cast<std::size_t>(b);
    std::vector<unsigned char> send(n, 1), recv(n, 0);
    const int whole = static_cast<int>(b), half = static_cast<int>(b / 2);
    const double exchange = time_ms(reps, [&] {
      MPI_Sendrecv(send.data(), whole, MPI_BYTE, 1 - rank, 1, recv.data(), whole, MPI_BYTE, 1 - rank, 1,
                   MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    });
    const double halves = time_ms(reps, [&] {
      MPI_Alltoall(send.data(), half, MPI_BYTE, recv.data(), half, MPI_BYTE, MPI_COMM_WORLD);
      MPI_Allgather(MPI_IN_PLACE, 0, MPI_BYTE, recv.data(), half, MPI_BYTE, MPI_COMM_WORLD);
    });
    // The same traffic through the non-blocking collectives tapeflow uses, completed by MPI_Test
    // in a spin (with sched_yield between tests when `yield`).
    auto nbc_halves = [&](bool yield) {
      return time_ms(reps, [&] {
        MPI_Request r;
        int done = 0;
        MPI_Ialltoall(send.data(), half, MPI_BYTE, recv.data(), half, MPI_BYTE, MPI_COMM_WORLD, &r);
        for (done = 0; !done;) {
          MPI_Test(&r, &done, MPI_STATUS_IGNORE);
          if (yield && !done) std::this_thread::yield();
        }
        MPI_Iallgather(MPI_IN_PLACE, 0, MPI_BYTE, recv.data(), half, MPI_BYTE, MPI_COMM_WORLD, &r);
        for (done = 0; !done;) {
          MPI_Test(&r, &done, MPI_STATUS_IGNORE);
          if (yield && !done) std::this_thread::yield();
        }
      });
    };
    const double nbc = nbc_halves(false), nbc_yield = nbc_halves(true);
    std::vector<float> fs(n / 4, 1.0f), fr(n / 4, 0.0f);
    const double allreduce = time_ms(reps, [&] {
      MPI_Allreduce(fs.data(), fr.data(), static_cast<int>(n / 4), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    });
    if (rank == 0)
      std::printf("  %9lld bytes: exchange %.3f ms (%.2f GB/s)  halves %.3f ms  nbc halves %.3f ms (yielding %.3f)  allreduce(float) %.3f ms\n",
                  static_cast<long long>(b), exchange, 1e-6 * static_cast<double>(b) / exchange, halves, nbc, nbc_yield,
                  allreduce);
  }
  MPI_Finalize();
  return 0;
}
