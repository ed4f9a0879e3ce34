// gateway_impl.hpp: the gateway's state (gateway::impl), shared by its routes and metrics
// (gateway.cpp) and its session actors (gateway_session.cpp), and the session's spawn. Internal
// to actors/: it brings CAF in, so nothing outside these two files includes it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cctype>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "actors/gateway.hpp"
#include "actors/host.hpp"
#include "actors/messages_api.hpp"
#include "actors/openai_api.hpp"
#include "actors/pipeline.hpp"
#include "actors/responses_api.hpp"
#include "core/job_queue.hpp"
#include "exec/expert_load.hpp"
#include "transport/http_server.hpp"

namespace troupe::actors {

struct gateway::impl : std::enable_shared_from_this<gateway::impl> {
  using http_request = transport::http_request;
  using response_writer = transport::response_writer;

  host* h = nullptr;
  gateway_options opt;
  serving_info info;
  std::unique_ptr<transport::http_server> server;
  std::unique_ptr<job_queue> work; // parsing and tokenizing, off the I/O threads
  std::mutex status_mu;
  std::map<int, int64_t> by_status; // responses by HTTP status
  std::atomic<int64_t> counter{0};
  int64_t started = 0;
  std::mutex sessions_mu;
  std::map<caf::actor_addr, caf::actor> sessions; // live sessions, told to close at shutdown
  response_store responses; // /v1/responses kept for previous_response_id and GET

  void count(int status) {
    std::lock_guard<std::mutex> lk(status_mu);
    ++by_status[status];
  }
  /// An error answer; `anthropic`: in the Messages API's shape (its routes).
  void fail(const std::shared_ptr<response_writer>& w, const api_error& e,
            std::vector<std::pair<std::string, std::string>> headers = {}, bool anthropic = false) {
    count(e.status);
    // a refusal that passes (a full queue, a server starting or draining) says when to retry
    const bool has_retry = std::any_of(headers.begin(), headers.end(), [](const auto& h) {
      std::string k = h.first;
      for (auto& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return k == "retry-after";
    });
    if ((e.status == 429 || e.status == 503) && !has_retry)
      headers.emplace_back("Retry-After", "1");
    w->respond(e.status, "application/json", anthropic ? anthropic_error_body(e) : error_body(e),
               std::move(headers));
  }
  void add_session(const caf::actor& a) {
    std::lock_guard<std::mutex> lk(sessions_mu);
    sessions.emplace(a.address(), a);
  }
  void drop_session(const caf::actor_addr& a) {
    std::lock_guard<std::mutex> lk(sessions_mu);
    sessions.erase(a);
  }
  size_t live_sessions() {
    std::lock_guard<std::mutex> lk(sessions_mu);
    return sessions.size();
  }
  void handle(http_request req, std::shared_ptr<response_writer> w);
  void metrics(std::shared_ptr<response_writer> w);
  void render_metrics(const std::shared_ptr<response_writer>& w, const engine_stats* s,
                      const std::vector<exec::expert_count>& remote_experts,
                      const std::vector<shard_report>& shards);
  void health(std::shared_ptr<response_writer> w);
  /// Runs `job` (reading a request) on the parsing threads; `anthropic`: its errors in the
  /// Messages API's shape.
  void run_job(const std::shared_ptr<response_writer>& w, bool anthropic,
               std::function<void()> job);
  enum class endpoint { completions, chat, responses, messages };
  void generate(http_request req, std::shared_ptr<response_writer> w, endpoint api);
  void stored_response(const std::string& id, bool erase, std::shared_ptr<response_writer> w);
  // GET /v1/responses/{id}/input_items
  void stored_input_items(const std::string& id, const std::string& query,
                          std::shared_ptr<response_writer> w);
  void tokenize(http_request req, std::shared_ptr<response_writer> w, bool detokenize);
  void count_tokens(http_request req, std::shared_ptr<response_writer> w);
};

/// Spawns the session actor of one parsed request: it submits the prompts to `engine`, then
/// collects or streams the choices to `w`.
void spawn_session(caf::actor_system& sys, std::shared_ptr<gateway::impl> gw, parsed_request req,
                   std::shared_ptr<transport::response_writer> w, engine_actor engine);

} // namespace troupe::actors
