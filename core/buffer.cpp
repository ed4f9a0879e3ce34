// buffer.cpp: aligned allocation for buffer.hpp.
#include "core/buffer.hpp"

#include <cstdlib>
#include <cstring>
#include <utility>

namespace troupe {

expected<buffer> buffer::allocate(size_t bytes, bool zero) {
  buffer b;
  if (bytes == 0) return b;
  const size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  void* p = std::aligned_alloc(alignment, rounded);
  if (!p) return make_error(errc::out_of_memory, "cannot allocate {} bytes", bytes);
  if (zero) std::memset(p, 0, rounded);
  b.data_ = p;
  b.size_ = bytes;
  return b;
}

buffer::buffer(buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr))
    , size_(std::exchange(other.size_, 0)) {}

buffer& buffer::operator=(buffer&& other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

buffer::~buffer() {
  std::free(data_);
}

} // namespace troupe
