// The canary of issue 31: GCC 12.2 builds braced-list constants wrong when it tunes for an
// AVX-512 Intel core (a = {4294967295, 4294967295, 4294967295, 0} ends in 4294967295;
// std::vector<double> w = {1, 1, 0, 0} becomes {1, 1, 1, 1}). braced_list_canary() builds such
// lists (int64 and double, a trailing zero, lengths 2 to 9) and returns "" when every element is
// right, else what came out wrong. It is compiled into the library once per instruction-set level
// (braced_list_canary.cc, with exactly the kernels' flags); tests/kernels/isa_canary_test.cc runs
// every copy and the header's inline copy under the tests' flags.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tapeflow::kernels::internal {

namespace isa_baseline {
std::string braced_list_canary();
}
namespace isa_avx2 {
std::string braced_list_canary();
}

// The checks themselves (inline: each including file compiles them with its own flags). The
// values go through volatile copies only in the comparison, never in the construction.
template <class T>
std::string check_braced(const std::vector<T>& got, const std::vector<long double>& want, const char* what) {
  std::string bad;
  if (got.size() != want.size()) return std::string(what) + ": wrong size; ";
  for (std::size_t i = 0; i < got.size(); ++i) {
    const volatile T g = got[i];
    if (static_cast<long double>(g) != want[i])
      bad += std::string(what) + "[" + std::to_string(i) + "] = " + std::to_string(static_cast<long double>(g)) +
             ", expected " + std::to_string(want[i]) + "; ";
  }
  return bad;
}

inline std::string braced_list_canary_here() {
  std::string bad;
  std::vector<std::int64_t> a;
  a = {4294967295, 4294967295, 4294967295, 0};
  bad += check_braced(a, {4294967295.0L, 4294967295.0L, 4294967295.0L, 0}, "int64 {M, M, M, 0}");
  a = {4294967295, 0};
  bad += check_braced(a, {4294967295.0L, 0}, "int64 {M, 0}");
  a = {7, 4294967295, 4294967295, 4294967295, 4294967295, 4294967295, 4294967295, 0};
  bad += check_braced(a, {7, 4294967295.0L, 4294967295.0L, 4294967295.0L, 4294967295.0L, 4294967295.0L,
                          4294967295.0L, 0},
                      "int64 {7, M x 6, 0}");
  const std::vector<std::int64_t> b = {1, 2, 3, 4, 5, 6, 7, 8, 0};
  bad += check_braced(b, {1, 2, 3, 4, 5, 6, 7, 8, 0}, "int64 {1..8, 0}");
  std::vector<double> w = {1, 1, 0, 0};
  bad += check_braced(w, {1, 1, 0, 0}, "double {1, 1, 0, 0}");
  w = {1, 1, 1, 0};
  bad += check_braced(w, {1, 1, 1, 0}, "double {1, 1, 1, 0}");
  w = {2.5, 0};
  bad += check_braced(w, {2.5L, 0}, "double {2.5, 0}");
  const std::vector<double> v = {1, 1, 1, 1, 1, 1, 1, 0};
  bad += check_braced(v, {1, 1, 1, 1, 1, 1, 1, 0}, "double {1 x 7, 0}");
  const std::vector<double> u = {0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0};
  bad += check_braced(u, {0.5L, 0.5L, 0.5L, 0.5L, 0.5L, 0.5L, 0.5L, 0.5L, 0}, "double {0.5 x 8, 0}");
  return bad;
}

}  // namespace tapeflow::kernels::internal
