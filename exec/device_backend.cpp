// device_backend.cpp: a shard's backend on an accelerator (backend.hpp), over the
// kernels::device interface so that exec/ includes no device headers: memory from the
// device, one stream per shard created here, kernels enqueued on it (exec_ctx::stream; no
// thread pool), host copies in order on the stream, and downloads waited for. The kernels
// are the device backend's own and its composites only: host kernels cannot read device
// memory, so an op the device lacks refuses the load (the executor names it).
#include "exec/backend.hpp"

namespace troupe::exec {
namespace {

class device_backend final : public backend {
 public:
  device_backend(kernels::backend where, kernels::device* dev, void* stream)
      : where_(where)
      , dev_(dev)
      , stream_(stream) {}
  ~device_backend() override {
    (void)dev_->stream_synchronize(stream_);
    dev_->stream_destroy(stream_);
  }
  kernels::backend kind() const override { return where_; }
  std::vector<kernels::backend> kernel_sources() const override {
    if (where_ != kernels::backend::cuda) return {where_, kernels::backend::ref}; // emulated
    return {where_};
  }
  kernels::device& device() override { return *dev_; }
  expected<kernels::device_buffer> allocate(size_t bytes) override {
    TROUPE_TRY(dev_->make_current());
    return kernels::device_buffer::allocate(*dev_, bytes);
  }
  status upload(void* dst, const void* src, size_t bytes) override {
    TROUPE_TRY(dev_->upload_async(dst, src, bytes, stream_));
    // from pageable memory the copy has left `src` when it returns, but a pinned source would
    // not have: wait, so the caller may reuse it either way
    return dev_->stream_synchronize(stream_);
  }
  status download(void* dst, const void* src, size_t bytes) override {
    TROUPE_TRY(dev_->download_async(dst, src, bytes, stream_));
    return dev_->stream_synchronize(stream_);
  }
  status copy(void* dst, const void* src, size_t bytes) override {
    return dev_->copy_async(dst, src, bytes, stream_);
  }
  status run(const kernels::kernel& k, const kernels::op_args& a,
             kernels::scratch_arena* scratch) override {
    TROUPE_TRY(dev_->make_current());
    kernels::exec_ctx ctx;
    ctx.stream = stream_;
    ctx.scratch = scratch;
    return k(a, ctx);
  }
  status synchronize() override { return dev_->stream_synchronize(stream_); }
  status begin_capture() override {
    if (!dev_->can_capture()) return make_error(errc::unsupported, "the device captures nothing");
    return dev_->capture_begin(stream_);
  }
  expected<void*> end_capture() override { return dev_->capture_end(stream_); }
  status launch_graph(void* graph) override { return dev_->graph_launch(graph, stream_); }
  void destroy_graph(void* graph) override { dev_->graph_destroy(graph); }
  void* stream() const override { return stream_; }
  memory_info memory() const override { return {dev_->memory_total(), dev_->memory_free()}; }
  bool host_memory() const override { return false; }

 private:
  kernels::backend where_;
  kernels::device* dev_;
  void* stream_;
};

} // namespace

expected<std::unique_ptr<backend>> make_device_backend(kernels::backend where, int index) {
  if (where != kernels::backend::cuda)
    return make_error(errc::unsupported, "backend {} is not a device backend",
                      kernels::to_string(where));
  kernels::device* dev = kernels::get_device(where, index);
  if (!dev)
    return make_error(errc::unavailable, "{}:{} is not on this machine ({})",
                      kernels::to_string(where), index, kernels::cuda_summary());
  TROUPE_TRY(dev->make_current());
  TROUPE_TRY_ASSIGN(stream, dev->stream_create());
  return std::unique_ptr<backend>(new device_backend(where, dev, stream));
}

expected<std::unique_ptr<backend>> make_emulated_device_backend() {
  kernels::device* host = kernels::get_device(kernels::backend::cpu);
  TROUPE_TRY_ASSIGN(stream, host->stream_create());
  return std::unique_ptr<backend>(new device_backend(kernels::backend::cpu, host, stream));
}

expected<std::unique_ptr<backend>> make_backend(kernels::backend where, int device, int threads,
                                                std::vector<int> cpus) {
  if (where == kernels::backend::cuda) return make_device_backend(where, device);
  return make_host_backend(where, threads, std::move(cpus));
}

} // namespace troupe::exec
