#include "distribute/context.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>

#include "distribute/internal/communicator.h"
#include "distribute/internal/gradient_reducer.h"
#include "distribute/internal/mpi_types.h"
#include "distribute/internal/scale.h"

namespace tapeflow::distribute {
namespace {

using internal::Communicator;
using Clock = std::chrono::steady_clock;

std::atomic<bool> g_context_alive{false};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// "'dense/kernel:0' [784, 256] float32": one line of a rank's variable signature.
std::string describe(const Variable& v) {
  return "'" + v.name() + "' " + v.shape().to_string() + " " + dtype_name(v.dtype());
}

std::vector<std::string> split_lines(const char* p, std::size_t n) {
  std::vector<std::string> out;
  std::string cur;
  for (std::size_t i = 0; i < n; ++i) {
    if (p[i] == '\n') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += p[i];
    }
  }
  return out;
}

}  // namespace

bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

void Context::set_fusion(std::int64_t threshold_bytes, bool overlap_backward) {
  if (threshold_bytes < 1)
    throw std::invalid_argument("distribute::Context::set_fusion: threshold_bytes must be >= 1, got " +
                                std::to_string(threshold_bytes));
  options_.fusion_threshold_bytes = threshold_bytes;
  options_.overlap_backward = overlap_backward;
}

void Context::set_compression(Compression compression) {
  options_.compression = compression;
  reducer_->set_compression(compression == Compression::kFp16);
}

void Context::set_shared_memory(bool on) {
  options_.shared_memory = on;
  reducer_->set_shared_memory(on);
}

const std::string& Context::host(int r) const {
  if (r < 0 || r >= size_)
    throw std::invalid_argument("distribute::Context::host: rank must be in [0, " + std::to_string(size_) + "), got " +
                                std::to_string(r));
  return comm_->host(r);
}

bool Context::uses_shared_memory() const { return reducer_->uses_shared_memory(); }

void Context::set_timeout(double seconds) {
  if (!(seconds > 0))
    throw std::invalid_argument("distribute::Context::set_timeout: seconds must be > 0, got " + std::to_string(seconds));
  options_.timeout_seconds = seconds;
  comm_->set_timeout(seconds);
}

Context::Context(int* argc, char*** argv, ContextOptions options) : options_(options) {
  if (!(options_.timeout_seconds > 0))
    throw std::invalid_argument("distribute::Context: timeout_seconds must be > 0, got " +
                                std::to_string(options_.timeout_seconds));
  if (options_.shared_memory_group < 0)
    throw std::invalid_argument("distribute::Context: shared_memory_group must be >= 0, got " +
                                std::to_string(options_.shared_memory_group));
  if (options_.fusion_threshold_bytes < 1)
    throw std::invalid_argument("distribute::Context: fusion_threshold_bytes must be >= 1, got " +
                                std::to_string(options_.fusion_threshold_bytes));
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (g_context_alive.exchange(true) || initialized || finalized)
    throw std::logic_error("distribute::Context: MPI is already initialised in this process (one Context per "
                           "process; MPI cannot be initialised again after MPI_Finalize)");
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    g_context_alive = false;
    throw std::runtime_error("distribute::Context: MPI_Init_thread failed");
  }
  if (provided < MPI_THREAD_FUNNELED) {
    MPI_Finalize();
    throw std::runtime_error("distribute::Context: the MPI library does not provide MPI_THREAD_FUNNELED");
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &local_rank_);
  MPI_Comm_size(local, &local_size_);
  MPI_Comm_free(&local);
  comm_ = std::make_unique<Communicator>(options_.timeout_seconds, rank_, size_);
  // Serialized: the reducer's progress thread may call MPI while this thread computes.
  reducer_ = std::make_unique<internal::GradientReducer>(*comm_, provided >= MPI_THREAD_SERIALIZED && size_ > 1,
                                                         options_.shared_memory, options_.shared_memory_group);
  reducer_->set_compression(options_.compression == Compression::kFp16);
}

