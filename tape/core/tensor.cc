#include "tape/core/tensor.h"

#include <sys/mman.h>
#include <tbb/scalable_allocator.h>

#include <atomic>
#include <charconv>
#include <cstring>
#include <cmath>
#include <new>
#include <sstream>

namespace tapeflow {

// ---- Buffer ----
std::shared_ptr<Buffer> Buffer::allocate(std::size_t bytes) {
  // Blocks from kKeptBlockBytes up stay cached in TBB's allocator when freed, to be reused by the
  // next request of their size, instead of going back to the OS (munmap) and coming back as fresh
  // pages that fault on first touch: a training step frees and reallocates the same large
  // activations every time (W8's 11 MB pool gradient faulted ~2,800 pages per step, 4-8% of it).
  // The cost is that freed large blocks stay mapped, as in PyTorch's caching allocator.
  [[maybe_unused]] static const int keep_large =
      scalable_allocation_mode(TBBMALLOC_SET_HUGE_SIZE_THRESHOLD, static_cast<std::intptr_t>(kKeptBlockBytes));
  void* p = scalable_aligned_malloc(bytes ? bytes : 1, 64);
  if (!p) throw std::bad_alloc();
  return std::shared_ptr<Buffer>(new Buffer(p, bytes));
}
std::shared_ptr<Buffer> Buffer::allocate_zeroed(std::size_t bytes) {
  if (bytes < kZeroedMapBytes) {
    auto b = allocate(bytes);
    std::memset(b->data(), 0, bytes);
    return b;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  try {
    return std::shared_ptr<Buffer>(new Buffer(p, bytes, true));
  } catch (...) {
    munmap(p, bytes);
    throw;
  }
}
Buffer::~Buffer() {
  if (mapped_)
    munmap(data_, size_);
  else
    scalable_aligned_free(data_);
}

namespace internal {
std::int64_t next_id() {
  static std::atomic<std::int64_t> counter{1};
  return counter.fetch_add(1, std::memory_order_relaxed);
}
namespace {
std::shared_ptr<TensorImpl> make_impl() {
  return std::allocate_shared<TensorImpl>(tbb::scalable_allocator<TensorImpl>());
}
}  // namespace
}  // namespace internal

// ---- Tensor ----
Tensor Tensor::make(const Shape& shape, DType dtype, bool zeroed) {
  auto impl = internal::make_impl();
  impl->shape = shape;
  impl->dtype = dtype;
  impl->id = internal::next_id();
  std::int64_t signed_bytes = 0;
  if (__builtin_mul_overflow(shape.num_elements(), static_cast<std::int64_t>(dtype_size(dtype)), &signed_bytes))
    throw ShapeError("Tensor: a " + std::string(dtype_name(dtype)) + " tensor of shape " + shape.to_string() +
                     " needs more than 2^63 bytes");
  const auto bytes = static_cast<std::size_t>(signed_bytes);
  if (bytes <= internal::TensorImpl::kInlineBytes) {
    impl->data = impl->inline_data;
    if (zeroed) std::memset(impl->inline_data, 0, internal::TensorImpl::kInlineBytes);
  } else if (zeroed) {
    impl->buffer = Buffer::allocate_zeroed(bytes);
    impl->data = impl->buffer->data();
  } else {
    impl->buffer = Buffer::allocate(bytes);
    impl->data = impl->buffer->data();
  }
  return Tensor(std::move(impl));
}

Tensor Tensor::empty(const Shape& shape, DType dtype) { return make(shape, dtype, false); }

Tensor Tensor::with_shape(const Shape& shape) const {
  const auto& me = impl();
  if (shape.num_elements() != me.shape.num_elements())
    throw std::invalid_argument("reshape: cannot reshape " + me.shape.to_string() + " (" +
                                std::to_string(me.shape.num_elements()) + " elements) to " +
                                shape.to_string());
  auto out = internal::make_impl();
  out->shape = shape;
  out->dtype = me.dtype;
  out->id = internal::next_id();
  if (me.buffer) {
    out->buffer = me.buffer;
    out->data = me.data;
  } else {
    std::memcpy(out->inline_data, me.inline_data, internal::TensorImpl::kInlineBytes);
    out->data = out->inline_data;
  }
  return Tensor(std::move(out));
}

Tensor Tensor::alias() const { return with_shape(shape()); }

Tensor Tensor::with_id(std::int64_t id) const {
  Tensor t = with_shape(shape());
  t.impl_->id = id;
  return t;
}

long Tensor::use_count() const {
  const auto& me = impl();
  long handles = impl_.use_count();
  if (handles > 1 || !me.buffer) return handles;
  return me.buffer.use_count();  // other tensors (reshapes, aliases) viewing the same elements
}

void Tensor::throw_type_mismatch(DType requested) const {
  throw std::invalid_argument(std::string("Tensor: requested element type ") + dtype_name(requested) +
                                " from a " + dtype_name(impl().dtype) + " tensor of shape " +
                                impl().shape.to_string());
}

namespace {
template <typename T>
Tensor make_scalar(T v) {
  Tensor t = Tensor::empty(Shape{}, dtype_of<T>());
  *t.mutable_data<T>() = v;
  return t;
}
double element_as_double(const Tensor& t, std::int64_t i) {
  return dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return static_cast<double>(static_cast<const T*>(t.raw_data())[i]);
  });
}
void write_double(DType dtype, void* data, std::int64_t i, double v) {
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    static_cast<T*>(data)[i] = static_cast<T>(v);
  });
}
}  // namespace

