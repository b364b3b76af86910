// GradientTape semantics beyond the seeds: sources structures, unconnected gradients, output
// gradients, threads, moved-from tapes and the error paths.
#include <gtest/gtest.h>

#include <thread>

#include "tape/runtime/recorder.h"
#include "tape/tapeflow.h"

namespace tf = tapeflow;

namespace {

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(GradientTape, VectorOfSourcesKeepsOrder) {
  tf::Variable a(2.0), b(3.0);
  tf::GradientTape tape;
  tf::Tensor y = a * b * b;
  auto g = tape.gradient(y, {a, b});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_FLOAT_EQ(g[0]->item(), 9.0);
  EXPECT_FLOAT_EQ(g[1]->item(), 12.0);
}

TEST(GradientTape, ContainerOfVariables) {
  std::vector<tf::Variable> vars{tf::Variable(1.0), tf::Variable(2.0)};
  tf::GradientTape tape;
  tf::Tensor y = vars[0] * vars[1];
  auto g = tape.gradient(y, vars);
  EXPECT_FLOAT_EQ(g[0]->item(), 2.0);
  EXPECT_FLOAT_EQ(g[1]->item(), 1.0);
}

TEST(GradientTape, UnconnectedZero) {
  tf::Variable a(2.0), b({1.0, 2.0});
  tf::GradientTape tape;
  tf::Tensor y = a * a;
  auto g = tape.gradient(y, {a, b}, {.unconnected_gradients = tf::UnconnectedGradients::kZero});
  ASSERT_TRUE(g[1]);
  EXPECT_EQ(g[1]->shape(), (tf::Shape{2}));
  EXPECT_EQ(g[1]->to_vector<float>(), (std::vector<float>{0, 0}));
}

TEST(GradientTape, NonScalarTargetIsSummed) {
  tf::Tensor x{1.0, 2.0, 3.0};
  tf::GradientTape tape;
  tape.watch(x);
  tf::Tensor y = x * x;
  EXPECT_EQ(tape.gradient(y, x)->to_vector<float>(), (std::vector<float>{2, 4, 6}));
}

TEST(GradientTape, OutputGradientsSeedTheBackwardPass) {
  tf::Tensor x{1.0, 2.0};
  tf::GradientTape tape({.persistent = true});
  tape.watch(x);
  tf::Tensor y = x * x;
  auto g = tape.gradient(std::vector<tf::Tensor>{y}, {x}, {.output_gradients = {tf::Tensor{10.0, 100.0}}});
  EXPECT_EQ(g[0]->to_vector<float>(), (std::vector<float>{20, 400}));
  std::string err = error_of([&] { tape.gradient(std::vector<tf::Tensor>{y}, {x}, {.output_gradients = {tf::Tensor{1.0}}}); });
  EXPECT_NE(err.find("output_gradients[0] has shape [1]"), std::string::npos) << err;
  err = error_of([&] { tape.gradient(std::vector<tf::Tensor>{y}, {x}, {.output_gradients = {y, y}}); });
  EXPECT_NE(err.find("2 output_gradients for 1 targets"), std::string::npos) << err;
}

TEST(GradientTape, SeveralTargetsAreSummed) {
  tf::Variable a(3.0);
  tf::GradientTape tape;
  auto g = tape.gradient(std::vector<tf::Tensor>{a * a, a * 2.0}, {a});
  EXPECT_FLOAT_EQ(g[0]->item(), 8.0);
}

TEST(GradientTape, GradientOfSourceItself) {
  tf::Tensor x = tf::scalar(4.0);
  tf::GradientTape tape;
  tape.watch(x);
  EXPECT_FLOAT_EQ(tape.gradient(x, x)->item(), 1.0);
}

TEST(GradientTape, IntegerSourcesAndTargetsGiveNone) {
  tf::Tensor i = tf::Tensor(3);
  tf::GradientTape tape;
  tape.watch(i);  // warns, not watched
  tf::Tensor y = i * i;
  EXPECT_FALSE(tape.gradient(y, i).has_value());
}

TEST(GradientTape, MovedFromTapeThrows) {
  tf::Tensor x = tf::scalar(1.0);
  tf::GradientTape a;
  a.watch(x);
  tf::Tensor y = x * x;
  tf::GradientTape b = std::move(a);
  std::string err = error_of([&] { a.gradient(y, x); });
  EXPECT_NE(err.find("moved-from"), std::string::npos) << err;
  EXPECT_FLOAT_EQ(b.gradient(y, x)->item(), 2.0);
}

TEST(GradientTape, StopRecordingOnStoppedTapeThrows) {
  tf::GradientTape tape;
  tape.stop();
  EXPECT_THROW((void)tape.stop_recording(), std::logic_error);
}

TEST(GradientTape, StopEndsRecording) {
  tf::Tensor x = tf::scalar(2.0);
  tf::GradientTape tape;
  tape.watch(x);
  tf::Tensor y = x * x;
  tape.stop();
  tf::Tensor z = y * x;  // not recorded
  EXPECT_FLOAT_EQ(tape.gradient(z, x).value_or(tf::scalar(-1.0)).item(), -1.0);
}

TEST(GradientTape, NonPersistentStopsRecordingAtGradient) {
  tf::Tensor x = tf::scalar(2.0);
  tf::GradientTape tape;
  tape.watch(x);
  tf::Tensor y = x * x;
  (void)tape.gradient(y, x);
  EXPECT_FALSE(tape.recording());
}

TEST(GradientTape, PersistentTapeRecordsItsOwnGradient) {
  tf::Tensor x = tf::scalar(3.0);
  tf::GradientTape tape({.persistent = true});
  tape.watch(x);
  tf::Tensor y = x * x * x;
  tf::Tensor dy = *tape.gradient(y, x);  // computed while recording: recorded on the same tape
  EXPECT_FLOAT_EQ(dy.item(), 27.0);
  EXPECT_FLOAT_EQ(tape.gradient(dy, x)->item(), 18.0);
}

TEST(GradientTape, WatchedVariablesInConstructionOrder) {
  tf::Variable a(1.0), b(2.0), c(3.0, {.trainable = false});
  tf::GradientTape tape;
  tf::Tensor y = b * a;
  tape.watch(c);
  auto w = tape.watched_variables();
  ASSERT_EQ(w.size(), 3u);
  EXPECT_TRUE(w[0].same_as(a));
  EXPECT_TRUE(w[1].same_as(b));
  EXPECT_TRUE(w[2].same_as(c));
}

TEST(GradientTape, TapesArePerThread) {
  tf::Tensor x = tf::scalar(2.0);
  tf::GradientTape tape({.persistent = true});
  tape.watch(x);
  tf::Tensor other;
  std::thread t([&] { other = x * x; });  // another thread's op: not recorded here
  t.join();
  tf::Tensor mine = x * x * x;
  // Recorded, x² would add 2x = 4: d(x² + x³)/dx = 16. Per thread, only d(x³)/dx = 3x² = 12.
  EXPECT_FLOAT_EQ(tape.gradient(other + mine, x)->item(), 12.0);
  EXPECT_FALSE(tape.gradient(other, x).has_value());
}

// is_recording(): the read-only public view of this thread's recorder stack (which is internal).
TEST(GradientTape, IsRecordingFollowsTapesPausesAndThreads) {
  EXPECT_FALSE(tf::is_recording());
  {
    tf::GradientTape outer;
    EXPECT_TRUE(tf::is_recording());
    bool other_thread = true;
    std::thread t([&] { other_thread = tf::is_recording(); });
    t.join();
    EXPECT_FALSE(other_thread);  // tapes are per thread
    {
      auto pause = outer.stop_recording();
      EXPECT_FALSE(tf::is_recording());
      tf::GradientTape inner;
      EXPECT_TRUE(tf::is_recording());
      inner.stop();
      EXPECT_FALSE(tf::is_recording());
    }
    EXPECT_TRUE(tf::is_recording());  // the pause ended: outer is back
    {
      tf::RecordingPause pause;
      EXPECT_FALSE(tf::is_recording());
    }
    EXPECT_TRUE(tf::is_recording());
    outer.stop();
    EXPECT_FALSE(tf::is_recording());
  }
  EXPECT_FALSE(tf::is_recording());
}

TEST(GradientTape, ThirdOrderThroughNestedTapes) {
  tf::Tensor x = tf::scalar(2.0);
  tf::GradientTape t3;
  t3.watch(x);
  tf::GradientTape t2;
  t2.watch(x);
  tf::GradientTape t1;
  t1.watch(x);
  tf::Tensor y = tf::pow(x, 4.0);
  tf::Tensor d1 = *t1.gradient(y, x);
  tf::Tensor d2 = *t2.gradient(d1, x);
  tf::Tensor d3 = *t3.gradient(d2, x);
  EXPECT_FLOAT_EQ(d1.item(), 32.0);
  EXPECT_FLOAT_EQ(d2.item(), 48.0);
  EXPECT_FLOAT_EQ(d3.item(), 48.0);
}

TEST(GradientTape, VariableAssignNotRecordedAndCopyOnWrite) {
  tf::Variable v({1.0, 2.0});
  tf::Tensor before = v.value();
  v.assign_add(tf::Tensor{1.0, 1.0});
  EXPECT_EQ(before.to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(v.value().to_vector<float>(), (std::vector<float>{2, 3}));
  std::string err = error_of([&] { v.assign(tf::Tensor{1.0}); });
  EXPECT_NE(err.find("variable 'Variable' has shape [2]"), std::string::npos) << err;
}

// assign_shared takes the tensor's storage (no copy); the tensor itself never changes: an in-place
// update copies first while it is still referenced, and updates in place once it is not.
TEST(GradientTape, VariableAssignSharedAdoptsStorageAndKeepsTensorsImmutable) {
  tf::Variable v({1.0, 2.0});
  {
    tf::Tensor t{5.0, 6.0};
    t = tf::cast(t, tf::DType::kFloat32);
    v.assign_shared(t);
    EXPECT_EQ(v.value().raw_data(), t.raw_data());  // shared, not copied
    v.assign_add(tf::Tensor{1.0, 1.0});
    EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{5, 6}));  // copy-on-write
    EXPECT_NE(v.value().raw_data(), t.raw_data());
  }
  tf::Tensor u = tf::cast(tf::Tensor{7.0, 8.0}, tf::DType::kFloat32);
  const void* storage = u.raw_data();
  v.assign_shared(u);
  u = tf::Tensor();  // the variable is now the only owner: updates go in place
  v.assign_sub(tf::Tensor{1.0, 1.0});
  EXPECT_EQ(v.value().raw_data(), storage);
  EXPECT_EQ(v.value().to_vector<float>(), (std::vector<float>{6, 7}));
  std::string err = error_of([&] { v.assign_shared(tf::Tensor{1.0}); });
  EXPECT_NE(err.find("assign_shared: variable 'Variable' has shape [2]"), std::string::npos) << err;
  err = error_of([&] { v.assign_shared(tf::cast(tf::Tensor{1.0, 2.0}, tf::DType::kFloat64)); });
  EXPECT_NE(err.find("assign_shared: variable 'Variable' has shape [2] dtype float32, got shape [2] dtype float64"),
            std::string::npos)
      << err;
  EXPECT_EQ(v.value().to_vector<float>(), (std::vector<float>{6, 7}));  // a failed call changes nothing
}

TEST(Ops, BroadcastErrorNamesOpAndShapes) {
  std::string err = error_of([] { tf::add(tf::zeros({2, 3}), tf::zeros({4})); });
  EXPECT_EQ(err, "add: incompatible shapes for broadcasting: [2, 3] and [4]");
  err = error_of([] { tf::multiply(tf::zeros({2}), tf::zeros({2}, tf::DType::kFloat64)); });
  EXPECT_EQ(err, "multiply: dtypes differ: [2] float32 and [2] float64");
  err = error_of([] { tf::exp(tf::Tensor(3)); });
  EXPECT_NE(err.find("exp: expected a floating dtype, got int32"), std::string::npos) << err;
  err = error_of([] { tf::reduce_sum(tf::zeros({2, 3}), 2); });
  EXPECT_NE(err.find("Sum: axis 2 out of range for rank 2"), std::string::npos) << err;
}

}  // namespace
