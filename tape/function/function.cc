#include "tape/function/function.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "tape/autodiff/gradient_tape.h"
#include "tape/runtime/execute.h"
#include "tape/runtime/internal/recorder_stack.h"
#include "tape/runtime/logging.h"
#include "tape/runtime/op_registry.h"
#include "tape/runtime/recorder.h"

namespace tapeflow {
namespace {

void check_name(const std::string& name) {
  bool ok = !name.empty();
  for (char c : name)
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
                c == '-');
  if (!ok) throw std::invalid_argument("function: bad name '" + name + "' (allowed: [A-Za-z0-9_.-], non-empty)");
}

// Records every op executed on this thread into a FunctionGraph.
class Tracer : public Recorder {
 public:
  explicit Tracer(FunctionGraph& graph) : graph_(graph) {}

  ValueRef add_placeholder(FunctionNode::Kind kind, int position, const Tensor& t) {
    FunctionNode n;
    n.kind = kind;
    n.position = position;
    graph_.nodes.push_back(std::move(n));
    ValueRef ref{static_cast<int>(graph_.nodes.size()) - 1, 0};
    values_[t.id()] = ref;
    return ref;
  }

  // The node producing `t`; unknown tensors become constants.
  ValueRef ref_of(const Tensor& t) {
    auto it = values_.find(t.id());
    if (it != values_.end()) return it->second;
    FunctionNode n;
    n.kind = FunctionNode::Kind::kConstant;
    n.position = static_cast<int>(graph_.constants.size());
    graph_.constants.push_back(t);
    graph_.nodes.push_back(std::move(n));
    ValueRef ref{static_cast<int>(graph_.nodes.size()) - 1, 0};
    values_[t.id()] = ref;
    return ref;
  }

  void record(const OpDef& op, std::span<const Tensor> inputs, std::span<const Tensor> outputs, const Attrs& attrs,
              const std::shared_ptr<const GradientFn>& custom_gradient) override {
    if (custom_gradient)
      throw std::invalid_argument("function '" + graph_.name +
                                  "': cannot trace a custom_gradient call inside trace(); trace the custom-gradient "
                                  "function itself with trace_custom_gradient");
    if (OpRegistry::global().find(op.name) != &op)
      throw std::invalid_argument("function '" + graph_.name + "': op '" + op.name + "' is not in the op registry");
    FunctionNode n;
    n.kind = FunctionNode::Kind::kOp;
    n.op = op.name;
    n.attrs = attrs;
    n.num_outputs = static_cast<int>(outputs.size());
    for (const Tensor& t : inputs) n.inputs.push_back(ref_of(t));
    graph_.nodes.push_back(std::move(n));
    const int node = static_cast<int>(graph_.nodes.size()) - 1;
    for (std::size_t i = 0; i < outputs.size(); ++i) values_[outputs[i].id()] = ValueRef{node, static_cast<int>(i)};
  }
  void variable_accessed(const Variable&) override {}
  bool tracks(std::int64_t) const override { return false; }  // variables are captured by value

 private:
  FunctionGraph& graph_;
  std::unordered_map<std::int64_t, ValueRef> values_;
};

// Pushes a tracer on this thread's recorder stack for a scope.
class TracerScope {
 public:
  explicit TracerScope(Tracer* t) : tracer_(t) { internal::push_recorder(t); }
  ~TracerScope() { internal::remove_recorder(tracer_); }
  TracerScope(const TracerScope&) = delete;
  TracerScope& operator=(const TracerScope&) = delete;

