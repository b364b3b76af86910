#include "distribute/internal/gradient_reducer.h"

#include <Eigen/Core>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>

#include "distribute/internal/mpi_types.h"

namespace tapeflow::distribute::internal {
namespace {

// out[i] = in[i] / divisor (divisor 1: a copy). A true division (as TF's MEAN reduction), in Eigen
// packets: the scalar loop's divisions cost about as much as the allreduce itself (270k floats).
template <class T>
void scale_copy(const unsigned char* in, std::int64_t n, int divisor, void* out) {
  const T* src = reinterpret_cast<const T*>(in);
  T* dst = static_cast<T*>(out);
  if (divisor == 1) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(T));
    return;
  }
  using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
  Eigen::Map<Array>(dst, n) = Eigen::Map<const Array>(src, n) / static_cast<T>(divisor);
}

}  // namespace

GradientReducer::GradientReducer(Communicator& comm, bool threaded) : comm_(comm), threaded_(threaded) {
  if (threaded_) progress_ = std::thread([this] { progress_loop(); });
}

GradientReducer::~GradientReducer() {
  if (!progress_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  progress_.join();
}

void GradientReducer::progress_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || active_; });
    if (stop_) return;
    for (Buffer& b : buffers_)
      if (b.started && b.request != MPI_REQUEST_NULL) {
        int done = 0;
        MPI_Test(&b.request, &done, MPI_STATUS_IGNORE);
      }
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    lock.lock();
  }
}

void GradientReducer::begin(const std::vector<Variable>& variables, models::ReduceOp op, std::int64_t threshold) {
  if (op != models::ReduceOp::kAverage && op != models::ReduceOp::kSum)
    throw std::invalid_argument("distribute: gradients are reduced by average or sum only");
  bool same = variables.size() == ids_.size() && threshold == threshold_;
  for (std::size_t i = 0; same && i < variables.size(); ++i)
    same = variables[i].handle_id() == ids_[i] && variables[i].shape() == shapes_[i] &&
           variables[i].dtype() == dtypes_[i];
  op_ = op;
  finishing_ = false;
  started_ = 0;
  set_.assign(variables.size(), 0);
  if (!same) {  // a new layout: walk the variables from the last one (the backward pass's order)
    ids_.clear();
    shapes_.clear();
    dtypes_.clear();
    buffers_.clear();
    threshold_ = threshold;
    buffer_of_.assign(variables.size(), 0);
    slot_of_.assign(variables.size(), 0);
    for (const Variable& v : variables) {
      if (!is_floating(v.dtype()))
        throw std::invalid_argument("distribute: cannot reduce gradients of variable '" + v.name() + "' of dtype " +
                                    dtype_name(v.dtype()));
      ids_.push_back(v.handle_id());
      shapes_.push_back(v.shape());
      dtypes_.push_back(v.dtype());
    }
    std::int64_t bytes_in_last = 0;
    for (std::size_t k = variables.size(); k-- > 0;) {
      const std::int64_t bytes = shapes_[k].num_elements() * static_cast<std::int64_t>(dtype_size(dtypes_[k]));
      if (buffers_.empty() || buffers_.back().dtype != dtypes_[k] ||
          (bytes_in_last > 0 && bytes_in_last + bytes > threshold)) {
        buffers_.push_back(Buffer{.dtype = dtypes_[k]});
        bytes_in_last = 0;
      }
      Buffer& b = buffers_.back();
      buffer_of_[k] = buffers_.size() - 1;
      slot_of_[k] = b.vars.size();
      b.vars.push_back(k);
      b.offsets.push_back(b.elements);
      b.elements += shapes_[k].num_elements();
      bytes_in_last += bytes;
    }
    for (Buffer& b : buffers_) {
      b.elements += static_cast<std::int64_t>(b.vars.size());  // presence flags
      b.data.resize(static_cast<std::size_t>(b.elements) * dtype_size(b.dtype));
    }
  }
  for (Buffer& b : buffers_) {
    b.missing = b.vars.size();
    b.started = false;
    b.request = MPI_REQUEST_NULL;
  }
}

std::int64_t GradientReducer::bytes() const {
  std::int64_t n = 0;
  for (const Buffer& b : buffers_) n += static_cast<std::int64_t>(b.data.size());
  return n;
}