Context::~Context() {
  if (std::uncaught_exceptions() > 0 && size_ > 1) {
    // The other ranks wait for this one in a collective: finalizing would hang the job.
    std::fprintf(stderr, "distribute: rank %d of %d is leaving with an exception; aborting the job\n", rank_, size_);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  tensor_reducer_.reset();
  reducer_.reset();
  comm_.reset();
  MPI_Finalize();
  g_context_alive = false;
}

void Context::abort(int code, const std::string& message) const {
  std::fprintf(stderr, "[rank %d of %d] %s\n", rank_, size_, message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();
}

Tensor Context::allreduce(const Tensor& tensor, ReduceOp op, const char* name) {
  if (!tensor.defined()) throw std::invalid_argument(std::string("distribute::allreduce (") + name + "): undefined tensor");
  if (tensor.dtype() == DType::kBool || (op == ReduceOp::kAverage && !is_floating(tensor.dtype())))
    throw std::invalid_argument(std::string("distribute::allreduce (") + name + "): cannot " +
                                (op == ReduceOp::kAverage ? "average" : "reduce") + " a " +
                                dtype_name(tensor.dtype()) + " tensor");
  if (size_ > 1 && (op == ReduceOp::kAverage || op == ReduceOp::kSum) && is_floating(tensor.dtype())) {
    // The gradients' path (fusion buffer; the shared-memory window and, across machines, its slices
    // with MPI_Iallreduce), through a reducer of its own so the gradients' layout stays as it is.
    // Every rank takes this branch in the same call: dtype and op are the same everywhere.
    if (!tensor_reducer_)
      tensor_reducer_ = std::make_unique<internal::GradientReducer>(*comm_, false, options_.shared_memory,
                                                                    options_.shared_memory_group);
    tensor_reducer_->set_shared_memory(options_.shared_memory);
    if (!tensor_slot_.defined() || tensor_slot_.shape() != tensor.shape() || tensor_slot_.dtype() != tensor.dtype())
      tensor_slot_ = Variable(tensor, {.name = name, .trainable = false});
    comm_->begin(name);
    tensor_reducer_->begin({tensor_slot_}, op, std::numeric_limits<std::int64_t>::max());
    timings_.tensor_allreduces += 1;
    timings_.tensor_allreduces_shared += tensor_reducer_->uses_shared_memory() ? 1 : 0;
    tensor_reducer_->set(0, tensor);
    std::vector<std::optional<Tensor>> out = tensor_reducer_->finish();
    return *out[0];
  }
  Tensor out = Tensor::empty(tensor.shape(), tensor.dtype());
  std::memcpy(out.mutable_raw_data(), tensor.raw_data(), tensor.nbytes());
  comm_->begin(name);
  MPI_Request r;
  Communicator::check(MPI_Iallreduce(MPI_IN_PLACE, out.mutable_raw_data(), static_cast<int>(out.num_elements()),
                                     internal::mpi_type(out.dtype()), internal::mpi_op(op), comm_->comm(), &r),
                      std::string("MPI_Iallreduce (") + name + ")");
  comm_->wait(r);
  if (op == ReduceOp::kAverage && size_ > 1) {  // floating (checked above)
    void* p = out.mutable_raw_data();
    if (out.dtype() == DType::kFloat32) internal::scale_copy<float>(p, out.num_elements(), size_, p);
    else internal::scale_copy<double>(p, out.num_elements(), size_, p);
  }
  return out;
}

Tensor Context::broadcast(const Tensor& tensor, int root, const char* name) {
  if (root < 0 || root >= size_)
    throw std::invalid_argument(std::string("distribute::broadcast (") + name + "): root must be in [0, " +
                                std::to_string(size_) + "), got " + std::to_string(root));
  if (!tensor.defined()) throw std::invalid_argument(std::string("distribute::broadcast (") + name + "): undefined tensor");
  Tensor out = Tensor::empty(tensor.shape(), tensor.dtype());
  std::memcpy(out.mutable_raw_data(), tensor.raw_data(), tensor.nbytes());
  comm_->begin(name);
  MPI_Request r;
  Communicator::check(MPI_Ibcast(out.mutable_raw_data(), static_cast<int>(out.nbytes()), MPI_BYTE, root,
                                 comm_->comm(), &r),
                      std::string("MPI_Ibcast (") + name + ")");
  comm_->wait(r);
  return out;
}

void Context::all_reduce(std::span<double> values, ReduceOp op, const char* what) {
  comm_->begin(what);
  MPI_Request r;
  Communicator::check(MPI_Iallreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE,
                                     internal::mpi_op(op), comm_->comm(), &r),
                      std::string("MPI_Iallreduce (") + what + ")");
  comm_->wait(r);
  if (op == ReduceOp::kAverage)
    internal::scale_copy<double>(values.data(), static_cast<std::int64_t>(values.size()), size_, values.data());
}

void Context::broadcast(std::span<double> values, int root, const char* what) {
  if (root < 0 || root >= size_)
    throw std::invalid_argument(std::string("distribute::broadcast (") + what + "): root must be in [0, " +
                                std::to_string(size_) + "), got " + std::to_string(root));
  comm_->begin(what);
  MPI_Request r;
  Communicator::check(MPI_Ibcast(values.data(), static_cast<int>(values.size()), MPI_DOUBLE, root, comm_->comm(), &r),
                      std::string("MPI_Ibcast (") + what + ")");
  comm_->wait(r);
}

void Context::broadcast_variables(const std::vector<Variable>& variables, int root) {
  if (root < 0 || root >= size_)
    throw std::invalid_argument("distribute::broadcast_variables: root must be in [0, " + std::to_string(size_) +
                                "), got " + std::to_string(root));
  if (size_ == 1) return;
  std::size_t total = 0;
  for (const Variable& v : variables) total += v.value().nbytes();
  std::vector<unsigned char> buffer(total);
  std::size_t at = 0;
  for (const Variable& v : variables) {
    const Tensor t = v.value();
    std::memcpy(buffer.data() + at, t.raw_data(), t.nbytes());
    at += t.nbytes();
  }
  comm_->begin("broadcast_variables");
  MPI_Request r;
  Communicator::check(MPI_Ibcast(buffer.data(), static_cast<int>(buffer.size()), MPI_BYTE, root, comm_->comm(), &r),
                      "MPI_Ibcast (broadcast_variables)");
  comm_->wait(r);
  if (rank_ == root) return;
  at = 0;
  for (const Variable& v : variables) {
    Tensor t = Tensor::empty(v.shape(), v.dtype());
    std::memcpy(t.mutable_raw_data(), buffer.data() + at, t.nbytes());
    at += t.nbytes();
    v.assign(t);
  }
}

void Context::check_same_variables(const std::vector<Variable>& variables, const char* what) {
  std::string mine;
  for (const Variable& v : variables) mine += describe(v) + "\n";
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<std::size_t>(size_));
  comm_->begin(std::string(what) + ": variable check (lengths)");
  MPI_Request r;
  Communicator::check(MPI_Iallgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm_->comm(), &r), "MPI_Iallgather");
  comm_->wait(r);
  std::vector<int> displs(lens.size(), 0);
  for (std::size_t i = 1; i < lens.size(); ++i) displs[i] = displs[i - 1] + lens[i - 1];
  std::vector<char> all(static_cast<std::size_t>(displs.back() + lens.back()));
  comm_->begin(std::string(what) + ": variable check");
  Communicator::check(MPI_Iallgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR,
                                      comm_->comm(), &r),
                      "MPI_Iallgatherv");
  comm_->wait(r);
  const auto ref = split_lines(all.data(), static_cast<std::size_t>(lens[0]));
  for (int k = 1; k < size_; ++k) {
    const auto other = split_lines(all.data() + displs[static_cast<std::size_t>(k)], static_cast<std::size_t>(lens[static_cast<std::size_t>(k)]));
    for (std::size_t i = 0; i < std::max(ref.size(), other.size()); ++i) {
      const std::string a = i < ref.size() ? ref[i] : "no variable";
      const std::string b = i < other.size() ? other[i] : "no variable";
      if (a == b) continue;
      throw std::invalid_argument("distribute: " + std::string(what) + ": the ranks' variables differ (" +
                                  std::to_string(ref.size()) + " on rank 0, " + std::to_string(other.size()) +
                                  " on rank " + std::to_string(k) + "): variable " + std::to_string(i) + ": rank 0 has " +
                                  a + ", rank " + std::to_string(k) + " has " + b);
    }
  }
}

