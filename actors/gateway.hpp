// gateway.hpp: the HTTP gateway: an OpenAI-compatible API in front of a host's engine.
// Routes: POST /v1/completions, POST /v1/chat/completions, GET (and HEAD) /v1/models,
// /v1/models/{id}, /health, /metrics (Prometheus text, also under vLLM's metric names). The
// I/O threads only route; a small job queue parses and tokenizes bodies, and each request
// becomes a session actor that submits to the engine, turns its tokens into text (stop
// strings, logprob strings, echo) and streams server-sent events or answers once. The status
// line waits until the engine accepted the request, so a refusal is a real HTTP status; a
// failure after it ends the stream with an error event. A client that disconnects cancels
// its request (its KV leases go with it). Bad input gets OpenAI's error shape with the status
// of one table (openai_api.hpp) and never reaches the engine. /health says 200 only when
// every shard can serve. Thread-safe facade.
// Tests: tests/actors/gateway_test.cpp, tests/integration/*.py
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "actors/host.hpp"
#include "transport/http_server.hpp"

namespace troupe::actors {

struct gateway_options {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;
  std::string api_key;                    // empty: no authentication
  std::string model_name;                 // empty: the model's file or directory name
  std::vector<std::string> model_aliases; // other names requests may give for it
  bool metrics_auth = false;   // /metrics needs the API key too (default: open, like /health)
  int parse_threads = 2;       // the job queue that parses and tokenizes request bodies
  bool split_reasoning = true; // a chat reply's <think> block as reasoning_content
                               // (text/think.hpp); false: left in the content
  std::string chat_template;   // Jinja text in place of the checkpoint's (serve --chat-template)
  bool native_chat = false;    // render chats with text/chat_template's native renderers, not
                               // by running the template (serve --chat-renderer native)
  double sse_keepalive_s = 15; // a stream silent this long gets a ": keep-alive" comment line
                               // (an SSE comment: clients skip it, proxies see bytes); 0: never
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
  /// Ends every request still open (streams get an error event and their end, others a
  /// 503), waiting up to `timeout_s` for the bytes to go out; returns how many there were.
  size_t close_all(double timeout_s);
  void shutdown();

  struct impl;

 private:
  explicit gateway(std::shared_ptr<impl> p);
  std::shared_ptr<impl> impl_; // sessions share it: they may outlive the facade by a moment
};

} // namespace troupe::actors
