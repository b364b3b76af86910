// Collectives of distribute::Context under mpirun (any number of ranks): allreduce, broadcast,
// broadcast_variables, gradient averaging with fusion buffers, the variable check, sharding.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>

#include "data/dataset.h"
#include "distribute/distribute.h"
#include "optimizers/sgd.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/reduction_ops.h"
#include "tests/distribute/mpi_test_util.h"

namespace tapeflow::distribute::testing {
namespace {

using ::testing::HasSubstr;

TEST(ContextTest, RankSizeAndLocalRank) {
  Context& c = context();
  const char* env = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (env) {
    EXPECT_EQ(c.size(), std::atoi(env));
  }
  EXPECT_GE(c.rank(), 0);
  EXPECT_LT(c.rank(), c.size());
  EXPECT_GE(c.local_rank(), 0);
  EXPECT_LT(c.local_rank(), c.local_size());
  EXPECT_TRUE(launched_by_mpirun());
  // One Context per process.
  EXPECT_THROW(Context second, std::logic_error);
}

// The machines of the job (one, or --hosts H test hosts of scripts/test_hosts.sh) and the
// MPI_COMM_TYPE_SHARED groups: local_size() is the number of ranks on this rank's host, the same on
// every host here.
TEST(ContextTest, HostsAndSharedMemoryGroups) {
  Context& c = context();
  std::vector<std::string> hosts;
  int here = 0;
  for (int r = 0; r < c.size(); ++r) {
    if (std::find(hosts.begin(), hosts.end(), c.host(r)) == hosts.end()) hosts.push_back(c.host(r));
    here += c.host(r) == c.host(c.rank()) ? 1 : 0;
  }
  EXPECT_EQ(static_cast<int>(hosts.size()), expected_hosts()) << "distinct host names";
  EXPECT_EQ(c.local_size(), here) << "MPI_COMM_TYPE_SHARED group of host " << c.host(c.rank());
  EXPECT_EQ(c.local_size() * expected_hosts(), c.size());
  EXPECT_TRUE(same_on_every_rank(static_cast<std::uint32_t>(c.local_size())));
  if (c.rank() == 0) {
    std::string layout;
    for (const std::string& h : hosts) {
      if (!layout.empty()) layout += ", ";
      layout += h;
      layout += " (ranks";
      for (int r = 0; r < c.size(); ++r)
        if (c.host(r) == h) layout += ' ' + std::to_string(r);
      layout += ")";
    }
    std::printf("hosts: %s; shared-memory group size %d per host\n", layout.c_str(), c.local_size());
  }
  EXPECT_THROW(c.host(c.size()), std::invalid_argument);
  EXPECT_THROW(c.host(-1), std::invalid_argument);
}

// Bad options are refused before MPI is touched (so even with a Context alive).
TEST(ContextTest, BadOptionsNameTheOption) {
  auto message = [](ContextOptions o) {
    try {
      Context bad(o);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no invalid_argument");
  };
  EXPECT_THAT(message({.timeout_seconds = 0}), HasSubstr("timeout_seconds must be > 0, got 0"));
  EXPECT_THAT(message({.fusion_threshold_bytes = 0}), HasSubstr("fusion_threshold_bytes must be >= 1, got 0"));
  EXPECT_THAT(message({.shared_memory_group = -2}), HasSubstr("shared_memory_group must be >= 0, got -2"));
}

TEST(ContextTest, AllreduceAverageSumMinMax) {
  Context& c = context();
  const int n = c.size();
  const double r = c.rank() + 1;  // 1..n
  const Tensor x = constant(std::vector<float>{static_cast<float>(r), static_cast<float>(2 * r)}, Shape{2});
  EXPECT_THAT(c.allreduce(x).to_vector<float>(),
              ::testing::ElementsAre(static_cast<float>(n + 1) / 2, static_cast<float>(n + 1)));
  EXPECT_FLOAT_EQ(c.allreduce(x, ReduceOp::kSum).to_vector<float>()[0], static_cast<float>(n * (n + 1) / 2));
  EXPECT_FLOAT_EQ(c.allreduce(x, ReduceOp::kMin).to_vector<float>()[0], 1.0f);
  EXPECT_FLOAT_EQ(c.allreduce(x, ReduceOp::kMax).to_vector<float>()[1], static_cast<float>(2 * n));
  const Tensor i = constant(std::vector<std::int64_t>{c.rank()}, Shape{1});
  EXPECT_EQ(c.allreduce(i, ReduceOp::kSum).to_vector<std::int64_t>()[0], std::int64_t{n} * (n - 1) / 2);
  EXPECT_EQ(x.to_vector<float>()[0], static_cast<float>(r));  // the input is not changed
  // Errors are thrown before any communication, on every rank alike.
  try {
    c.allreduce(i);
    FAIL() << "averaging integers must throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot average a int64 tensor"));
  }
  std::vector<double> v{r, -r};
  c.all_reduce(v, ReduceOp::kAverage, "test");
  EXPECT_DOUBLE_EQ(v[0], (n + 1) / 2.0);
  EXPECT_DOUBLE_EQ(v[1], -(n + 1) / 2.0);
}

// Averages of user tensors are divided in Eigen packets as the gradients are: lengths that are not
// a multiple of a packet (the tail), float32 and float64, exact (rank r sends (r + 1)·i, the average
// is i·(n + 1)/2), the same bits on every rank.
TEST(ContextTest, AllreduceAveragesLongTensorsExactly) {
  Context& c = context();
  const int n = c.size();
  for (std::int64_t len : {1, 7, 1003}) {
    std::vector<double> v(static_cast<std::size_t>(len));
    for (std::int64_t i = 0; i < len; ++i) v[static_cast<std::size_t>(i)] = static_cast<double>((c.rank() + 1) * i);
    for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
      const Tensor got = cast(c.allreduce(cast(constant(v, Shape{len}), dtype)), DType::kFloat64);
      const auto g = got.to_vector<double>();
      for (std::int64_t i = 0; i < len; ++i)
        ASSERT_EQ(g[static_cast<std::size_t>(i)], static_cast<double>(i) * (n + 1) / 2.0)
            << dtype_name(dtype) << " length " << len << " element " << i;
      EXPECT_TRUE(same_on_every_rank(hash_bytes({got})));
    }
  }
}

