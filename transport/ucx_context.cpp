// ucx_context.cpp: ucp_context / ucp_worker lifetimes and status translation (ucx_context.hpp).
#include "transport/ucx_context.hpp"

#include <poll.h>

#include <cstdlib>

#include <ucp/api/ucp.h>

namespace troupe::transport {

error ucx_error(int status, const std::string& what) {
  const auto s = static_cast<ucs_status_t>(status);
  // (a shared-memory error: the peer's segment is gone, as when it exited before this
  // process first reached it)
  const bool lost = s == UCS_ERR_CONNECTION_RESET || s == UCS_ERR_ENDPOINT_TIMEOUT ||
                    s == UCS_ERR_UNREACHABLE || s == UCS_ERR_REJECTED ||
                    s == UCS_ERR_NOT_CONNECTED || s == UCS_ERR_CANCELED ||
                    s == UCS_ERR_SHMEM_SEGMENT;
  return make_error(lost ? errc::unavailable : errc::io_error, "UCX {}: {}", what,
                    ucs_status_string(s));
}

expected<std::shared_ptr<ucx_context>> ucx_context::create() {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) return ucx_error(st, "reading the configuration");
  // Peer error handling (which a group needs to survive a lost rank) otherwise rules out the
  // shared-memory transports, leaving two ranks on one machine on tcp over loopback: 2.5 GB/s
  // and 6 us instead of 12 GB/s and 0.2 us (bench/README.md). UCX_MM_ERROR_HANDLING in the
  // environment still wins.
  if (!std::getenv("UCX_MM_ERROR_HANDLING"))
    (void)ucp_config_modify(config, "MM_ERROR_HANDLING", "y");
  // Over shared memory a dead peer shows only through keepalive, every 20 s by default: a
  // lost rank would hold its group that long. One probe a second per endpoint costs nothing.
  if (!std::getenv("UCX_KEEPALIVE_INTERVAL"))
    (void)ucp_config_modify(config, "KEEPALIVE_INTERVAL", "1s");
  ucp_params_t params{};
  params.field_mask =
      UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_STREAM | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 1; // the workers of one context live on different threads
  params.name = "troupe";
  std::shared_ptr<ucx_context> c(new ucx_context());
  st = ucp_init(&params, config, &c->ctx_);
  ucp_config_release(config);
  if (st != UCS_OK) return ucx_error(st, "init");
  return c;
}

ucx_context::~ucx_context() {
  if (ctx_) ucp_cleanup(ctx_);
}

expected<std::unique_ptr<ucx_worker>> ucx_worker::create(std::shared_ptr<ucx_context> ctx) {
  std::unique_ptr<ucx_worker> w(new ucx_worker());
  w->ctx_ = std::move(ctx);
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE | UCP_WORKER_PARAM_FIELD_EVENTS;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  wp.events = UCP_WAKEUP_TAG_SEND | UCP_WAKEUP_TAG_RECV | UCP_WAKEUP_RX | UCP_WAKEUP_TX;
  ucs_status_t st = ucp_worker_create(w->ctx_->get(), &wp, &w->worker_);
  if (st != UCS_OK) return ucx_error(st, "worker create");
  st = ucp_worker_get_efd(w->worker_, &w->efd_);
  if (st != UCS_OK) return ucx_error(st, "worker event fd");
  ucp_address_t* addr = nullptr;
  size_t len = 0;
  st = ucp_worker_get_address(w->worker_, &addr, &len);
  if (st != UCS_OK) return ucx_error(st, "worker address");
  const auto* p = reinterpret_cast<const uint8_t*>(addr);
  w->address_.assign(p, p + len);
  ucp_worker_release_address(w->worker_, addr);
  return w;
}

ucx_worker::~ucx_worker() {
  if (worker_) ucp_worker_destroy(worker_);
}

bool ucx_worker::progress() {
  return ucp_worker_progress(worker_) != 0;
}

void ucx_worker::sleep(int timeout_ms) {
  // arm returns BUSY when events are already pending: progress them instead of sleeping
  if (ucp_worker_arm(worker_) != UCS_OK) return;
  pollfd p{efd_, POLLIN, 0};
  ::poll(&p, 1, timeout_ms);
}

} // namespace troupe::transport
