// buffer.hpp: an owned, 64-byte aligned block of memory (for activations, KV arenas, weight
// slices that must be copied). Move-only; freed on destruction. Sizes are in bytes. The
// alignment fits AVX-512 loads and cache lines. Tests: tests/core/tensor_test.cpp
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/expected.hpp"
#include "core/tensor.hpp"

namespace troupe {

class buffer {
 public:
  static constexpr size_t alignment = 64;

  buffer() = default;
  /// Allocates `bytes` (zero-filled when `zero`); fails with out_of_memory.
  static expected<buffer> allocate(size_t bytes, bool zero = false);
  buffer(buffer&& other) noexcept;
  buffer& operator=(buffer&& other) noexcept;
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  ~buffer();

  void* data() const { return data_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  tensor_view view(dtype type, shape s) const { return tensor_view(data_, type, s); }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

} // namespace troupe
