// precision.cpp: the exact-activations switch (precision.hpp).
#include "kernels/precision.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace troupe::kernels {
namespace {

std::atomic<bool>& flag() {
  static std::atomic<bool> on{[] {
    const char* e = std::getenv("TROUPE_EXACT_ACTIVATIONS");
    return e && std::strcmp(e, "0") != 0 && *e != '\0';
  }()};
  return on;
}

} // namespace

void set_exact_activations(bool on) {
  flag().store(on, std::memory_order_relaxed);
}

bool exact_activations() {
  return flag().load(std::memory_order_relaxed);
}

} // namespace troupe::kernels
