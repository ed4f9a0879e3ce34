// gateway.hpp: the HTTP gateway: an OpenAI-compatible API in front of a host's engine.
// Routes: POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /health,
// GET /metrics (Prometheus text). Each request becomes a session actor that tokenizes (via
// openai_api), submits to the engine, and streams server-sent events or answers once; a
// client that disconnects cancels its request (its KV leases go with it). Bad input gets
// OpenAI's error shape with the status of one table (openai_api.hpp) and never reaches the
// engine. /health says 200 only when every shard can serve. Thread-safe facade.
// Tests: tests/actors/gateway_test.cpp, tests/integration/openai_client_test.py
#pragma once

#include <memory>
#include <string>

#include "actors/host.hpp"
#include "transport/http_server.hpp"

namespace troupe::actors {

struct gateway_options {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;
  std::string api_key;    // empty: no authentication
  std::string model_name; // empty: the model's file or directory name
  transport::http_limits limits;
};

class gateway {
 public:
  static expected<std::unique_ptr<gateway>> start(host& h, gateway_options o);
  ~gateway();
  uint16_t port() const;
  const std::string& model_name() const;
  /// Stops accepting, waits up to `timeout_s` for requests in progress; true when all ended.
  bool drain(double timeout_s);
  void shutdown();

  struct impl;

 private:
  explicit gateway(std::shared_ptr<impl> p);
  std::shared_ptr<impl> impl_; // sessions share it: they may outlive the facade by a moment
};

} // namespace troupe::actors
