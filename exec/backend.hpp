// backend.hpp: what the executor needs from a device, as ggml-backend puts it: allocate,
// copy in and out, run a resolved kernel (asynchronously, on the backend's stream or queue),
// synchronise, and say how much memory there is. Every call returns a status: a device
// error fails the step (and the shard, which the supervisor restarts), never the process.
// The CPU backend runs kernels on the shard's thread pool, synchronously; a device backend
// (device_backend.cpp: CUDA) enqueues them on the shard's own stream over any kernels::device,
// so exec/ includes no device headers. Not thread-safe: one shard, one backend.
// Tests: tests/exec/forward_test.cpp, tests/exec/device_backend_test.cpp
#pragma once

#include <memory>
#include <vector>

#include "core/thread_pool.hpp"
#include "kernels/device.hpp"
#include "kernels/registry.hpp"

namespace troupe::exec {

struct memory_info {
  int64_t total = 0, free = 0;
};

class backend {
 public:
  virtual ~backend() = default;
  virtual kernels::backend kind() const = 0;
  /// The registry backends tried for an op, in order (the CPU backend also takes the
  /// reference kernel for an op it lacks: they share host memory).
  virtual std::vector<kernels::backend> kernel_sources() const = 0;
  virtual kernels::device& device() = 0;
  /// Device memory of `bytes` (not zeroed).
  virtual expected<kernels::device_buffer> allocate(size_t bytes) = 0;
  /// Host to device; `src` may be reused once this returns.
  virtual status upload(void* dst, const void* src, size_t bytes) = 0;
  /// Device to host, after the work enqueued before it: `dst` holds the bytes on return.
  virtual status download(void* dst, const void* src, size_t bytes) = 0;
  /// Device to device, in order with the kernels.
  virtual status copy(void* dst, const void* src, size_t bytes) = 0;
  /// Runs (or enqueues) `k` over `a`; `scratch` serves composites.
  virtual status run(const kernels::kernel& k, const kernels::op_args& a,
                     kernels::scratch_arena* scratch) = 0;
  virtual status synchronize() = 0;
  /// Captured steps (CUDA graphs): the runs enqueued between begin_capture and end_capture
  /// become one graph (recorded, not run); launch_graph runs it. unsupported on the host.
  virtual status begin_capture() { return make_error(errc::unsupported, "no captured graphs"); }
  virtual expected<void*> end_capture() {
    return make_error(errc::unsupported, "no captured graphs");
  }
  virtual status launch_graph(void* graph) {
    return make_error(errc::unsupported, "no captured graphs");
  }
  virtual void destroy_graph(void* graph) {}
  /// The queue its kernels run on (cudaStream_t), for a collective on device memory; null on
  /// the host.
  virtual void* stream() const { return nullptr; }
  virtual memory_info memory() const = 0;
  /// True when the device reads host memory directly (weights stay mapped, no upload).
  virtual bool host_memory() const = 0;
  /// A weight in the layout this backend's kernels read fastest (tensor_view::packed), made
  /// once at load: its bytes, or 0 where they read the published rows; pack() lays it out.
  virtual int64_t packed_bytes(const tensor_view& w) const { return 0; }
  virtual void pack(const tensor_view& w, void* out) const {}
  /// Whether this backend's matmuls, once w has that layout, never read w's published rows
  /// (for any number of tokens), so the executor may release them.
  virtual bool reads_packed_only(const tensor_view& w) const { return false; }
};

/// The host backend: kernels of `where` (cpu or ref) on a pool of `threads` threads, pinned to
/// `cpus` when given.
expected<std::unique_ptr<backend>> make_host_backend(kernels::backend where, int threads,
                                                     std::vector<int> cpus = {});
/// A device backend: kernels of `where` (cuda) on device `index`, on a stream of its own.
/// unavailable (with the reason) when this machine has no such device.
expected<std::unique_ptr<backend>> make_device_backend(kernels::backend where, int index);
/// The device backend's code over host memory and the CPU kernels (exec_options::
/// host_as_device): what runs on a GPU, minus the GPU, so tests cover those paths anywhere.
expected<std::unique_ptr<backend>> make_emulated_device_backend();
/// The backend a shard with these options runs on (host or device).
expected<std::unique_ptr<backend>> make_backend(kernels::backend where, int device, int threads,
                                                std::vector<int> cpus = {});

} // namespace troupe::exec
