// device.cpp: the host device (ref and cpu backends) and device_buffer (device.hpp). The CUDA
// device lives in kernels/cuda/cuda_device.cpp; without CUDA, cuda_stub.cpp answers "absent".
#include "kernels/device.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <utility>

namespace troupe::kernels {

device* get_cuda_device(int index); // cuda_device.cpp or cuda_stub.cpp

namespace {

class host_device final : public device {
 public:
  explicit host_device(backend b)
      : kind_(b) {}
  backend kind() const override { return kind_; }
  std::string describe() const override { return fmt::format("host ({})", to_string(kind_)); }
  expected<void*> alloc(size_t bytes) override {
    const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) return make_error(errc::out_of_memory, "host: cannot allocate {} bytes", bytes);
    return p;
  }
  void free(void* ptr) override { std::free(ptr); }
  status upload(void* dst, const void* src, size_t n) override {
    std::memcpy(dst, src, n);
    return {};
  }
  status download(void* dst, const void* src, size_t n) override {
    std::memcpy(dst, src, n);
    return {};
  }
  status synchronize() override { return {}; }
  status copy_async(void* dst, const void* src, size_t n, void*) override {
    std::memmove(dst, src, n);
    return {};
  }
  expected<void*> alloc_pinned(size_t bytes) override { return alloc(bytes); }
  void free_pinned(void* ptr) override { free(ptr); }
  int64_t memory_total() const override {
    return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  }
  int64_t memory_free() const override {
    return static_cast<int64_t>(sysconf(_SC_AVPHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  }

 private:
  backend kind_;
};

} // namespace

device* get_device(backend b, int index) {
  static host_device ref_dev(backend::ref), cpu_dev(backend::cpu);
  switch (b) {
  case backend::ref:
    return &ref_dev;
  case backend::cpu:
    return &cpu_dev;
  case backend::cuda:
    return get_cuda_device(index);
  }
  return nullptr;
}

status device::capture_begin(void*) {
  return make_error(errc::unsupported, "{}: no captured graphs", describe());
}
expected<void*> device::capture_end(void*) {
  return make_error(errc::unsupported, "{}: no captured graphs", describe());
}
status device::graph_launch(void*, void*) {
  return make_error(errc::unsupported, "{}: no captured graphs", describe());
}

expected<double> probe_copy_bandwidth(device& dev, size_t bytes, int reps) {
  TROUPE_TRY(dev.make_current());
  TROUPE_TRY_ASSIGN(a, device_buffer::allocate(dev, bytes));
  TROUPE_TRY_ASSIGN(b, device_buffer::allocate(dev, bytes));
  TROUPE_TRY_ASSIGN(stream, dev.stream_create());
  auto done = [&](status st) {
    (void)dev.stream_synchronize(stream);
    dev.stream_destroy(stream);
    return st;
  };
  // a first copy pages everything in
  if (auto st = dev.copy_async(b.data(), a.data(), bytes, stream); !st) return done(st).error();
  if (auto st = dev.stream_synchronize(stream); !st) return done(st).error();
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r)
    if (auto st =
            dev.copy_async(r % 2 ? a.data() : b.data(), r % 2 ? b.data() : a.data(), bytes, stream);
        !st)
      return done(st).error();
  if (auto st = done(dev.stream_synchronize(stream)); !st) return st.error();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return 2.0 * static_cast<double>(bytes) * reps / s;
}

expected<device_buffer> device_buffer::allocate(device& dev, size_t bytes) {
  TROUPE_TRY_ASSIGN(p, dev.alloc(bytes));
  device_buffer b;
  b.dev_ = &dev;
  b.ptr_ = p;
  b.size_ = bytes;
  return b;
}

device_buffer::device_buffer(device_buffer&& o) noexcept
    : dev_(std::exchange(o.dev_, nullptr))
    , ptr_(std::exchange(o.ptr_, nullptr))
    , size_(std::exchange(o.size_, 0)) {}

device_buffer& device_buffer::operator=(device_buffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) dev_->free(ptr_);
    dev_ = std::exchange(o.dev_, nullptr);
    ptr_ = std::exchange(o.ptr_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

device_buffer::~device_buffer() {
  if (ptr_) dev_->free(ptr_);
}

} // namespace troupe::kernels
