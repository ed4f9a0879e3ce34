// ucx_context.hpp: the UCX pieces every group and the rendezvous share. `ucx_context` owns one
// ucp_context (tag matching for collectives, streams for the rendezvous, wakeup so a waiting
// rank sleeps on the worker's event fd instead of spinning a core away from the rank it waits
// for); `ucx_worker` owns one ucp_worker and its address. A worker belongs to one thread at a
// time (UCS_THREAD_MODE_SINGLE): each group member gets its own, so the shards of one process
// never contend for a worker lock. UCX picks the lanes (shared memory, cma, tcp, rdma) itself;
// UCX_TLS and friends in the environment apply as usual. ucp/ headers stay in the .cpp files.
// Tests: tests/transport/ucx_group_test.cpp
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/expected.hpp"

struct ucp_context;
struct ucp_worker;

namespace troupe::transport {

class ucx_context : public std::enable_shared_from_this<ucx_context> {
 public:
  static expected<std::shared_ptr<ucx_context>> create();
  ~ucx_context();
  ucx_context(const ucx_context&) = delete;
  ucx_context& operator=(const ucx_context&) = delete;
  ucp_context* get() const { return ctx_; }

 private:
  ucx_context() = default;
  ucp_context* ctx_ = nullptr;
};

class ucx_worker {
 public:
  static expected<std::unique_ptr<ucx_worker>> create(std::shared_ptr<ucx_context> ctx);
  ~ucx_worker();
  ucx_worker(const ucx_worker&) = delete;
  ucx_worker& operator=(const ucx_worker&) = delete;
  ucp_worker* get() const { return worker_; }
  /// The opaque bytes a peer needs to reach this worker (ucp_worker_get_address).
  const std::vector<uint8_t>& address() const { return address_; }
  /// Drives communication once; returns whether anything happened.
  bool progress();
  /// Sleeps until the worker has an event or `timeout_ms` passes (after arming it).
  void sleep(int timeout_ms);

 private:
  ucx_worker() = default;
  std::shared_ptr<ucx_context> ctx_;
  ucp_worker* worker_ = nullptr;
  int efd_ = -1;
  std::vector<uint8_t> address_;
};

/// "UCX <what>: <ucs_status_string>" as an error (io_error, unavailable for a lost peer).
error ucx_error(int ucs_status, const std::string& what);

} // namespace troupe::transport
