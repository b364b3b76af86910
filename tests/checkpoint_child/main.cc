// checkpoint_child: the fresh process of the custom-gradient test. Loads a checkpoint (which
// registers its saved functions) and prints d/dv of <function>(v * v) at v = 2.
// Usage: checkpoint_child <checkpoint.h5> <function name>. Exit 0 and the gradient on stdout
// ("None" if unconnected), or exit 2 with the error on stderr.
#include <cstdio>
#include <exception>

#include "models/checkpoint.h"
#include "tape/tapeflow.h"

int main(int argc, char** argv) {
  namespace tf = tapeflow;
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <checkpoint.h5> <function name>\n", argv[0]);
    return 2;
  }
  try {
    tf::models::Checkpoint checkpoint;
    checkpoint.read(argv[1]);
    tf::Variable v(2.0);
    tf::GradientTape tape;
    tf::Tensor output = tf::call_function(argv[2], {v * v})[0];
    auto g = tape.gradient(output, v);
    if (g) std::printf("gradient %.17g\n", g->item());
    else std::printf("gradient None\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
