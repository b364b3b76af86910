#include "models/export/internal/onnx_graph.h"

#include <stdexcept>

namespace tapeflow::models::onnx_export {

namespace {

constexpr std::int64_t kToNchw[4] = {0, 3, 1, 2};
constexpr int kNhwcAxisInNchw[4] = {0, 2, 3, 1};

void set_shape(onnx::ValueInfoProto* info, const std::vector<std::int64_t>& dims) {
  auto* type = info->mutable_type()->mutable_tensor_type();
  type->set_elem_type(onnx::TensorProto::FLOAT);
  auto* shape = type->mutable_shape();
  shape->add_dim()->set_dim_param("batch");
  for (std::int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

}  // namespace

int axis_in_layout(const Value& v, int axis) {
  return v.layout == Layout::kNchw ? kNhwcAxisInNchw[axis] : axis;
}

std::string Graph::fresh(const std::string& base) {
  std::string name = base;
  for (int i = 1; names_.count(name); ++i) name = base + "_" + std::to_string(i);
  names_.insert(name);
  return name;
}

onnx::NodeProto* Graph::node(const std::string& op, const std::vector<std::string>& inputs,
                             const std::vector<std::string>& outputs, const std::string& node_name) {
  onnx::NodeProto* n = graph_->add_node();
  n->set_op_type(op);
  n->set_name(node_name);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return n;
}

std::string Graph::initializer(const std::string& name, const Tensor& t, const std::vector<std::int64_t>& dims) {
  std::int64_t count = 1;
  for (std::int64_t d : dims) count *= d;
  if (t.dtype() != DType::kFloat32 || t.num_elements() != count)
    throw std::logic_error("export_onnx: initializer '" + name + "' does not fit its dims");
  onnx::TensorProto* p = graph_->add_initializer();
  const std::string n = fresh(name);
  p->set_name(n);
  p->set_data_type(onnx::TensorProto::FLOAT);
  for (std::int64_t d : dims) p->add_dims(d);
  p->set_raw_data(std::string(static_cast<const char*>(t.raw_data()), t.nbytes()));  // little-endian float32
  return n;
}

std::string Graph::initializer_floats(const std::string& name, const std::vector<float>& values,
                                      const std::vector<std::int64_t>& dims) {
  return initializer(name, constant(values, Shape(dims)), dims);
}

std::string Graph::initializer_ints(const std::string& name, const std::vector<std::int64_t>& values) {
  onnx::TensorProto* p = graph_->add_initializer();
  const std::string n = fresh(name);
  p->set_name(n);
  p->set_data_type(onnx::TensorProto::INT64);
  p->add_dims(static_cast<std::int64_t>(values.size()));
  for (std::int64_t v : values) p->add_int64_data(v);
  return n;
}

Value Graph::nchw(const Value& v) {
  if (v.layout == Layout::kNchw) return v;
  if (v.rank() != 4) throw std::logic_error("export_onnx: NCHW needs a rank-4 value, '" + v.name + "' is not");
  auto it = to_nchw_.find(v.name);
  if (it == to_nchw_.end()) {
    const std::string out = fresh(v.name + "/nchw");
    set_ints(node("Transpose", {v.name}, {out}, out), "perm", {kToNchw, kToNchw + 4});
    it = to_nchw_.emplace(v.name, out).first;
    to_keras_[out] = v.name;
  }
  return {it->second, v.dims, Layout::kNchw};
}

Value Graph::keras(const Value& v) {
  if (v.layout == Layout::kKeras) return v;
  auto it = to_keras_.find(v.name);
  if (it == to_keras_.end()) {
    const std::string out = fresh(v.name + "/nhwc");
    set_ints(node("Transpose", {v.name}, {out}, out), "perm", {0, 2, 3, 1});
    it = to_keras_.emplace(v.name, out).first;
    to_nchw_[out] = v.name;
  }
  return {it->second, v.dims, Layout::kKeras};
}

std::vector<Value> Graph::common_layout(const std::vector<Value>& vs) {
  bool any_nchw = false, all_rank4 = true;
  for (const Value& v : vs) {
    any_nchw = any_nchw || v.layout == Layout::kNchw;
    all_rank4 = all_rank4 && v.rank() == 4;
  }
  std::vector<Value> out;
  for (const Value& v : vs) out.push_back(any_nchw && all_rank4 ? nchw(v) : keras(v));
  return out;
}

void Graph::input(const std::string& name, const std::vector<std::int64_t>& dims) {
  names_.insert(name);
  set_shape(graph_->add_input(), dims);
  graph_->mutable_input(graph_->input_size() - 1)->set_name(name);
}

void Graph::output(const Value& v, const std::string& name) {
  const Value k = keras(v);
  const std::string out = fresh(name);
  node("Identity", {k.name}, {out}, out);
  onnx::ValueInfoProto* info = graph_->add_output();
  info->set_name(out);
  set_shape(info, v.dims);
}

void set_ints(onnx::NodeProto* n, const std::string& attr, const std::vector<std::int64_t>& values) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(attr);
  a->set_type(onnx::AttributeProto::INTS);
  for (std::int64_t v : values) a->add_ints(v);
}

void set_int(onnx::NodeProto* n, const std::string& attr, std::int64_t value) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(attr);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

void set_float(onnx::NodeProto* n, const std::string& attr, float value) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(attr);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(value);
}

void set_string(onnx::NodeProto* n, const std::string& attr, const std::string& value) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(attr);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(value);
}

}  // namespace tapeflow::models::onnx_export
