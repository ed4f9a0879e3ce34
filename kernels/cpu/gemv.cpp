// gemv.cpp: picks the decode kernel table for this CPU (gemv.hpp). TROUPE_ISA=avx2 or
// TROUPE_ISA=portable forces a lesser path (tests and comparisons).
#include "kernels/cpu/gemv.hpp"

#include <cstdlib>
#include <cstring>

#include "runtime/log.hpp"

namespace troupe::kernels::cpu {

const gemv_table& gemv_kernels() {
  static const gemv_table chosen = [] {
    static const gemv_table portable = {"portable", nullptr, nullptr, nullptr,
                                        nullptr,    nullptr, nullptr, nullptr};
    const char* force = std::getenv("TROUPE_ISA");
    __builtin_cpu_init();
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") &&
                        __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("f16c") &&
                        __builtin_cpu_supports("fma");
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                      __builtin_cpu_supports("f16c");
    const gemv_table* t = &portable;
    if (force && !std::strcmp(force, "portable"))
      t = &portable;
    else if (avx512 && !(force && !std::strcmp(force, "avx2")))
      t = gemv_avx512_table();
    else if (avx2)
      t = gemv_avx2_table();
    TROUPE_LOG_DEBUG("cpu", "matmul kernels: {}", t->isa);
    return *t;
  }();
  return chosen;
}

} // namespace troupe::kernels::cpu
