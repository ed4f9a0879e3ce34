// http_server.hpp: Troupe's HTTP/1.1 server (Boost.Beast, C++20 coroutines, a small I/O
// thread pool). One coroutine per connection does all socket I/O; a handler, running on any
// thread, answers through a response_writer that queues whole responses or server-sent
// event chunks for that coroutine. Limits: header and body size (413 / 431 before the
// handler runs; a 413 is read to the end of a bounded body so the client receives it),
// `Expect: 100-continue` answered, HEAD answered with the GET header and no body, a read
// timeout that drops clients stalling mid-request, an idle keep-alive timeout, a connection
// cap, a listen backlog sized for bursts, and failed accepts (out of descriptors) retried
// with backoff and logged once per interval. While a response is in
// progress the connection watches its socket, so a client that goes away is noticed at
// once (the writer's on_close fires). stop() stops accepting; drain() waits for responses
// in progress. No CAF here: the gateway actor (actors/gateway) supplies the handler.
// Tests: tests/transport/http_server_test.cpp
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/expected.hpp"

namespace troupe::transport {

struct http_request {
  std::string method;
  std::string target;                         // path and query
  std::map<std::string, std::string> headers; // lower-case names
  std::string body;
  std::string remote;
};

/// Thread-safe; every call after the client left is a no-op.
class response_writer {
 public:
  virtual ~response_writer() = default;
  /// A complete response.
  virtual void respond(int status, const std::string& content_type, std::string body,
                       std::vector<std::pair<std::string, std::string>> headers = {}) = 0;
  /// Starts a chunked response (server-sent events); then chunks, then end().
  virtual void start_stream(int status, const std::string& content_type) = 0;
  virtual void chunk(std::string data) = 0;
  virtual void end() = 0;
  virtual bool closed() const = 0;
  /// Called once if the client disconnects before the response is complete.
  virtual void on_close(std::function<void()> f) = 0;
};

using http_handler = std::function<void(http_request, std::shared_ptr<response_writer>)>;

struct http_limits {
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 4 * 1024 * 1024;
  double read_timeout_s = 15; // to receive one whole request once it has started
  double idle_timeout_s = 60; // keep-alive connection with nothing to do
  size_t max_connections = 4096;
  int backlog = 4096;
  int threads = 2;
  /// CORS (cors.hpp): origins whose pages may call the server ("*": any); empty: none.
  std::vector<std::string> allowed_origins;
};

class http_server {
 public:
  /// Binds and starts serving; port 0 picks a free port.
  static expected<std::unique_ptr<http_server>>
  start(const std::string& host, uint16_t port, http_handler handler, http_limits limits = {});
  ~http_server();
  uint16_t port() const;
  /// Stops accepting new connections (requests in progress continue).
  void stop_accepting();
  /// Waits up to `timeout_s` for responses in progress to finish; true when none is left.
  bool drain(double timeout_s);
  /// Closes everything and joins the I/O threads.
  void shutdown();
  size_t open_connections() const;
  size_t responses_in_progress() const;
  /// accept() calls that failed (out of file descriptors, ...), each retried after a pause.
  int64_t accept_failures() const;

  struct impl;

 private:
  explicit http_server(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

/// Status line text ("Not Found") for a code.
std::string_view http_reason(int status);

/// Raises the soft limit on open files towards `wanted`, never above the hard limit (a
/// server holding thousands of connections needs more than the common default of 1024).
/// Returns {soft limit now, hard limit}; {-1, -1} when the limits cannot be read.
std::pair<int64_t, int64_t> raise_open_file_limit(int64_t wanted);

} // namespace troupe::transport