Tensor Tensor::from_number(double value) { return make_scalar<float>(static_cast<float>(value)); }
Tensor Tensor::from_number(float value) { return make_scalar<float>(value); }
Tensor Tensor::from_number(int value) { return make_scalar<std::int32_t>(value); }

namespace {
// Appends the leaves of `list` to `flat`, recording dimensions at `depth`; throws on ragged lists.
void flatten_nested(const std::vector<Tensor::NestedList>& list, std::size_t depth, std::vector<std::int64_t>& dims,
                    std::vector<double>& flat) {
  if (dims.size() <= depth) dims.push_back(static_cast<std::int64_t>(list.size()));
  if (dims[depth] != static_cast<std::int64_t>(list.size()))
    throw std::invalid_argument("Tensor: ragged nested list (lists of different lengths at depth " +
                                std::to_string(depth) + ")");
  for (const auto& item : list) {
    bool expect_leaf = dims.size() == depth + 1 && (item.leaf() || flat.empty());
    if (item.leaf()) {
      if (dims.size() != depth + 1) throw std::invalid_argument("Tensor: ragged nested list (mixed depths)");
      flat.push_back(item.value());
    } else {
      if (expect_leaf && !flat.empty()) throw std::invalid_argument("Tensor: ragged nested list (mixed depths)");
      flatten_nested(item.items(), depth + 1, dims, flat);
    }
  }
}
}  // namespace

Tensor::Tensor(std::initializer_list<NestedList> values) {
  std::vector<std::int64_t> dims;
  std::vector<double> flat;
  flatten_nested(std::vector<NestedList>(values), 0, dims, flat);
  Shape shape(dims);
  if (shape.num_elements() != static_cast<std::int64_t>(flat.size()))
    throw std::invalid_argument("Tensor: ragged nested list");
  *this = constant(flat, shape, DType::kFloat32);
}

double Tensor::item() const {
  if (num_elements() != 1)
    throw std::invalid_argument("Tensor::item: expected one element, got shape " + shape().to_string());
  return element_as_double(*this, 0);
}

double Tensor::at(std::initializer_list<std::int64_t> index) const {
  if (static_cast<int>(index.size()) != rank())
    throw std::out_of_range("Tensor::at: index of rank " + std::to_string(index.size()) +
                            " for shape " + shape().to_string());
  auto strides = shape().strides();
  std::int64_t flat = 0;
  int d = 0;
  for (auto i : index) {
    if (i < 0 || i >= shape()[d])
      throw std::out_of_range("Tensor::at: index " + std::to_string(i) + " out of range for axis " +
                              std::to_string(d) + " of shape " + shape().to_string());
    flat += i * strides[d++];
  }
  return element_as_double(*this, flat);
}