// allreduce() of floating tensors by average or sum takes the gradients' path: the shared-memory
// window where the ranks form groups (one host, or 2 ranks on each of 2 hosts: then the slices
// cross hosts by the network sum), the reducer's network sum otherwise; min, max and integers
// stay on plain MPI_Iallreduce. Both settings of the window give the same exact values.
TEST(ContextTest, AllreduceOfFloatsTakesTheGradientsPath) {
  Context& c = context();
  if (c.size() == 1) GTEST_SKIP() << "one rank: nothing to reduce";
  const int n = c.size();
  const bool had = c.options().shared_memory;
  for (bool shared : {true, false}) {
    SCOPED_TRACE(shared ? "shared memory" : "network sum");
    c.set_shared_memory(shared);
    c.reset_timings();
    for (std::int64_t len : {5, 1003, 5}) {  // a new shape, a larger one (the window grows), back
      std::vector<float> v(static_cast<std::size_t>(len));
      for (std::int64_t i = 0; i < len; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>((c.rank() + 1) * i);
      const auto avg = c.allreduce(constant(v, Shape{len})).to_vector<float>();
      const auto sum = c.allreduce(constant(v, Shape{len}), ReduceOp::kSum).to_vector<float>();
      for (std::int64_t i = 0; i < len; ++i) {
        ASSERT_EQ(avg[static_cast<std::size_t>(i)], static_cast<float>(i * (n + 1)) / 2) << len << " " << i;
        ASSERT_EQ(sum[static_cast<std::size_t>(i)], static_cast<float>(i * n * (n + 1) / 2)) << len << " " << i;
      }
    }
    c.allreduce(constant(std::vector<float>{1.0f}, Shape{1}), ReduceOp::kMax);
    EXPECT_EQ(c.timings().tensor_allreduces, 6);
    EXPECT_EQ(c.timings().tensor_allreduces_shared, c.uses_shared_memory() ? 6 : 0)
        << "groups of one size > 1 reduce user tensors in the window";
  }
  c.set_shared_memory(had);
  c.reset_timings();
}

TEST(ContextTest, BroadcastAndBroadcastVariables) {
  Context& c = context();
  const int root = c.size() - 1;
  const Tensor t = constant(std::vector<double>{static_cast<double>(c.rank())}, Shape{1});
  EXPECT_EQ(c.broadcast(t, root).item(), root);
  Variable a(constant(std::vector<float>{static_cast<float>(c.rank()), 1.0f}, Shape{2}));
  Variable b(constant(std::vector<std::int64_t>{c.rank() * 10}, Shape{1}));
  c.broadcast_variables({a, b}, root);
  EXPECT_THAT(a.value().to_vector<float>(), ::testing::ElementsAre(static_cast<float>(root), 1.0f));
  EXPECT_EQ(b.value().to_vector<std::int64_t>()[0], root * 10);
  EXPECT_THROW(c.broadcast_variables({a}, c.size()), std::invalid_argument);
  try {
    c.broadcast(t, -1);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("root must be in [0, " + std::to_string(c.size()) + "), got -1"));
  }
}