void GradientReducer::set(std::size_t i, const Tensor& gradient) {
  if (i >= set_.size() || set_[i]) return;  // unknown index or reported twice: the first one counts
  Buffer& b = buffers_[buffer_of_[i]];
  const std::size_t slot = slot_of_[i];
  const std::size_t esize = dtype_size(b.dtype);
  unsigned char* dst = b.data.data() + static_cast<std::size_t>(b.offsets[slot]) * esize;
  const std::size_t nbytes = static_cast<std::size_t>(shapes_[i].num_elements()) * esize;
  unsigned char* flag = b.data.data() + (static_cast<std::size_t>(b.elements) - b.vars.size() + slot) * esize;
  if (gradient.defined()) {
    if (gradient.shape() != shapes_[i] || gradient.dtype() != dtypes_[i])
      throw std::invalid_argument("distribute: gradient " + std::to_string(i) + " has shape " +
                                  gradient.shape().to_string() + " " + dtype_name(gradient.dtype()) +
                                  ", its variable " + shapes_[i].to_string() + " " + dtype_name(dtypes_[i]));
    std::memcpy(dst, gradient.raw_data(), nbytes);
  } else {
    std::memset(dst, 0, nbytes);  // reduced as zeros, never skipped
  }
  if (b.dtype == DType::kFloat32) {
    const float one = gradient.defined() ? 1.0f : 0.0f;
    std::memcpy(flag, &one, sizeof one);
  } else {
    const double one = gradient.defined() ? 1.0 : 0.0;
    std::memcpy(flag, &one, sizeof one);
  }
  set_[i] = 1;
  --b.missing;
  // Every rank must issue its collectives in the same order, but the order in which gradients become
  // final can differ between ranks (with GradientOptions::on_gradient_final, a gradient that is absent
  // on one rank is reported at the end of its backward pass, present ones on the way): so buffers
  // start in index order, buffer k once it is complete and 0..k-1 have started (start() counts).
  while (started_ < buffers_.size() && buffers_[started_].missing == 0) start(buffers_[started_]);
  progress();
}

void GradientReducer::start(Buffer& b) {
  ++started_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    b.started = true;
    Communicator::check(MPI_Iallreduce(MPI_IN_PLACE, b.data.data(), static_cast<int>(b.elements), mpi_type(b.dtype),
                                       MPI_SUM, comm_.comm(), &b.request),
                        "MPI_Iallreduce (gradients)");
    active_ = threaded_ && !finishing_;
  }
  cv_.notify_one();
}

void GradientReducer::progress() {
  if (threaded_) return;  // the progress thread does it
  for (Buffer& b : buffers_)
    if (b.started && b.request != MPI_REQUEST_NULL) comm_.test_all(std::span<MPI_Request>(&b.request, 1));
}

std::vector<std::optional<Tensor>> GradientReducer::finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);  // from here on this thread alone calls MPI
    finishing_ = true;
    active_ = false;
  }
  for (std::size_t i = 0; i < set_.size(); ++i)
    if (!set_[i]) set(i, Tensor());
  std::vector<MPI_Request> requests;
  for (Buffer& b : buffers_) requests.push_back(b.request);
  comm_.wait_all(requests);
  const int divisor = op_ == models::ReduceOp::kAverage ? comm_.size() : 1;
  std::vector<std::optional<Tensor>> out(set_.size());
  for (Buffer& b : buffers_) {
    const std::size_t esize = dtype_size(b.dtype);
    for (std::size_t s = 0; s < b.vars.size(); ++s) {
      const std::size_t k = b.vars[s];
      const unsigned char* flag = b.data.data() + (static_cast<std::size_t>(b.elements) - b.vars.size() + s) * esize;
      const double present = b.dtype == DType::kFloat32 ? *reinterpret_cast<const float*>(flag)
                                                        : *reinterpret_cast<const double*>(flag);
      if (present == 0.0) continue;  // no rank had a gradient
      Tensor g = Tensor::empty(shapes_[k], b.dtype);
      const unsigned char* src = b.data.data() + static_cast<std::size_t>(b.offsets[s]) * esize;
      if (b.dtype == DType::kFloat32) scale_copy<float>(src, shapes_[k].num_elements(), divisor, g.mutable_raw_data());
      else scale_copy<double>(src, shapes_[k].num_elements(), divisor, g.mutable_raw_data());
      out[k] = g;
    }
  }
  return out;
}

}  // namespace tapeflow::distribute::internal
