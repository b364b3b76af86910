// Checkpoints that fuzzing and crash tests found dangerous: a missing or damaged index with valid
// files, unreadable newest files, a negative counter, a variable-length 'format' attribute over a
// damaged global heap, a function that calls itself and one with an attribute that overflows. Each file is generated here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hdf5.h>

#include <chrono>
#include <fstream>

#include "models/checkpoint.h"
#include "models/io/h5_io.h"
#include "tape/tapeflow.h"
#include "tests/models_io/io_test_util.h"

namespace tapeflow::models {
namespace {

using io::testing::ScratchDir;
using HostileCheckpoint = ScratchDir;

std::shared_ptr<Checkpoint> counter_checkpoint(std::int64_t* step) {
  auto ckpt = std::make_shared<Checkpoint>();
  ckpt->track_counter("step", step);
  return ckpt;
}

// --resume with valid checkpoint files but no index (or a damaged one) must find them, and a new
// save must never overwrite them.
TEST_F(HostileCheckpoint, ResumeWithoutIndexFindsTheNewestFileAndNeverOverwritesIt) {
  std::int64_t step = 0;
  auto ckpt = counter_checkpoint(&step);
  {
    CheckpointManager m(ckpt, file("ck"), 3);
    for (step = 1; step <= 2; ++step) m.save();
  }
  std::filesystem::remove(file("ck/checkpoint"));
  CheckpointManager m(ckpt, file("ck"), 3);
  step = 0;
  EXPECT_EQ(m.restore(), file("ck/ckpt-2.h5"));
  EXPECT_EQ(step, 2);
  step = 10;
  EXPECT_EQ(m.save(), file("ck/ckpt-3.h5"));  // not ckpt-1.h5 over the old run's first file
  step = 0;
  Checkpoint probe;
  std::int64_t got = 0;
  probe.track_counter("step", &got);
  probe.read(file("ck/ckpt-2.h5"));
  EXPECT_EQ(got, 2);
}

// A damaged newest file: restore falls back to the previous one, and numbering continues after the
// damaged file (which is not overwritten). When no file can be read, restore throws naming them.
TEST_F(HostileCheckpoint, UnreadableNewestFallsBackToOlderAndNothingIsOverwritten) {
  std::int64_t step = 0;
  auto ckpt = counter_checkpoint(&step);
  {
    CheckpointManager m(ckpt, file("ck"), 5);
    for (step = 1; step <= 3; ++step) m.save();
  }
  const std::string damaged = "not an HDF5 file at all";
  { std::ofstream(file("ck/ckpt-3.h5"), std::ios::trunc) << damaged; }
  CheckpointManager m(ckpt, file("ck"), 5);
  step = 0;
  EXPECT_EQ(m.restore(), file("ck/ckpt-2.h5"));
  EXPECT_EQ(step, 2);
  EXPECT_EQ(m.save(), file("ck/ckpt-4.h5"));
  std::ifstream in(file("ck/ckpt-3.h5"));
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), damaged);

  for (const char* f : {"ckpt-1.h5", "ckpt-2.h5", "ckpt-4.h5"}) { std::ofstream(file(std::string("ck/") + f), std::ios::trunc) << "x"; }
  CheckpointManager all_bad(ckpt, file("ck"), 5);
  step = 42;
  EXPECT_RUNTIME_ERROR(all_bad.restore(), file("ck"), "none of the 4 checkpoint files can be restored",
                       file("ck/ckpt-4.h5"), file("ck/ckpt-1.h5"));
  EXPECT_EQ(step, 42);  // nothing changed
}

TEST_F(HostileCheckpoint, NegativeCounterIsRefused) {
  {
    io::H5Writer w(file("neg.h5"));
    w.write_attribute("", "format", std::string("tapeflow-checkpoint"));
    w.write_attribute("", "format_version", std::int64_t{1});
    const std::int64_t minus3 = -3;
    w.write_dataset("counters/epoch", DType::kInt64, {}, &minus3);
    w.commit();
  }
  std::int64_t epoch = 5;
  Checkpoint c;
  c.track_counter("epoch", &epoch);
  EXPECT_RUNTIME_ERROR(c.read(file("neg.h5")), file("neg.h5"), "counter 'epoch' is negative: -3");
  EXPECT_EQ(epoch, 5);
}