// Gradients: rank r sees d loss / d w = (r + 1) * ones; `odd` has a gradient on odd ranks only;
// `unused` has none anywhere. Small fusion buffers force several buffers.
// Both transports: the shared-memory window (where the ranks form groups) and MPI_Iallreduce.
TEST(GradientTest, AveragedZerosForAbsentAndIdenticalEverywhere) {
  Context& c = context();
  const int n = c.size();
  for (int config = 0; config < 4; ++config) {
    const bool shared = config < 2;
    const std::int64_t threshold = config % 2 == 0 ? std::int64_t{1} << 20 : std::int64_t{16};
    SCOPED_TRACE(shared ? "shared memory" : "network sum");
    c.set_shared_memory(shared);
    c.set_fusion(threshold, true);
    Variable w(zeros(Shape{3, 2}), {.name = "w"});
    Variable odd(zeros(Shape{4}), {.name = "odd"});
    Variable unused(zeros(Shape{2}), {.name = "unused"});
    Variable w64(zeros(Shape{2}, DType::kFloat64), {.name = "w64"});
    DistributedGradientTape tape(c);
    const double scale = c.rank() + 1;
    Tensor loss = reduce_sum(w.read() * scale) + reduce_sum(cast(w64.read(), DType::kFloat32) * scale);
    if (c.rank() % 2 == 1) loss = loss + reduce_sum(odd.read());
    const auto g = tape.gradient(loss, {w, odd, unused, w64});
    ASSERT_EQ(g.size(), 4u);
    ASSERT_TRUE(g[0].has_value());
    for (float v : g[0]->to_vector<float>()) EXPECT_FLOAT_EQ(v, (n + 1) / 2.0f);
    for (double v : g[3]->to_vector<double>()) EXPECT_DOUBLE_EQ(v, (n + 1) / 2.0);
    if (n > 1) {
      ASSERT_TRUE(g[1].has_value()) << "a gradient present on some rank is reduced with zeros elsewhere";
      for (float v : g[1]->to_vector<float>()) EXPECT_FLOAT_EQ(v, static_cast<float>(n / 2) / n);
    } else {
      EXPECT_FALSE(g[1].has_value());
    }
    EXPECT_FALSE(g[2].has_value()) << "no rank had a gradient";
    EXPECT_TRUE(same_on_every_rank(hash_bytes({*g[0], *g[3]})));
  }
  c.set_fusion(ContextOptions{}.fusion_threshold_bytes, true);
  c.set_shared_memory(true);
  EXPECT_THROW(c.set_fusion(0, true), std::invalid_argument);
}

// The window is what the other tests use whenever a host runs more than one rank: for each host's
// ranks, or (--shared-memory-group G, see mpi_main.cc) for groups of G, reduced across each other
// as machines are — when the groups come out of one size > 1; otherwise (one rank per host, uneven
// groups) the network sum. With several hosts of 2 ranks (--hosts 2) that is the hierarchical path
// over a network link.
TEST(GradientTest, ReducesThroughSharedMemoryWhenHostsRunEvenGroups) {
  Context& c = context();
  const int limit = c.options().shared_memory_group;
  const int group = limit > 0 ? std::min(limit, c.local_size()) : c.local_size();
  EXPECT_EQ(c.uses_shared_memory(), group > 1 && c.local_size() % group == 0);
  c.set_shared_memory(false);
  EXPECT_FALSE(c.uses_shared_memory());
  c.set_shared_memory(true);
}

// Rank r's gradient of element i is (r + 1)·i, so the average is i·(n + 1)/2, exact in float and
// double. The big variable spans every rank's slice of its buffer (each rank sums 1/n of it), and
// two variable lists of different sizes alternate (as a GAN's two networks do), so the window grows
// and the steps' halves alternate between layouts. Results must be exact for both transports.
TEST(GradientTest, SlicesAcrossRanksAndAlternatingVariableListsAreExact) {
  Context& c = context();
  const int n = c.size();
  auto ramp = [](std::int64_t count, DType dtype) {
    std::vector<double> v(static_cast<std::size_t>(count));
    std::iota(v.begin(), v.end(), 0.0);
    return cast(constant(v, Shape{count}), dtype);
  };
  Variable small(zeros(Shape{5}), {.name = "small"});
  Variable big(zeros(Shape{3001}), {.name = "big"});
  Variable big64(zeros(Shape{777}, DType::kFloat64), {.name = "big64"});
  for (bool shared : {true, false}) {
    SCOPED_TRACE(shared ? "shared memory" : "network sum");
    c.set_shared_memory(shared);
    for (int step = 0; step < 5; ++step) {
      const bool both = step % 2 == 1;
      const std::vector<Variable> vars = both ? std::vector<Variable>{small, big, big64} : std::vector<Variable>{small};
      DistributedGradientTape tape(c);
      const double scale = c.rank() + 1;
      Tensor loss = reduce_sum(small.read() * ramp(5, DType::kFloat32) * static_cast<float>(scale));
      if (both)
        loss = loss + reduce_sum(big.read() * ramp(3001, DType::kFloat32) * static_cast<float>(scale)) +
               cast(reduce_sum(big64.read() * ramp(777, DType::kFloat64) * scale), DType::kFloat32);
      const auto g = tape.gradient(loss, vars);
      ASSERT_EQ(g.size(), vars.size());
      std::vector<Tensor> got;
      for (std::size_t k = 0; k < g.size(); ++k) {
        ASSERT_TRUE(g[k].has_value()) << vars[k].name();
        const auto v = g[k]->dtype() == DType::kFloat64 ? g[k]->to_vector<double>()
                                                        : cast(*g[k], DType::kFloat64).to_vector<double>();
        for (std::size_t i = 0; i < v.size(); ++i)
          ASSERT_EQ(v[i], static_cast<double>(i) * (n + 1) / 2.0) << vars[k].name() << " element " << i << " step " << step;
        got.push_back(*g[k]);
      }
      EXPECT_TRUE(same_on_every_rank(hash_bytes(got)));
    }
  }
  c.set_shared_memory(true);
}