 private:
  Tracer* tracer_;
};

std::vector<Tensor> fresh_inputs(FunctionGraph& g, Tracer& tracer, const std::vector<Tensor>& examples) {
  std::vector<Tensor> in;
  for (std::size_t i = 0; i < examples.size(); ++i) {
    in.push_back(examples[i].alias());
    g.input_specs.push_back({examples[i].shape(), examples[i].dtype()});
    tracer.add_placeholder(FunctionNode::Kind::kInput, static_cast<int>(i), in.back());
  }
  return in;
}

void set_outputs(FunctionGraph& g, Tracer& tracer, const std::vector<Tensor>& ys) {
  for (const Tensor& y : ys) {
    if (!y.defined()) throw std::invalid_argument("function '" + g.name + "': an output is undefined");
    g.outputs.push_back(tracer.ref_of(y));
    g.output_specs.push_back({y.shape(), y.dtype()});
  }
}

void check_args(const FunctionGraph& g, const std::vector<TensorSpec>& specs, const std::vector<Tensor>& xs,
                const char* what) {
  if (xs.size() != specs.size())
    throw std::invalid_argument("function '" + g.name + "': expected " + std::to_string(specs.size()) + " " + what +
                                ", got " + std::to_string(xs.size()));
  for (std::size_t i = 0; i < xs.size(); ++i)
    if (!xs[i].defined() || xs[i].shape() != specs[i].shape || xs[i].dtype() != specs[i].dtype)
      throw std::invalid_argument("function '" + g.name + "': " + what + " " + std::to_string(i) + " must be " +
                                  specs[i].shape.to_string() + " " + dtype_name(specs[i].dtype) + ", got " +
                                  (xs[i].defined() ? xs[i].shape().to_string() + " " + dtype_name(xs[i].dtype())
                                                   : std::string("undefined")));
}

}  // namespace

FunctionGraph trace(const std::string& name, const TracedFn& fn, const std::vector<Tensor>& example_inputs) {
  check_name(name);
  FunctionGraph g;
  g.name = name;
  Tracer tracer(g);
  std::vector<Tensor> ys;
  {
    TracerScope scope(&tracer);
    ys = fn(fresh_inputs(g, tracer, example_inputs));
  }
  set_outputs(g, tracer, ys);
  return g;
}

FunctionGraph trace_custom_gradient(const std::string& name, const CustomForwardFn& forward,
                                    const std::vector<Tensor>& example_inputs) {
  check_name(name);
  FunctionGraph g;
  g.name = name;
  Tracer tracer(g);
  TracerScope scope(&tracer);
  auto [ys, grad_fn] = forward(fresh_inputs(g, tracer, example_inputs));
  if (!grad_fn) throw std::invalid_argument("function '" + name + "': the forward returned no gradient function");
  set_outputs(g, tracer, ys);
  std::vector<Tensor> upstream;
  for (std::size_t i = 0; i < ys.size(); ++i) {
    Tensor one = ones(ys[i].shape(), ys[i].dtype());
    upstream.push_back(one.alias());
    tracer.add_placeholder(FunctionNode::Kind::kUpstream, static_cast<int>(i), upstream.back());
  }
  std::vector<Tensor> dx = grad_fn(upstream);
  if (dx.size() != example_inputs.size())
    throw std::invalid_argument("function '" + name + "': gradient function returned " + std::to_string(dx.size()) +
                                " gradients for " + std::to_string(example_inputs.size()) + " inputs");
  for (const Tensor& d : dx) g.gradient_outputs.push_back(d.defined() ? std::optional(tracer.ref_of(d)) : std::nullopt);
  g.has_gradient = true;
  return g;
}

std::vector<Tensor> FunctionGraph::run(const std::vector<ValueRef>& wanted, const std::vector<Tensor>& inputs,
                                       const std::vector<Tensor>* upstream) const {
  // Only the nodes the wanted values depend on run (the gradient section is skipped by call()).
  std::vector<char> needed(nodes.size(), 0);
  for (const ValueRef& r : wanted) needed[static_cast<std::size_t>(r.node)] = 1;
  for (std::size_t i = nodes.size(); i-- > 0;)
    if (needed[i])
      for (const ValueRef& r : nodes[i].inputs) needed[static_cast<std::size_t>(r.node)] = 1;
  std::vector<std::vector<Tensor>> values(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (!needed[i]) continue;
    const FunctionNode& n = nodes[i];
    switch (n.kind) {
      case FunctionNode::Kind::kInput: values[i] = {inputs[static_cast<std::size_t>(n.position)]}; break;
      case FunctionNode::Kind::kUpstream:
        if (upstream == nullptr) throw std::logic_error("function '" + name + "': forward needs an upstream gradient");
        values[i] = {(*upstream)[static_cast<std::size_t>(n.position)]};
        break;
      case FunctionNode::Kind::kConstant: values[i] = {constants[static_cast<std::size_t>(n.position)]}; break;
      case FunctionNode::Kind::kOp: {
        std::vector<Tensor> in;
        for (const ValueRef& r : n.inputs) in.push_back(values[static_cast<std::size_t>(r.node)][static_cast<std::size_t>(r.index)]);
        TensorList out = execute(op_def(n.op), in, n.attrs);
        if (static_cast<int>(out.size()) != n.num_outputs)
          throw std::runtime_error("function '" + name + "': op '" + n.op + "' gave " + std::to_string(out.size()) +
                                   " outputs, the trace had " + std::to_string(n.num_outputs));
        values[i].assign(out.begin(), out.end());
        break;
      }
    }
  }
  std::vector<Tensor> result;
  for (const ValueRef& r : wanted) result.push_back(values[static_cast<std::size_t>(r.node)][static_cast<std::size_t>(r.index)]);
  return result;
}