std::vector<std::optional<Tensor>> Context::gradient(GradientTape& tape, const Tensor& target,
                                                     const std::vector<Variable>& variables) {
  return reduce(&tape, &target, nullptr, variables, ReduceOp::kAverage);
}

std::vector<std::optional<Tensor>> Context::gradient(GradientTape& tape, const Tensor& target,
                                                     const std::vector<Variable>& variables, ReduceOp op) {
  return reduce(&tape, &target, nullptr, variables, op);
}

std::vector<std::optional<Tensor>> Context::reduce_gradients(const std::vector<std::optional<Tensor>>& gradients,
                                                             const std::vector<Variable>& variables, ReduceOp op) {
  if (gradients.size() != variables.size())
    throw std::invalid_argument("distribute::reduce_gradients: " + std::to_string(gradients.size()) +
                                " gradients for " + std::to_string(variables.size()) + " variables");
  return reduce(nullptr, nullptr, &gradients, variables, op);
}

namespace {
// Installs `hook` as GradientOptions::on_gradient_final when the tape offers it (issue 11's hook);
// returns false otherwise (the buffers then start after the backward pass).
template <class Options, class Hook>
bool set_final_hook(Options& options, Hook&& hook) {
  if constexpr (requires { options.on_gradient_final = hook; }) {
    options.on_gradient_final = std::forward<Hook>(hook);
    return true;
  } else {
    return false;
  }
}
}  // namespace

