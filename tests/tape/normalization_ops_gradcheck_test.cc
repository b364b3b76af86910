// Float64 first- and second-order gradient checks of the transformer ops (LayerNorm, LayerNormAffine, Gelu and
// their gradient ops, the tanh-approximate GELU composition).
#include <gtest/gtest.h>

#include "tape/tapeflow.h"
#include "tests/testing/gradcheck_table.h"

namespace tf = tapeflow;
using tf::testing::random_f64;

namespace {

using In = std::vector<tf::Tensor>;

std::function<In()> inputs(std::vector<tf::Shape> shapes, double lo = -1.0, double hi = 1.0) {
  return tf::testing::random_inputs(std::move(shapes), 57, lo, hi);
}

tf::testing::RegisterGradChecks rows({
    {"LayerNorm", "[2,5] eps 1e-3", [](const In& in) { return tf::layer_norm(in[0]); }, inputs({{2, 5}}, -2.0, 2.0)},
    // A weighted output, so the row sums of the cotangent are not zero (they vanish through y).
    {"LayerNorm", "[2,3,4] eps 0.1, weighted",
     [](const In& in) { return tf::layer_norm(in[0], 0.1) * in[1]; }, inputs({{2, 3, 4}, {4}})},
    {"LayerNormGrad", "x and dy [3,4]", [](const In& in) { return tf::layer_norm_grad(in[0], in[1], 1e-2); },
     inputs({{3, 4}, {3, 4}}, -2.0, 2.0)},
    {"LayerNormGrad", "x [2,6] eps 0.5, dy", [](const In& in) { return tf::layer_norm_grad(in[0], in[1], 0.5); },
     inputs({{2, 6}, {2, 6}})},
    // gamma and beta away from 0 and 1, so their gradients (and the second-order cross terms) show.
    {"LayerNormAffine", "x [2,5], gamma, beta [5]",
     [](const In& in) { return tf::layer_norm_affine(in[0], in[1], in[2]); }, inputs({{2, 5}, {5}, {5}}, -2.0, 2.0)},
    {"LayerNormAffine", "x [2,3,4] eps 0.1, weighted",
     [](const In& in) { return tf::layer_norm_affine(in[0], in[1], in[2], 0.1) * in[3]; },
     inputs({{2, 3, 4}, {4}, {4}, {2, 3, 4}})},
    {"LayerNormAffine", "x [4] (rank 1)", [](const In& in) { return tf::layer_norm_affine(in[0], in[1], in[2], 0.05); },
     inputs({{4}, {4}, {4}})},
    // Each of the three outputs alone, then all three weighted, so every upstream gradient is exercised.
    {"LayerNormAffineGrad", "dx of x, gamma, dy [3,4]",
     [](const In& in) { return tf::layer_norm_affine_grad(in[0], in[1], in[2], 1e-2).dx; },
     inputs({{3, 4}, {4}, {3, 4}}, -2.0, 2.0)},
    {"LayerNormAffineGrad", "dgamma of x [2,3,5], dy",
     [](const In& in) { return tf::layer_norm_affine_grad(in[0], in[1], in[2], 0.1).dgamma; },
     inputs({{2, 3, 5}, {5}, {2, 3, 5}})},
    {"LayerNormAffineGrad", "dbeta of dy [3,4]",
     [](const In& in) { return tf::layer_norm_affine_grad(in[0], in[1], in[2]).dbeta * in[0]; },
     inputs({{3, 4}, {4}, {3, 4}})},
    {"LayerNormAffineGrad", "all outputs [2,6] eps 0.5",
     [](const In& in) {
       const tf::LayerNormAffineGrads d = tf::layer_norm_affine_grad(in[0], in[1], in[2], 0.5);
       return tf::reduce_sum(d.dx * in[3]) + tf::reduce_sum(d.dgamma * in[4]) + tf::reduce_sum(tf::square(d.dbeta));
     },
     inputs({{2, 6}, {6}, {2, 6}, {2, 6}, {6}})},
    {"Gelu", "exact [2,3]", [](const In& in) { return tf::gelu(in[0]); }, inputs({{2, 3}}, -3.0, 3.0)},
    {"GeluGrad", "dy and x [2,3]", [](const In& in) { return tf::gelu_grad(in[0], in[1]); },
     inputs({{2, 3}, {2, 3}}, -3.0, 3.0)},
    {"gelu_approximate", "tanh form [2,3]", [](const In& in) { return tf::gelu(in[0], true); },
     inputs({{2, 3}}, -3.0, 3.0)},
});

TEST(NormalizationOpsGradCheck, FirstAndSecondOrder) {
  tf::testing::run_gradcheck_cases({"LayerNorm", "LayerNormGrad", "LayerNormAffine", "LayerNormAffineGrad", "Gelu", "GeluGrad", "gelu_approximate"});
}

}  // namespace
