// device.hpp: a device behind an interface: where a backend's tensors live and how bytes get
// there. The host device serves the ref and cpu backends (aligned host memory, copies are
// memcpy); the CUDA device (kernels/cuda) wraps cudaMalloc/cudaMemcpy on one GPU. Shards,
// the op harness and composites allocate through this, so a new accelerator is an addition.
// Besides memory and copies a device has streams, pinned host memory and captured graphs
// (defaults: what the host does, which is everything at once).
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
  /// Which device of its kind (the GPU's index); 0 for the host.
  virtual int index() const { return 0; }
  /// Makes this the calling thread's current device (CUDA launches go to the current one).
  virtual status make_current() { return {}; }

  // Streams (CUDA: cudaStream_t): an ordered queue of work on the device; kernels get theirs
  // through exec_ctx::stream. The host device has only the null stream and does everything at
  // once, which is what these defaults do. Copies from or to pageable host memory may return
  // before the device is done with them only when `src` stays alive and unchanged until the
  // next stream_synchronize.
  virtual expected<void*> stream_create() { return static_cast<void*>(nullptr); }
  virtual void stream_destroy(void* stream) {}
  virtual status upload_async(void* dst, const void* src, size_t n, void* stream) {
    return upload(dst, src, n);
  }
  virtual status download_async(void* dst, const void* src, size_t n, void* stream) {
    return download(dst, src, n);
  }
  /// Device memory to device memory.
  virtual status copy_async(void* dst, const void* src, size_t n, void* stream) = 0;
  virtual status stream_synchronize(void* stream) { return synchronize(); }
  /// Host memory the device copies from and to at full speed (CUDA: pinned); plain host
  /// memory on the host device.
  virtual expected<void*> alloc_pinned(size_t bytes) = 0;
  virtual void free_pinned(void* ptr) = 0;

  // Captured work (CUDA graphs): the launches enqueued on `stream` between capture_begin and
  // capture_end become one graph that graph_launch replays with the same arguments.
  virtual bool can_capture() const { return false; }
  virtual status capture_begin(void* stream);
  virtual expected<void*> capture_end(void* stream);
  virtual status graph_launch(void* graph, void* stream);
  virtual void graph_destroy(void* graph) {}
};

/// The device serving backend `b` (index selects the GPU); null when absent.
device* get_device(backend b, int index = 0);
/// True when at least one CUDA GPU is usable here; logs once why not otherwise.
bool cuda_available();
/// What this machine has for CUDA, in words: "2 GPUs", "no usable GPU (CUDA driver version is
/// insufficient ...)", "built without CUDA".
std::string cuda_summary();

/// Bytes per second a device moves copying within its own memory (reads plus writes), from
/// `reps` copies of `bytes` on a stream of its own: the measured ceiling a bandwidth-bound
/// kernel is judged against (for HBM, ~90% of the part's nominal figure).
expected<double> probe_copy_bandwidth(device& dev, size_t bytes = size_t{256} << 20, int reps = 20);

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
