// Model::summary: the Keras-style table of layers, output shapes and parameter counts.
#include <spdlog/fmt/fmt.h>

#include <algorithm>

#include "models/model.h"

namespace tapeflow::models {
namespace {

// 269322 -> "269,322".
std::string with_commas(std::int64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// Keras's readable_memory_size for float32 weights: "1.03 MB".
std::string memory_size(std::int64_t params) {
  double size = static_cast<double>(params) * 4.0;
  const char* units[] = {"B", "KB", "MB", "GB"};
  int u = 0;
  while (size >= 1024.0 && u < 3) {
    size /= 1024.0;
    ++u;
  }
  return fmt::format("{:.2f} {}", size, units[u]);
}

std::int64_t count(const std::vector<Variable>& vars) {
  std::int64_t n = 0;
  for (const Variable& v : vars) n += v.shape().num_elements();
  return n;
}

}  // namespace

std::vector<std::string> Model::summary_output_shapes() const {
  return std::vector<std::string>(layers().size(), "?");
}

std::string Model::summary() const {
  const auto& subs = layers();
  const std::vector<std::string> shapes = summary_output_shapes();
  const std::vector<std::string> connections = summary_connections();  // '\n' between lines
  std::vector<std::string> names;
  std::size_t name_w = 28, shape_w = 25, conn_w = connections.empty() ? 0 : 14;
  for (const std::string& c : connections) {
    std::size_t start = 0;
    for (std::size_t end; (end = c.find('\n', start)) != std::string::npos; start = end + 1)
      conn_w = std::max(conn_w, end - start + 2);
    conn_w = std::max(conn_w, c.size() - start + 2);
  }
  for (std::size_t i = 0; i < subs.size(); ++i) {
    names.push_back(subs[i]->name() + " (" + subs[i]->class_name() + ")");
    name_w = std::max(name_w, names.back().size() + 1);
    if (i < shapes.size()) shape_w = std::max(shape_w, shapes[i].size() + 1);
  }
  const std::size_t width = 1 + name_w + shape_w + 12 + conn_w;
  std::string s = "Model: \"" + name() + "\"\n" + std::string(width, '_') + "\n";
  auto row = [&](const std::string& a, const std::string& b, const std::string& c, const std::string& d) {
    if (conn_w == 0) {
      s += fmt::format(" {:<{}}{:<{}}{:>10}\n", a, name_w, b, shape_w, c);
      return;
    }
    // Keras prints one connection per line, the first next to the layer.
    std::size_t start = 0, end = d.find('\n');
    s += fmt::format(" {:<{}}{:<{}}{:>10}  {}\n", a, name_w, b, shape_w, c, d.substr(0, end));
    while (end != std::string::npos) {
      start = end + 1;
      end = d.find('\n', start);
      s += fmt::format(" {:<{}}{:<{}}{:>10}  {}\n", "", name_w, "", shape_w, "", d.substr(start, end - start));
    }
  };
  row("Layer (type)", "Output Shape", "Param #", "Connected to");
  s += std::string(width, '=') + "\n";
  for (std::size_t i = 0; i < subs.size(); ++i) {
    const std::string params = subs[i]->built() ? with_commas(count(subs[i]->variables())) : "0 (unbuilt)";
    row(names[i], i < shapes.size() ? shapes[i] : "?", params, i < connections.size() ? connections[i] : "");
  }
  s += std::string(width, '=') + "\n";
  const std::int64_t total = count(variables()), trainable = count(trainable_variables());
  s += "Total params: " + with_commas(total) + " (" + memory_size(total) + ")\n";
  s += "Trainable params: " + with_commas(trainable) + " (" + memory_size(trainable) + ")\n";
  s += "Non-trainable params: " + with_commas(total - trainable) + " (" + memory_size(total - trainable) + ")\n";
  s += std::string(width, '_') + "\n";
  return s;
}

}  // namespace tapeflow::models
