#include "models/export/internal/onnx_graph.h"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace tapeflow::models::onnx_export {

namespace {

// Keras layout -> channels first and back, by rank (4: NHWC <-> NCHW, 3: NWC <-> NCW).
std::vector<std::int64_t> to_channels_first(int rank) {
  return rank == 4 ? std::vector<std::int64_t>{0, 3, 1, 2} : std::vector<std::int64_t>{0, 2, 1};
}
std::vector<std::int64_t> to_channels_last(int rank) {
  return rank == 4 ? std::vector<std::int64_t>{0, 2, 3, 1} : std::vector<std::int64_t>{0, 2, 1};
}

void set_shape(onnx::ValueInfoProto* info, const std::vector<std::int64_t>& dims,
               std::int32_t elem_type = onnx::TensorProto::FLOAT) {
  auto* type = info->mutable_type()->mutable_tensor_type();
  type->set_elem_type(elem_type);
  auto* shape = type->mutable_shape();
  shape->add_dim()->set_dim_param("batch");
  for (std::int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

}  // namespace

int axis_in_layout(const Value& v, int axis) {
  if (v.layout == Layout::kKeras) return axis;
  return static_cast<int>(to_channels_last(v.rank())[axis]);  // Keras axis a sits at position perm[a]
}

std::pair<std::int64_t, std::int64_t> tf_pads(std::int64_t in, std::int64_t out, std::int64_t s, std::int64_t eff,
                                              bool same) {
  if (!same) return {0, 0};
  const std::int64_t total = std::max<std::int64_t>((out - 1) * s + eff - in, 0);
  return {total / 2, total - total / 2};
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

std::string Graph::initializer_scalar(const std::string& name, std::int64_t value) {
  onnx::TensorProto* p = graph_->add_initializer();
  const std::string n = fresh(name);
  p->set_name(n);
  p->set_data_type(onnx::TensorProto::INT64);
  p->add_int64_data(value);
  return n;
}

Value Graph::nchw(const Value& v) {
  if (v.layout == Layout::kNchw) return v;
  if (v.rank() != 4 && v.rank() != 3)
    throw std::logic_error("export_onnx: channels first needs a rank-3 or rank-4 value, '" + v.name + "' is not");
  auto it = to_nchw_.find(v.name);
  if (it == to_nchw_.end()) {
    const std::string out = fresh(v.name + (v.rank() == 4 ? "/nchw" : "/ncw"));
    set_ints(node("Transpose", {v.name}, {out}, out), "perm", to_channels_first(v.rank()));
    it = to_nchw_.emplace(v.name, out).first;
    to_keras_[out] = v.name;
  }
  return {it->second, v.dims, Layout::kNchw, v.elem_type, v.mask_from};
}

Value Graph::keras(const Value& v) {
  if (v.layout == Layout::kKeras) return v;
  auto it = to_keras_.find(v.name);
  if (it == to_keras_.end()) {
    const std::string out = fresh(v.name + (v.rank() == 4 ? "/nhwc" : "/nwc"));
    set_ints(node("Transpose", {v.name}, {out}, out), "perm", to_channels_last(v.rank()));
    it = to_keras_.emplace(v.name, out).first;
    to_nchw_[out] = v.name;
  }
  return {it->second, v.dims, Layout::kKeras, v.elem_type, v.mask_from};
}

std::vector<Value> Graph::common_layout(const std::vector<Value>& vs) {
  bool any_nchw = false, one_rank = !vs.empty() && (vs[0].rank() == 3 || vs[0].rank() == 4);
  for (const Value& v : vs) {
    any_nchw = any_nchw || v.layout == Layout::kNchw;
    one_rank = one_rank && v.rank() == vs[0].rank();
  }
  std::vector<Value> out;
  for (const Value& v : vs) out.push_back(any_nchw && one_rank ? nchw(v) : keras(v));
  return out;
}

void Graph::input(const std::string& name, const std::vector<std::int64_t>& dims, std::int32_t elem_type) {
  names_.insert(name);
  set_shape(graph_->add_input(), dims, elem_type);
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

void fail(const std::string& file, const layers::Layer& layer, const std::string& problem) {
  throw std::invalid_argument("export_onnx: " + file + ": layer '" + layer.name() + "' (" + layer.class_name() +
                              ") cannot be exported to ONNX: " + problem);
}

Tensor layer_weight(const std::string& file, const layers::Layer& layer, const std::string& name) {
  const std::string suffix = "/" + name + ":0";
  for (const Variable& v : layer.variables()) {
    const std::string& n = v.name();
    if (n.size() >= suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
      if (v.dtype() != DType::kFloat32)
        fail(file, layer, "weight '" + n + "' is " + dtype_name(v.dtype()) + "; the export writes float32 models");
      return v.value();
    }
  }
  fail(file, layer, "it has no weight '" + name + "' (is it built?)");
}

Value activation(Graph& g, const std::string& file, const layers::Layer& layer, const std::string& name,
                 const Value& x, const std::string& base) {
  if (name.empty() || name == "linear") return x;
  if (name == "gelu") {  // exact (Keras's approximate=False): 0.5 x (1 + erf(x / sqrt(2))); Gelu is opset 20
    const std::string scaled = g.fresh(base + "/gelu_scaled"), e = g.fresh(base + "/gelu_erf"),
                      one = g.fresh(base + "/gelu_1p"), xe = g.fresh(base + "/gelu_x"), out = g.fresh(base);
    g.node("Mul", {x.name, g.initializer_floats(base + "/inv_sqrt2", {0.70710678118654752f}, {})}, {scaled}, scaled);
    g.node("Erf", {scaled}, {e}, e);
    g.node("Add", {e, g.initializer_floats(base + "/one", {1.0f}, {})}, {one}, one);
    g.node("Mul", {x.name, one}, {xe}, xe);
    g.node("Mul", {xe, g.initializer_floats(base + "/half", {0.5f}, {})}, {out}, out);
    return {out, x.dims, x.layout};
  }
  static const std::map<std::string, std::string> ops = {{"relu", "Relu"},       {"sigmoid", "Sigmoid"},
                                                         {"tanh", "Tanh"},       {"softmax", "Softmax"},
                                                         {"elu", "Elu"},         {"leaky_relu", "LeakyRelu"},
                                                         {"softplus", "Softplus"}, {"hard_sigmoid", "HardSigmoid"}};  // gelu: above
  auto it = ops.find(name);
  if (it == ops.end()) fail(file, layer, "activation '" + name + "' has no ONNX mapping");
  const std::string out = g.fresh(base);
  auto* n = g.node(it->second, {x.name}, {out}, out);
  if (name == "softmax") set_int(n, "axis", axis_in_layout(x, x.rank() - 1));
  if (name == "elu") set_float(n, "alpha", 1.0f);
  if (name == "leaky_relu") set_float(n, "alpha", 0.2f);  // keras.activations.leaky_relu
  if (name == "hard_sigmoid") {  // Keras 3: relu6(x + 3) / 6 = max(0, min(1, x / 6 + 1 / 2))
    set_float(n, "alpha", 1.0f / 6.0f);
    set_float(n, "beta", 0.5f);
  }
  return {out, x.dims, x.layout};
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