// The root 'format' attribute as a variable-length string over a damaged global heap: HDF5 1.10.8
// loops forever in H5HG_read on it. Refused, fast, naming the file.
TEST_F(HostileCheckpoint, VariableLengthFormatOverDamagedGlobalHeapFailsFast) {
  const std::string path = file("vlen.h5");
  {
    const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t a = H5Acreate2(f, "format", type, space, H5P_DEFAULT, H5P_DEFAULT);
    const char* value = "tapeflow-checkpoint";
    H5Awrite(a, type, &value);
    H5Aclose(a);
    H5Sclose(space);
    H5Tclose(type);
    H5Fclose(f);
  }
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto gcol = bytes.find("GCOL");
  ASSERT_NE(gcol, std::string::npos);
  bytes.replace(gcol + 24, 8, std::string(8, '\0'));  // heap object 1 of size 0: H5HG_read never advances
  { std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes; }
  const auto t0 = std::chrono::steady_clock::now();
  Checkpoint c;
  EXPECT_RUNTIME_ERROR(c.read(path), path, "attribute 'format'", "variable-length string");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
}

// Writes a checkpoint (epoch 4) holding `g` to `path`; reading it must fail naming the file and
// every part, before the epoch counter changes.
void expect_function_refused(const std::string& path, const FunctionGraph& g, const std::vector<std::string>& parts) {
  std::int64_t epoch = 4;
  {
    Checkpoint w;
    w.track_counter("epoch", &epoch);
    w.add_function(g);
    w.write(path);
  }
  epoch = 1;
  Checkpoint r;
  r.track_counter("epoch", &epoch);
  try {
    r.read(path);
    ADD_FAILURE() << "no error reading " << path;
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr(path));
    for (const std::string& p : parts) EXPECT_THAT(e.what(), ::testing::HasSubstr(p));
  }
  EXPECT_EQ(epoch, 1);
}

// A checkpoint that redefines a registered function as a call to itself is refused before anything
// changes, and the registered function still works.
TEST_F(HostileCheckpoint, FunctionCallingItselfIsRefused) {
  register_function(trace("loopy", [](const std::vector<Tensor>& x) { return std::vector<Tensor>{x[0] * 3.0}; },
                          {Tensor(1.0f)}));
  const FunctionGraph loop =
      trace("loopy", [](const std::vector<Tensor>& x) { return call_function("loopy", x); }, {Tensor(1.0f)});
  expect_function_refused(file("loop.h5"), loop, {"'loopy' would call itself"});
  EXPECT_EQ(call_function("loopy", {Tensor(2.0f)})[0].item(), 6.0);
}

// A checkpoint whose function pads to [2^32, 2^32] (2^64 elements) is refused by read(), naming the
// file, function, op, attribute and value, before any counter changes (it used to load, and its
// first call made a tensor of that shape backed by 0 bytes).
TEST_F(HostileCheckpoint, FunctionAttributeValuesAreCheckedAtLoad) {
  FunctionGraph g = trace("padder", [](const std::vector<Tensor>& x) { return std::vector<Tensor>{pad(x[0], {{1, 1}, {1, 1}})}; },
                          {zeros(Shape{1, 1})});
  for (FunctionNode& n : g.nodes)
    if (n.op == "Pad") n.attrs.set("paddings", std::vector<std::int64_t>{0, 4294967295, 0, 4294967295});
  expect_function_refused(file("pad.h5"), g, {"function 'padder'",
                                              "Pad: attribute 'paddings' = [0, 4294967295, 0, 4294967295]",
                                              "overflows int64"});
}

}  // namespace
}  // namespace tapeflow::models