std::vector<Tensor> FunctionGraph::call(const std::vector<Tensor>& inputs) const {
  check_args(*this, input_specs, inputs, "input");
  return run(outputs, inputs, nullptr);
}

std::vector<Tensor> FunctionGraph::gradient(const std::vector<Tensor>& inputs, const std::vector<Tensor>& upstream) const {
  if (!has_gradient) throw std::logic_error("function '" + name + "': no gradient was traced");
  check_args(*this, input_specs, inputs, "input");
  check_args(*this, output_specs, upstream, "upstream gradient");
  std::vector<ValueRef> wanted;
  for (const auto& r : gradient_outputs)
    if (r) wanted.push_back(*r);
  std::vector<Tensor> got = run(wanted, inputs, &upstream);
  std::vector<Tensor> result;
  std::size_t k = 0;
  for (const auto& r : gradient_outputs) result.push_back(r ? got[k++] : Tensor());
  return result;
}

namespace {

struct Registered {
  std::mutex mutex;
  std::shared_ptr<const FunctionGraph> graph;
  bool logged_fallback = false;
};

std::map<std::string, std::shared_ptr<Registered>>& registered_functions() {
  static std::map<std::string, std::shared_ptr<Registered>> table;
  return table;
}
std::mutex& registered_mutex() {
  static std::mutex m;
  return m;
}

std::shared_ptr<const FunctionGraph> current(const std::shared_ptr<Registered>& r) {
  std::lock_guard lock(r->mutex);
  return r->graph;
}

TensorList run_forward(const std::shared_ptr<Registered>& r, std::span<const Tensor> in) {
  auto g = current(r);
  std::vector<Tensor> ys;
  {
    RecordingPause pause;  // the function op is recorded as one call; its inner ops are not
    ys = g->call(std::vector<Tensor>(in.begin(), in.end()));
  }
  TensorList out;
  for (const Tensor& y : ys) out.push_back(y.alias());
  return out;
}

TensorList run_gradient(const std::shared_ptr<Registered>& r, const GradContext& ctx, std::span<const Tensor> up) {
  auto g = current(r);
  std::vector<Tensor> x;
  for (int i = 0; i < ctx.num_inputs(); ++i) x.push_back(ctx.input(i));
  std::vector<Tensor> upstream(up.begin(), up.end());
  std::vector<Tensor> dx;
  if (g->has_gradient) {
    dx = g->gradient(x, upstream);
  } else {
    // Fallback: differentiate the traced forward graph (recorded on enclosing tapes too).
    GradientTape tape;
    std::vector<Source> sources;
    for (const Tensor& t : x) {
      tape.watch(t);
      sources.push_back(t);
    }
    std::vector<Tensor> ys = g->call(x);
    auto grads = tape.gradient(ys, sources, {.output_gradients = upstream});
    for (auto& d : grads) dx.push_back(d ? *d : Tensor());
  }
  return TensorList(dx.begin(), dx.end());
}

}  // namespace

