// Prints the results of the seed documents' GradientTape examples, computed by tapeflow.
#include <CLI/CLI.hpp>

#include <iostream>
#include <map>

#include "apps/common/app_common.h"
#include "tape/tapeflow.h"

namespace tf = tapeflow;

int main(int argc, char** argv) {
  CLI::App app{"Print the results of the seed documents' GradientTape examples (first and second derivatives, "
               "persistent tapes, stop_gradient), computed by tapeflow. Takes no other flags.",
               "seed_examples"};
  app.footer(tapeflow::apps::kExitCodesHelp);
  if (auto code = tapeflow::apps::parse_flags(app, argc, argv)) return *code;
  {
    tf::Tensor x = tf::scalar(3.0);
    tf::GradientTape g;
    g.watch(x);
    tf::Tensor y = x * x;
    std::cout << "d(x*x)/dx at 3: " << *g.gradient(y, x) << "\n";
  }
  {
    tf::Tensor x = tf::scalar(3.0);
    tf::GradientTape g({.persistent = true});
    g.watch(x);
    tf::Tensor y = x * x;
    tf::Tensor z = y * y;
    std::cout << "persistent: dz/dx = " << *g.gradient(z, x) << ", dy/dx = " << *g.gradient(y, x) << "\n";
  }
  {
    tf::Variable x(1.0);
    tf::GradientTape t2;
    std::optional<tf::Tensor> dy_dx;
    {
      tf::GradientTape t1;
      tf::Tensor y = x * x * x;
      dy_dx = t1.gradient(y, x);
    }
    std::cout << "dy_dx: " << *dy_dx << "\nd2y_dx2: " << *t2.gradient(*dy_dx, x) << "\n";
  }
  {
    tf::Variable x(2.0), y(3.0);
    tf::GradientTape t;
    tf::Tensor z = tf::pow(x, 2.0) + tf::stop_gradient(tf::pow(y, 2.0));
    auto grad = t.gradient(z, std::map<std::string, tf::Source>{{"x", x}, {"y", y}});
    std::cout << "dz/dx: " << *grad["x"] << "\ndz/dy: " << (grad["y"] ? grad["y"]->to_string() : "None") << "\n";
  }
  return 0;
}