// ---- printing ----
namespace {
std::string format_element(const Tensor& t, std::int64_t i) {
  switch (t.dtype()) {
    case DType::kBool: return static_cast<const bool*>(t.raw_data())[i] ? "True" : "False";
    case DType::kInt32: return std::to_string(static_cast<const std::int32_t*>(t.raw_data())[i]);
    case DType::kInt64: return std::to_string(static_cast<const std::int64_t*>(t.raw_data())[i]);
    default: break;
  }
  char buf[64];
  std::to_chars_result r;
  if (t.dtype() == DType::kFloat32)
    r = std::to_chars(buf, buf + sizeof buf, static_cast<const float*>(t.raw_data())[i]);
  else
    r = std::to_chars(buf, buf + sizeof buf, static_cast<const double*>(t.raw_data())[i]);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eni") == std::string::npos) s += ".0";  // Python prints 6.0, not 6
  return s;
}
void format_rec(const Tensor& t, int axis, std::int64_t& flat, std::string& out) {
  if (axis == t.rank()) {
    out += format_element(t, flat++);
    return;
  }
  out += "[";
  for (std::int64_t i = 0; i < t.shape()[axis]; ++i) {
    if (i && axis + 1 == t.rank()) {
      out += ' ';
    } else if (i) {  // appended piecewise: "\n" + std::string(n, ' ') trips GCC 12's -Wrestrict false positive
      // NumPy: one line break between rows, one more per axis above them (a blank line between
      // the matrices of a rank-3 tensor).
      out.append(static_cast<std::size_t>(t.rank() - axis - 1), '\n');
      out.append(static_cast<std::size_t>(axis + 1), ' ');
    }
    format_rec(t, axis + 1, flat, out);
  }
  out += "]";
}
}  // namespace

std::string Tensor::values_string() const {
  std::string out;
  std::int64_t flat = 0;
  format_rec(*this, 0, flat, out);
  return out;
}

std::string Tensor::to_string() const {
  if (!defined()) return "tf.Tensor(<undefined>)";
  return "tf.Tensor(" + values_string() + ", shape=" + shape().to_tf_string() + ", dtype=" +
         dtype_name(dtype()) + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

// ---- creation ----
Tensor scalar(double value, DType dtype) {
  Tensor t = Tensor::empty(Shape{}, dtype);
  write_double(dtype, t.mutable_raw_data(), 0, value);
  return t;
}

Tensor constant(const std::vector<double>& values, const Shape& shape, DType dtype) {
  if (static_cast<std::int64_t>(values.size()) != shape.num_elements())
    throw std::invalid_argument("constant: " + std::to_string(values.size()) +
                                " values do not fill shape " + shape.to_string());
  Tensor t = Tensor::empty(shape, dtype);
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.mutable_data<T>();
    for (std::size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(values[i]);
  });
  return t;
}

Tensor convert(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  Tensor out = Tensor::empty(t.shape(), dtype);
  dispatch_dtype(t.dtype(), [&](auto from_tag) {
    using F = decltype(from_tag);
    dispatch_dtype(dtype, [&](auto to_tag) {
      using T = decltype(to_tag);
      const F* src = t.data<F>();
      T* dst = out.mutable_data<T>();
      for (std::int64_t i = 0, n = t.num_elements(); i < n; ++i) dst[i] = static_cast<T>(src[i]);
    });
  });
  return out;
}

Tensor fill(const Shape& shape, double value, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.mutable_data<T>();
    T v = static_cast<T>(value);
    for (std::int64_t i = 0, n = shape.num_elements(); i < n; ++i) p[i] = v;
  });
  return t;
}
Tensor zeros(const Shape& shape, DType dtype) { return Tensor::make(shape, dtype, true); }
Tensor ones(const Shape& shape, DType dtype) { return fill(shape, 1.0, dtype); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype()); }

Tensor eye(std::int64_t n, std::int64_t m, DType dtype) {
  if (m < 0) m = n;
  Tensor t = zeros(Shape{n, m}, dtype);
  for (std::int64_t i = 0; i < std::min(n, m); ++i) write_double(dtype, t.mutable_raw_data(), i * m + i, 1.0);
  return t;
}

Tensor linspace(double start, double stop, std::int64_t num, DType dtype) {
  if (num <= 0) throw std::invalid_argument("linspace: num must be positive, got " + std::to_string(num));
  Tensor t = Tensor::empty(Shape{num}, dtype);
  double step = num > 1 ? (stop - start) / static_cast<double>(num - 1) : 0.0;
  for (std::int64_t i = 0; i < num; ++i)
    write_double(dtype, t.mutable_raw_data(), i, i + 1 == num && num > 1 ? stop : start + step * i);
  return t;
}

Tensor range(double start, double limit, double delta, DType dtype) {
  if (delta == 0) throw std::invalid_argument("range: delta must not be zero");
  double count = std::ceil((limit - start) / delta);
  std::int64_t n = count > 0 ? static_cast<std::int64_t>(count) : 0;
  Tensor t = Tensor::empty(Shape{n}, dtype);
  for (std::int64_t i = 0; i < n; ++i) write_double(dtype, t.mutable_raw_data(), i, start + delta * i);
  return t;
}

}  // namespace tapeflow
