// The optimizers' element-wise update loops (SGD, Adam, RMSprop, Adagrad) on raw spans, one chunk
// of a variable at a time: the per-ISA kernels behind optimizers/ (which owns the slots, the
// learning rate and the parallel chunking).
//
// Shapes:   every pointer covers n elements; w and the slots are updated in place; none alias.
// DTypes:   float, double.
// Facts:    One source (ukernels/optimizer_loops.cc) compiled per instruction-set level
//           (tape/core/cpu_isa.h: baseline, AVX2, AVX-512); each call runs the copy for
//           cpu_isa() (the AVX-512 copy is as fast as the AVX2 one, within 3%, on an Adam step of
//           64K or 1M floats: these loops are bound by memory). Bits: the same at every level
//           (tests/kernels/optimizer_updates_test.cc compares them) and for any chunking —
//           each element is computed alone, by the same IEEE operations in the same order, with no
//           multiply-add contraction, and SSE / AVX square roots and divisions are correctly
//           rounded. (Before these kernels, float Adam / RMSprop / Adagrad took Eigen's fast
//           square root in the vector body, an estimate and a Newton step, and the exact one in
//           the tail, so some float results moved by an ulp.)
// Ref:      tensorflow/core/kernels/training_ops.cc (ApplyGradientDescent, ApplyMomentum, ApplyAdam,
//           ApplyRMSProp, ApplyCenteredRMSProp, ApplyAdagradV2)
#pragma once

#include <cstdint>

namespace tapeflow::kernels {

// SGD: w -= lr g without momentum (m null); with it m = mu m - lr g, then w += m, or with
// Nesterov w += mu m - lr g. Ref: keras/src/optimizers/sgd.py
template <class T>
void sgd_update(T* w, T* m, const T* g, std::int64_t n, T lr, T mu, bool nesterov);

// Adam: m += (g - m) one_b1; v += (g² - v) one_b2; with vhat (AMSGrad, else null) vhat = max(vhat,
// v) used for v; w -= m a / (sqrt(v) + eps), a the bias-corrected learning rate.
// Ref: keras/src/optimizers/adam.py
template <class T>
void adam_update(T* w, T* m, T* v, T* vhat, const T* g, std::int64_t n, T a, T eps, T one_b1, T one_b2);

// RMSprop: rms = rho rms + (1 - rho) g²; centered (mg non-null): mg = rho mg + (1 - rho) g and the
// denominator sqrt(rms - mg² + eps), else sqrt(rms + eps); with momentum (mom non-null)
// mom = mu mom + lr g / denom and w -= mom, else w -= lr g / denom. Ref: keras/src/optimizers/rmsprop.py
template <class T>
void rmsprop_update(T* w, T* rms, T* mom, T* mg, const T* g, std::int64_t n, T rho, T eps, T lr, T mu);

// Adagrad: acc += g²; w -= lr g / sqrt(acc + eps). Ref: keras/src/optimizers/adagrad.py
template <class T>
void adagrad_update(T* w, T* acc, const T* g, std::int64_t n, T eps, T lr);

}  // namespace tapeflow::kernels
