// FunctionGraph <-> text program. One token stream, whitespace separated:
//   tapeflow-function 1
//   inputs N {dtype rank dims...}  outputs M {dtype rank dims...}  constants C
//   nodes K { in P | up P | const P | op NAME NOUT NIN {node index} ATTRS {name type value} }
//   out {node index}*M   grad 0|1 {none | node index}*N   end
// Strings (attr values) are hex-encoded; doubles use %a (exact).
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "tape/function/function.h"
#include "tape/runtime/op_registry.h"

namespace tapeflow {
namespace {

constexpr std::int64_t kMaxCount = 1 << 24;

std::string hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string out = "x";  // never empty
  for (unsigned char c : s) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

void write_spec(std::ostringstream& os, const TensorSpec& s) {
  os << dtype_name(s.dtype) << ' ' << s.shape.rank();
  for (std::int64_t d : s.shape) os << ' ' << d;
  os << '\n';
}

class Parser {
 public:
  Parser(const std::string& name, const std::string& text) : name_(name), in_(text) {}
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("function '" + name_ + "': " + what);
  }
  std::string word(const char* what) {
    std::string w;
    if (!(in_ >> w)) fail(std::string("malformed program: missing ") + what);
    return w;
  }
  void expect(const char* token) {
    if (word(token) != token) fail(std::string("malformed program: expected '") + token + "'");
  }
  std::int64_t integer(const char* what, std::int64_t lo, std::int64_t hi) {
    std::string w = word(what);
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(w.c_str(), &end, 10);
    if (errno != 0 || end == w.c_str() || *end != '\0' || v < lo || v > hi)
      fail(std::string("malformed program: bad ") + what + " '" + w + "'");
    return v;
  }
  double real(const char* what) {
    std::string w = word(what);
    char* end = nullptr;
    double v = std::strtod(w.c_str(), &end);
    if (end == w.c_str() || *end != '\0') fail(std::string("malformed program: bad ") + what + " '" + w + "'");
    return v;
  }
  std::string unhex(const char* what) {
    std::string w = word(what);
    if (w.empty() || w[0] != 'x' || w.size() % 2 == 0) fail(std::string("malformed program: bad ") + what);
    std::string out;
    for (std::size_t i = 1; i < w.size(); i += 2) {
      auto nib = [&](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        fail(std::string("malformed program: bad ") + what);
      };
      out += static_cast<char>(nib(w[i]) * 16 + nib(w[i + 1]));
    }
    return out;
  }
  DType dtype() {
    std::string w = word("dtype");
    try {
      return dtype_from_name(w);
    } catch (const std::invalid_argument&) {
      fail("malformed program: unknown dtype '" + w + "'");
    }
  }
  TensorSpec spec() {
    TensorSpec s;
    s.dtype = dtype();
    const auto rank = integer("rank", 0, 8);
    std::vector<std::int64_t> dims;
    for (std::int64_t i = 0; i < rank; ++i) dims.push_back(integer("dimension", 0, std::numeric_limits<std::int32_t>::max()));
    s.shape = Shape(dims);
    std::int64_t bytes = 0;  // each dim fits in int32, their product may not
    try {
      if (__builtin_mul_overflow(s.shape.num_elements(), static_cast<std::int64_t>(dtype_size(s.dtype)), &bytes))
        throw ShapeError("bytes overflow int64");
    } catch (const ShapeError&) {
      fail("malformed program: tensor spec " + s.shape.to_string() + " " + dtype_name(s.dtype) + ": size overflows int64");
    }
    return s;
  }

 private:
  std::string name_;
  std::istringstream in_;
};

}  // namespace

SerializedFunction FunctionGraph::serialize() const {
  std::ostringstream os;
  os << "tapeflow-function 1\ninputs " << input_specs.size() << '\n';
  for (const auto& s : input_specs) write_spec(os, s);
  os << "outputs " << output_specs.size() << '\n';
  for (const auto& s : output_specs) write_spec(os, s);
  os << "constants " << constants.size() << "\nnodes " << nodes.size() << '\n';
  for (const FunctionNode& n : nodes) {
    switch (n.kind) {
      case FunctionNode::Kind::kInput: os << "in " << n.position << '\n'; break;
      case FunctionNode::Kind::kUpstream: os << "up " << n.position << '\n'; break;
      case FunctionNode::Kind::kConstant: os << "const " << n.position << '\n'; break;
      case FunctionNode::Kind::kOp: {
        os << "op " << n.op << ' ' << n.num_outputs << ' ' << n.inputs.size();
        for (const ValueRef& r : n.inputs) os << ' ' << r.node << ' ' << r.index;
        os << ' ' << n.attrs.items().size();
        for (const auto& [key, value] : n.attrs.items()) {
          os << ' ' << hex(key) << ' ';
          if (auto* i = std::get_if<std::int64_t>(&value)) os << "i " << *i;
          else if (auto* f = std::get_if<double>(&value)) {
            char buf[64];
            std::snprintf(buf, sizeof buf, "%a", *f);
            os << "f " << buf;
          } else if (auto* b = std::get_if<bool>(&value)) os << "b " << (*b ? 1 : 0);
          else if (auto* s = std::get_if<std::string>(&value)) os << "s " << hex(*s);
          else if (auto* v = std::get_if<std::vector<std::int64_t>>(&value)) {
            os << "v " << v->size();
            for (std::int64_t x : *v) os << ' ' << x;
          } else os << "d " << dtype_name(std::get<DType>(value));
        }
        os << '\n';
        break;
      }
    }
  }
  os << "out";
  for (const ValueRef& r : outputs) os << ' ' << r.node << ' ' << r.index;
  os << "\ngrad " << (has_gradient ? 1 : 0);
  if (has_gradient)
    for (const auto& r : gradient_outputs) {
      if (r) os << ' ' << r->node << ' ' << r->index;
      else os << " none";
    }
  os << "\nend\n";
  return {os.str(), constants};
}

