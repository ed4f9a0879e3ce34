// device.hpp: a device behind an interface: where a backend's tensors live and how bytes get
// there. The host device serves the ref and cpu backends (aligned host memory, copies are
// memcpy); the CUDA device (kernels/cuda) wraps cudaMalloc/cudaMemcpy on one GPU. Shards,
// the op harness and composites allocate through this, so a new accelerator is an addition.
// `get_device(b)` returns null when the backend is absent (no nvcc at build time, or no GPU
// at run time: this is said once in the log). Thread-safe.
// Tests: tests/kernels/test_ops.cpp (every backend present), tests/kernels/device_test.cpp
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/op.hpp"

namespace troupe::kernels {

class device {
 public:
  virtual ~device() = default;
  virtual backend kind() const = 0;
  virtual std::string describe() const = 0;
  virtual expected<void*> alloc(size_t bytes) = 0;
  virtual void free(void* ptr) = 0;
  virtual status upload(void* dst, const void* src, size_t bytes) = 0;   // host -> device
  virtual status download(void* dst, const void* src, size_t bytes) = 0; // device -> host
  virtual status synchronize() = 0;
  virtual int64_t memory_total() const = 0;
  virtual int64_t memory_free() const = 0;
};

/// The device serving backend `b` (index selects the GPU); null when absent.
device* get_device(backend b, int index = 0);
/// True when at least one CUDA GPU is usable here; logs once why not otherwise.
bool cuda_available();

/// RAII device allocation.
class device_buffer {
 public:
  device_buffer() = default;
  static expected<device_buffer> allocate(device& dev, size_t bytes);
  device_buffer(device_buffer&& o) noexcept;
  device_buffer& operator=(device_buffer&& o) noexcept;
  ~device_buffer();
  void* data() const { return ptr_; }
  size_t size() const { return size_; }

 private:
  device* dev_ = nullptr;
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

} // namespace troupe::kernels
