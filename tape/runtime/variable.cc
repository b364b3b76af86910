#include "tape/runtime/variable.h"

#include <cstring>
#include <sstream>
#include <stdexcept>

#include "tape/runtime/internal/recorder_stack.h"
#include "tape/runtime/op_registry.h"
#include "tape/runtime/recorder.h"

namespace tapeflow {

struct Variable::Impl {
  std::string name;
  bool trainable = true;
  std::int64_t handle_id = 0;
  Tensor value;
};

Variable::Variable(const Tensor& initial_value, VariableOptions options) : impl_(std::make_shared<Impl>()) {
  if (!initial_value.defined()) throw std::invalid_argument("Variable: undefined initial value");
  impl_->name = std::move(options.name);
  impl_->trainable = options.trainable;
  impl_->handle_id = internal::next_id();
  // Own a private copy so later writes never alias the caller's tensor.
  Tensor v = options.dtype ? convert(initial_value, *options.dtype) : initial_value;
  Tensor own = Tensor::empty(v.shape(), v.dtype());
  if (v.nbytes()) std::memcpy(own.mutable_raw_data(), v.raw_data(), v.nbytes());
  impl_->value = own;
}

const Variable::Impl& Variable::impl() const {
  if (!impl_) throw std::logic_error("Variable: use of an undefined (default-constructed) variable");
  return *impl_;
}

const std::string& Variable::name() const { return impl().name; }
bool Variable::trainable() const { return impl().trainable; }
void Variable::set_trainable(bool trainable) {
  impl();
  impl_->trainable = trainable;
}
std::int64_t Variable::handle_id() const { return impl().handle_id; }
Tensor Variable::value() const { return impl().value; }

Tensor Variable::read() const {
  const Impl& me = impl();
  const auto& recorders = internal::active_recorders();
  if (recorders.empty()) return me.value;
  bool tracked = false;
  for (std::size_t i = 0; i < recorders.size(); ++i) {
    recorders[i]->variable_accessed(*this);
    tracked = tracked || recorders[i]->tracks(me.handle_id);
  }
  if (!tracked) return me.value;
  static const OpDef& kRead = op_def("ReadVariableOp");
  Tensor handle = me.value.with_id(me.handle_id);
  Tensor out = me.value.alias();
  static const std::shared_ptr<const GradientFn> kNoCustom;
  for (std::size_t i = 0; i < recorders.size(); ++i)
    recorders[i]->record(kRead, std::span<const Tensor>(&handle, 1), std::span<const Tensor>(&out, 1), Attrs{}, kNoCustom);
  return out;
}

namespace {
void check_compatible(const Variable& v, const Tensor& t, const char* what) {
  if (t.shape() != v.shape() || t.dtype() != v.dtype())
    throw std::invalid_argument(std::string(what) + ": variable '" + v.name() + "' has shape " +
                                v.shape().to_string() + " dtype " + dtype_name(v.dtype()) + ", got shape " +
                                t.shape().to_string() + " dtype " + dtype_name(t.dtype()));
}
}  // namespace

void* Variable::mutable_raw_data_for_update() const {
  impl();
  Tensor& v = impl_->value;
  if (v.use_count() > 1) {  // shared with live tensors: copy on write
    Tensor own = Tensor::empty(v.shape(), v.dtype());
    if (v.nbytes()) std::memcpy(own.mutable_raw_data(), v.raw_data(), v.nbytes());
    v = own;
  }
  return v.mutable_raw_data();
}

void Variable::assign_shared(const Tensor& value) const {
  check_compatible(*this, value, "assign_shared");
  impl();
  impl_->value = value;
}

void Variable::assign(const Tensor& value) const {
  check_compatible(*this, value, "assign");
  void* dst = mutable_raw_data_for_update();
  if (value.nbytes()) std::memmove(dst, value.raw_data(), value.nbytes());
}

namespace {
void update(const Variable& v, const Tensor& delta, double sign, const char* what) {
  check_compatible(v, delta, what);
  void* dst = v.mutable_raw_data_for_update();
  dispatch_dtype(v.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      throw std::invalid_argument(std::string(what) + ": not supported for bool variable '" + v.name() + "'");
    } else {
      T* p = static_cast<T*>(dst);
      const T* d = delta.data<T>();
      for (std::int64_t i = 0, n = delta.num_elements(); i < n; ++i) p[i] = static_cast<T>(p[i] + sign * d[i]);
    }
  });
}
}  // namespace

void Variable::assign_add(const Tensor& delta) const { update(*this, delta, 1.0, "assign_add"); }
void Variable::assign_sub(const Tensor& delta) const { update(*this, delta, -1.0, "assign_sub"); }

std::string Variable::to_string() const {
  const Impl& me = impl();
  return "<tf.Variable '" + me.name + ":0' shape=" + me.value.shape().to_tf_string() + " dtype=" +
         dtype_name(me.value.dtype()) + ", numpy=" + me.value.values_string() + ">";
}

std::ostream& operator<<(std::ostream& os, const Variable& v) { return os << v.to_string(); }

}  // namespace tapeflow
