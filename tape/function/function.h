// function: traces a C++ callable into a FunctionGraph of registered ops that can be replayed,
// differentiated, serialised and registered again in another process (with its custom gradient).
//
// Facts:    trace() runs the callable once on example inputs with a tracer (a Recorder) active and
//           records every op executed: op name, attrs, edges, and every tensor it did not produce
//           as a constant (so Variables read inside are captured by value; their reads are not
//           tracked). trace_custom_gradient() also runs the forward of a custom_gradient function
//           un-paused, then its gradient function on upstream gradients of ones, into the same
//           graph: gradient nodes may use forward values, which replay recomputes.
//           call() replays the forward nodes through execute(), so tapes differentiate it with the
//           ops' own gradients; gradient() replays the saved gradient nodes.
//           register_function() installs a graph as op "Function:<name>": its gradient is the saved
//           gradient graph, or (if none was traced) the derivative of the traced forward graph,
//           logged once per function. Registering the same name again replaces the graph.
// Errors:   trace*: std::invalid_argument for a bad name (allowed: [A-Za-z0-9_.-]), an op missing
//           from the registry, or a custom_gradient call inside a plain trace (trace it with
//           trace_custom_gradient instead). call/gradient: std::invalid_argument for a wrong number,
//           shape or dtype of inputs. deserialize: std::runtime_error naming the function and the
//           problem (unknown op name, malformed program, bad edge, wrong constant count, or an
//           attribute value the op refuses: OpDef::check_attrs, naming node, op, attribute, value).
// Ref:      tf.function, tf.saved_model.SaveOptions(experimental_custom_gradients=True)
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tape/autodiff/custom_gradient.h"
#include "tape/core/tensor.h"
#include "tape/runtime/attrs.h"

namespace tapeflow {

// Output `index` of node `node`.
struct ValueRef {
  int node = 0;   // index into FunctionGraph::nodes
  int index = 0;  // which output of that node (0 for inputs, upstreams and constants)
};

// The shape and dtype of one input or output of a traced function (as traced; call() checks them).
// Ref: tf.TensorSpec
struct TensorSpec {
  Shape shape;                    // dimensions, all known
  DType dtype = DType::kFloat32;  // element type
};

// One node: a forward input, an upstream gradient (gradient section), a constant, or an op call.
struct FunctionNode {
  // What the node is: a forward input, an upstream gradient, a constant or an op call.
  enum class Kind { kInput, kUpstream, kConstant, kOp };
  Kind kind = Kind::kOp;  // which of the four this node is
  int position = 0;         // kInput / kUpstream: which one; kConstant: index into constants
  std::string op;           // kOp: registered op name
  Attrs attrs;              // kOp
  std::vector<ValueRef> inputs;  // kOp
  int num_outputs = 1;      // kOp: how many outputs the call produced (1 for the other kinds)
};

// A traced program as text plus its constant tensors (what a checkpoint stores).
struct SerializedFunction {
  std::string program;            // "tapeflow-function 1": specs, then one line per node (text)
  std::vector<Tensor> constants;  // the graph's constants, in the order the program's nodes refer to
};

// A traced program: its input and output specs, its nodes in execution order (forward, then the
// gradient section if traced), the constants they read and which values are the outputs.
// Ref: tf.types.experimental.ConcreteFunction
class FunctionGraph {
 public:
  std::string name;                      // the function's name ([A-Za-z0-9_.-]; op "Function:<name>")
  std::vector<TensorSpec> input_specs;   // one per input, as traced
  std::vector<TensorSpec> output_specs;  // one per output, as traced
  std::vector<FunctionNode> nodes;       // in execution order; a node refers to earlier ones only
  std::vector<Tensor> constants;         // values captured by the trace (kConstant nodes index them)
  std::vector<ValueRef> outputs;         // the forward outputs
  bool has_gradient = false;             // a gradient section was traced (trace_custom_gradient)
  std::vector<std::optional<ValueRef>> gradient_outputs;  // one per input; nullopt = None

  // Replays the forward graph on `inputs` (one per input spec).
  std::vector<Tensor> call(const std::vector<Tensor>& inputs) const;
  // Replays the saved gradient: one gradient per input (undefined = None) from the forward inputs
  // and one upstream gradient per output. Errors: std::logic_error if !has_gradient.
  std::vector<Tensor> gradient(const std::vector<Tensor>& inputs, const std::vector<Tensor>& upstream) const;

  // The graph as a text program plus its constants (what checkpoints store); deserialize reads it back.
  SerializedFunction serialize() const;
  // The graph `serialized` describes, named `name` (ops are looked up in the registry).
  // Errors: std::runtime_error naming the function and the problem (see above).
  static FunctionGraph deserialize(const std::string& name, const SerializedFunction& serialized);

 private:
  std::vector<Tensor> run(const std::vector<ValueRef>& wanted, const std::vector<Tensor>& inputs,
                          const std::vector<Tensor>* upstream) const;
};

// A function of tensors to tensors: what trace() traces and register_function() returns.
using TracedFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Traces `fn` on `example_inputs` into a graph called `name`.
FunctionGraph trace(const std::string& name, const TracedFn& fn, const std::vector<Tensor>& example_inputs);
// Traces a custom-gradient forward (the CustomForwardFn given to custom_gradient) and its gradient.
FunctionGraph trace_custom_gradient(const std::string& name, const CustomForwardFn& forward,
                                    const std::vector<Tensor>& example_inputs);

// Registers `graph` as op "Function:<name>" and returns a callable that executes it.
// Errors: std::invalid_argument for a bad name, or if the graph would call itself directly or
//         through other registered functions (the message names the cycle); nothing changes then.
TracedFn register_function(FunctionGraph graph);
// Registers several graphs at once (a checkpoint's functions, which may call each other): all are
// checked first (names, no call cycles with the pending graphs replacing registered ones of the
// same name), then all are registered. Errors: as register_function, or a name given twice.
std::vector<TracedFn> register_functions(std::vector<FunctionGraph> graphs);
// Calls a registered function by name. Errors: std::invalid_argument if none is registered.
std::vector<Tensor> call_function(const std::string& name, const std::vector<Tensor>& inputs);

}  // namespace tapeflow
