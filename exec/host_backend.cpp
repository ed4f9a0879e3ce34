// host_backend.cpp: the CPU (and reference) backend (backend.hpp): host memory, kernels run
// at once on the shard's thread pool.
#include "exec/backend.hpp"

#include <cstring>

#include "kernels/cpu/cpu.hpp"

namespace troupe::exec {
namespace {

class host_backend final : public backend {
 public:
  host_backend(kernels::backend where, kernels::device* dev, int threads, std::vector<int> cpus)
      : where_(where)
      , dev_(dev)
      , pool_(threads, std::move(cpus)) {}
  kernels::backend kind() const override { return where_; }
  int64_t packed_bytes(const tensor_view& w) const override {
    return where_ == kernels::backend::cpu ? kernels::cpu::packed_bytes(w) : 0;
  }
  void pack(const tensor_view& w, void* out) const override { kernels::cpu::pack(w, out); }
  bool reads_packed_only(const tensor_view& w) const override {
    return where_ == kernels::backend::cpu && kernels::cpu::packed_only(w);
  }
  std::vector<kernels::backend> kernel_sources() const override {
    if (where_ == kernels::backend::ref) return {kernels::backend::ref};
    return {where_, kernels::backend::ref};
  }
  kernels::device& device() override { return *dev_; }
  expected<kernels::device_buffer> allocate(size_t bytes) override {
    return kernels::device_buffer::allocate(*dev_, bytes);
  }
  status upload(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return {};
  }
  status download(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return {};
  }
  status copy(void* dst, const void* src, size_t bytes) override {
    std::memmove(dst, src, bytes);
    return {};
  }
  status run(const kernels::kernel& k, const kernels::op_args& a,
             kernels::scratch_arena* scratch) override {
    kernels::exec_ctx ctx;
    ctx.pool = &pool_;
    ctx.scratch = scratch;
    return k(a, ctx);
  }
  status synchronize() override { return {}; }
  memory_info memory() const override { return {dev_->memory_total(), dev_->memory_free()}; }
  bool host_memory() const override { return true; }

 private:
  kernels::backend where_;
  kernels::device* dev_;
  thread_pool pool_;
};

} // namespace

expected<std::unique_ptr<backend>> make_host_backend(kernels::backend where, int threads,
                                                     std::vector<int> cpus) {
  if (where != kernels::backend::cpu && where != kernels::backend::ref)
    return make_error(errc::unsupported, "backend {} is not a host backend",
                      kernels::to_string(where));
  kernels::device* dev = kernels::get_device(where);
  if (!dev) return make_error(errc::unavailable, "no {} device", kernels::to_string(where));
  return std::unique_ptr<backend>(new host_backend(where, dev, threads, std::move(cpus)));
}

} // namespace troupe::exec