FunctionGraph FunctionGraph::deserialize(const std::string& name, const SerializedFunction& serialized) {
  Parser p(name, serialized.program);
  FunctionGraph g;
  g.name = name;
  p.expect("tapeflow-function");
  if (p.integer("version", 0, kMaxCount) != 1) p.fail("unsupported program version");
  p.expect("inputs");
  for (auto n = p.integer("input count", 0, kMaxCount); n > 0; --n) g.input_specs.push_back(p.spec());
  p.expect("outputs");
  for (auto n = p.integer("output count", 0, kMaxCount); n > 0; --n) g.output_specs.push_back(p.spec());
  p.expect("constants");
  const auto num_constants = p.integer("constant count", 0, kMaxCount);
  if (num_constants != static_cast<std::int64_t>(serialized.constants.size()))
    p.fail("program has " + std::to_string(num_constants) + " constants, found " +
           std::to_string(serialized.constants.size()));
  g.constants = serialized.constants;
  p.expect("nodes");
  const auto num_nodes = p.integer("node count", 0, kMaxCount);
  // A reference to an earlier node's output, validated against what exists so far.
  auto ref = [&](std::int64_t limit) {
    ValueRef r;
    r.node = static_cast<int>(p.integer("node reference", 0, limit - 1));
    r.index = static_cast<int>(p.integer("output index", 0, g.nodes[static_cast<std::size_t>(r.node)].num_outputs - 1));
    return r;
  };
  for (std::int64_t i = 0; i < num_nodes; ++i) {
    FunctionNode n;
    const std::string kind = p.word("node kind");
    if (kind == "in" || kind == "up") {
      n.kind = kind == "in" ? FunctionNode::Kind::kInput : FunctionNode::Kind::kUpstream;
      const auto& specs = kind == "in" ? g.input_specs : g.output_specs;
      n.position = static_cast<int>(p.integer("position", 0, static_cast<std::int64_t>(specs.size()) - 1));
    } else if (kind == "const") {
      n.kind = FunctionNode::Kind::kConstant;
      n.position = static_cast<int>(p.integer("constant index", 0, num_constants - 1));
    } else if (kind == "op") {
      n.op = p.word("op name");
      const OpDef* def = OpRegistry::global().find(n.op);
      if (def == nullptr) p.fail("unknown op '" + n.op + "' (not registered in this build)");
      n.num_outputs = static_cast<int>(p.integer("output count", 1, 1024));
      for (auto k = p.integer("input count", 0, 1024); k > 0; --k) n.inputs.push_back(ref(i));
      for (auto k = p.integer("attr count", 0, 1024); k > 0; --k) {
        std::string key = p.unhex("attr name");
        const std::string type = p.word("attr type");
        if (type == "i") n.attrs.set(key, p.integer("int attr", std::numeric_limits<std::int64_t>::min(),
                                                    std::numeric_limits<std::int64_t>::max()));
        else if (type == "f") n.attrs.set(key, p.real("float attr"));
        else if (type == "b") n.attrs.set(key, p.integer("bool attr", 0, 1) != 0);
        else if (type == "s") n.attrs.set(key, p.unhex("string attr"));
        else if (type == "d") n.attrs.set(key, p.dtype());
        else if (type == "v") {
          std::vector<std::int64_t> v;
          for (auto m = p.integer("list length", 0, kMaxCount); m > 0; --m)
            v.push_back(p.integer("list element", std::numeric_limits<std::int64_t>::min(),
                                  std::numeric_limits<std::int64_t>::max()));
          n.attrs.set(key, std::move(v));
        } else p.fail("malformed program: unknown attr type '" + type + "'");
      }
      // Attribute values the op itself would refuse (or overflow on) fail the load, not the first call.
      if (def->check_attrs) {
        try {
          def->check_attrs(n.attrs);
        } catch (const std::exception& e) {
          p.fail("node " + std::to_string(i) + ": " + e.what());
        }
      }
    } else {
      p.fail("malformed program: unknown node kind '" + kind + "'");
    }
    if (n.kind != FunctionNode::Kind::kOp) n.num_outputs = 1;
    g.nodes.push_back(std::move(n));
  }
  p.expect("out");
  for (std::size_t i = 0; i < g.output_specs.size(); ++i) g.outputs.push_back(ref(num_nodes));
  p.expect("grad");
  g.has_gradient = p.integer("gradient flag", 0, 1) == 1;
  if (g.has_gradient)
    for (std::size_t i = 0; i < g.input_specs.size(); ++i) {
      // "none" or a reference; peek by reading a word.
      const std::string w = p.word("gradient output");
      if (w == "none") {
        g.gradient_outputs.push_back(std::nullopt);
        continue;
      }
      Parser one(name, w + " " + p.word("output index"));
      ValueRef r;
      r.node = static_cast<int>(one.integer("node reference", 0, num_nodes - 1));
      r.index = static_cast<int>(one.integer("output index", 0, g.nodes[static_cast<std::size_t>(r.node)].num_outputs - 1));
      g.gradient_outputs.push_back(r);
    }
  p.expect("end");
  for (const FunctionNode& n : g.nodes)
    if (n.kind == FunctionNode::Kind::kUpstream && !g.has_gradient) p.fail("malformed program: upstream node without gradient");
  return g;
}

}  // namespace tapeflow