TEST(GradientTest, DistributedOptimizerAppliesTheAverage) {
  Context& c = context();
  Variable w(zeros(Shape{2}), {.name = "dopt_w"});
  DistributedOptimizer opt(c, std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = 1.0}));
  const float r = static_cast<float>(c.rank() + 1);
  opt.apply_gradients({constant(std::vector<float>{r, -r}, Shape{2})}, {w});
  const float avg = (c.size() + 1) / 2.0f;
  EXPECT_THAT(w.value().to_vector<float>(), ::testing::ElementsAre(-avg, avg));
  EXPECT_EQ(opt.optimizer()->iterations(), 1);
  EXPECT_THROW(DistributedOptimizer(c, nullptr), std::invalid_argument);
}

TEST(GradientTest, FirstReductionChecksVariablesAcrossRanks) {
  Context& c = context();
  if (c.size() == 1) GTEST_SKIP() << "needs two ranks";
  // Rank 1 holds a differently shaped variable: every rank gets the same error, naming both.
  Variable a(zeros(Shape{2, c.rank() == 1 ? 3 : 2}), {.name = "mismatch/kernel"});
  Variable b(zeros(Shape{2}), {.name = "mismatch/bias"});
  DistributedGradientTape tape(c);
  const Tensor loss = reduce_sum(b.read()) + reduce_sum(a.read());
  try {
    tape.gradient(loss, {b, a});
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("variable 1: rank 0 has 'mismatch/kernel' [2, 2] float32, rank 1 has "
                                    "'mismatch/kernel' [2, 3] float32"));
  }
  // Different counts.
  std::vector<Variable> vars{Variable(zeros(Shape{1}), {.name = "count"})};
  if (c.rank() == 0) vars.push_back(Variable(zeros(Shape{1}), {.name = "extra"}));
  try {
    c.check_same_variables(vars, "test");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("(2 on rank 0, 1 on rank 1): variable 1: rank 0 has 'extra' [1] float32, "
                                    "rank 1 has no variable"));
  }
}

TEST(GradientTest, FirstReductionBroadcastsRankZerosValues) {
  Context& c = context();
  Variable w(constant(std::vector<float>{static_cast<float>(c.rank())}, Shape{1}), {.name = "bcast_w"});
  DistributedGradientTape tape(c);
  const Tensor loss = reduce_sum(w.read());
  tape.gradient(loss, {w});
  EXPECT_EQ(w.value().item(), 0.0);  // rank 0's initial value everywhere
}

// Shards of a dataset shuffled alike on every rank partition each pass: every example once.
TEST(ShardTest, EveryExampleExactlyOncePerEpochAcrossRanks) {
  Context& c = context();
  for (std::int64_t n : {7, 10, 11, 12}) {
    std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
    std::iota(ids.begin(), ids.end(), 0);
    const data::Dataset ds = data::Dataset::from_tensor_slices({constant(ids, Shape{n})}).shuffle(n, 3);
    for (int epoch = 0; epoch < 2; ++epoch) {
      std::vector<double> seen(static_cast<std::size_t>(n), 0.0);
      for (const data::Example& e : ds.shard(c.size(), c.rank()))
        seen[static_cast<std::size_t>(e[0].item<std::int64_t>())] += 1;
      c.all_reduce(seen, ReduceOp::kSum, "test: seen");
      for (std::int64_t i = 0; i < n; ++i) EXPECT_EQ(seen[static_cast<std::size_t>(i)], 1.0) << "n " << n << " i " << i;
    }
  }
}

}  // namespace
}  // namespace tapeflow::distribute::testing