std::vector<std::optional<Tensor>> Context::reduce(GradientTape* tape, const Tensor* target,
                                                   const std::vector<std::optional<Tensor>>* gradients,
                                                   const std::vector<Variable>& variables, ReduceOp op) {
  // First reduction of a variable list: same variables everywhere, then rank 0's values.
  if (size_ > 1) {
    std::vector<std::int64_t> ids;
    for (const Variable& v : variables) ids.push_back(v.handle_id());
    if (std::find(checked_.begin(), checked_.end(), ids) == checked_.end()) {
      check_same_variables(variables, "first gradient reduction");
      broadcast_variables(variables, 0);
      checked_.push_back(std::move(ids));
    }
  }
  if (size_ == 1) {  // nothing to reduce: the average of one rank is its gradient
    if (tape) return tape->gradient(*target, variables);
    return *gradients;
  }
  comm_->begin("gradients (" + std::to_string(variables.size()) + " variables)");
  reducer_->begin(variables, op, options_.fusion_threshold_bytes);
  std::vector<std::optional<Tensor>> local;
  const Clock::time_point t0 = Clock::now();
  if (tape) {
    GradientOptions go;
    if (options_.overlap_backward)
      set_final_hook(go, [this](std::size_t i, const Tensor& g) { reducer_->set(i, g); });
    local = tape->gradient(*target, variables, go);
  } else {
    local = *gradients;
  }
  const Clock::time_point t1 = Clock::now();
  const std::size_t early = reducer_->started();  // during the backward pass
  std::vector<std::optional<Tensor>> out = reducer_->finish(local);  // sets the gradients not set yet
  timings_.reductions += 1;
  timings_.buffers += static_cast<std::int64_t>(reducer_->num_buffers());
  timings_.bytes += reducer_->bytes();
  timings_.started_in_backward += tape ? static_cast<std::int64_t>(early) : 0;
  timings_.backward_seconds += std::chrono::duration<double>(t1 - t0).count();
  timings_.wait_seconds += seconds_since(t1);
  return out;
}

}  // namespace tapeflow::distribute