namespace {

constexpr const char* kFunctionPrefix = "Function:";

// Names of the functions `g` calls directly (its "Function:<name>" ops).
std::vector<std::string> callees(const FunctionGraph& g) {
  std::vector<std::string> out;
  const std::string prefix = kFunctionPrefix;
  for (const FunctionNode& n : g.nodes)
    if (n.kind == FunctionNode::Kind::kOp && n.op.rfind(prefix, 0) == 0) out.push_back(n.op.substr(prefix.size()));
  return out;
}

// Throws if, with `pending` replacing the registered graphs of the same names, some function calls
// itself directly or through others: every call would recurse until the stack overflows.
// Caller holds registered_mutex().
void check_no_call_cycles(const std::vector<const FunctionGraph*>& pending) {
  std::map<std::string, const FunctionGraph*> graphs;
  std::vector<std::shared_ptr<const FunctionGraph>> keep;  // registered graphs looked at
  for (const auto& [name, entry] : registered_functions()) {
    keep.push_back(current(entry));
    graphs[name] = keep.back().get();
  }
  for (const FunctionGraph* g : pending) graphs[g->name] = g;
  // Depth-first search with colours; the path names the cycle in the error.
  std::map<std::string, int> colour;  // 0 new, 1 on the path, 2 done
  std::vector<std::string> path;
  std::function<void(const std::string&)> visit = [&](const std::string& name) {
    colour[name] = 1;
    path.push_back(name);
    auto it = graphs.find(name);
    if (it != graphs.end())
      for (const std::string& callee : callees(*it->second)) {
        if (colour[callee] == 1) {
          std::string cycle;
          for (auto p = std::find(path.begin(), path.end(), callee); p != path.end(); ++p) cycle += *p + " -> ";
          throw std::invalid_argument("register_function: function '" + callee +
                                      "' would call itself (" + cycle + callee + "); recursive functions are refused");
        }
        if (colour[callee] == 0) visit(callee);
      }
    path.pop_back();
    colour[name] = 2;
  };
  for (const FunctionGraph* g : pending)
    if (colour[g->name] == 0) visit(g->name);
}

}  // namespace

TracedFn register_function(FunctionGraph graph) {
  std::vector<FunctionGraph> one;
  one.push_back(std::move(graph));
  return register_functions(std::move(one)).front();
}

std::vector<TracedFn> register_functions(std::vector<FunctionGraph> graphs) {
  std::vector<const FunctionGraph*> pending;
  for (const FunctionGraph& g : graphs) {
    check_name(g.name);
    for (const FunctionGraph* p : pending)
      if (p->name == g.name) throw std::invalid_argument("register_functions: function '" + g.name + "' given twice");
    pending.push_back(&g);
  }
  std::lock_guard lock(registered_mutex());
  check_no_call_cycles(pending);  // before anything changes
  std::vector<TracedFn> out;
  auto& table = registered_functions();
  for (FunctionGraph& graph : graphs) {
    const std::string name = graph.name;
    const bool has_gradient = graph.has_gradient;
    auto shared = std::make_shared<const FunctionGraph>(std::move(graph));
    std::shared_ptr<Registered> entry;
    auto it = table.find(name);
    if (it != table.end()) {
      entry = it->second;
      std::lock_guard l2(entry->mutex);
      entry->graph = shared;
    } else {
      entry = std::make_shared<Registered>();
      entry->graph = shared;
      OpDef def{kFunctionPrefix + name,
                [entry](std::span<const Tensor> in, const Attrs&) { return run_forward(entry, in); },
                [entry](const GradContext& ctx, std::span<const Tensor> up) { return run_gradient(entry, ctx, up); },
                kSaveInputs};
      register_op(std::move(def));
      table.emplace(name, entry);
    }
    if (!has_gradient && !entry->logged_fallback) {
      entry->logged_fallback = true;
      logger()->info("function '{}': no saved gradient; tape.gradient differentiates its traced forward graph", name);
    }
    out.push_back([name](const std::vector<Tensor>& inputs) { return call_function(name, inputs); });
  }
  return out;
}

std::vector<Tensor> call_function(const std::string& name, const std::vector<Tensor>& inputs) {
  std::shared_ptr<Registered> entry;
  {
    std::lock_guard lock(registered_mutex());
    auto it = registered_functions().find(name);
    if (it == registered_functions().end())
      throw std::invalid_argument("call_function: no function '" + name + "' is registered");
    entry = it->second;
  }
  check_args(*current(entry), current(entry)->input_specs, inputs, "input");
  TensorList out = execute(op_def("Function:" + name), inputs);
  return std::vector<Tensor>(out.begin(), out.end());
}

}  // namespace tapeflow
