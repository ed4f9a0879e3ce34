// gateway.cpp: HTTP routes, session actors and metrics (gateway.hpp).
#include "actors/gateway.hpp"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>

#include <nlohmann/json.hpp>

#include "actors/openai_api.hpp"
#include "actors/pipeline.hpp"
#include "runtime/log.hpp"

namespace troupe::actors {

using transport::http_request;
using transport::response_writer;

struct gateway::impl : std::enable_shared_from_this<gateway::impl> {
  host* h = nullptr;
  gateway_options opt;
  serving_info info;
  std::unique_ptr<transport::http_server> server;
  std::mutex status_mu;
  std::map<int, int64_t> by_status; // responses by HTTP status
  std::atomic<int64_t> counter{0};
  int64_t started = 0;

  void count(int status) {
    std::lock_guard<std::mutex> lk(status_mu);
    ++by_status[status];
  }
  void fail(const std::shared_ptr<response_writer>& w, const api_error& e) {
    count(e.status);
    w->respond(e.status, "application/json", error_body(e));
  }
  void handle(http_request req, std::shared_ptr<response_writer> w);
  void metrics(std::shared_ptr<response_writer> w);
  void health(std::shared_ptr<response_writer> w);
  void generate(http_request req, std::shared_ptr<response_writer> w, bool chat);
};

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

api_error engine_refusal(const std::string& why) {
  if (why.find("queue full") != std::string::npos)
    return {429, why, "rate_limit_error", "", "queue_full"};
  if (why.find("unavailable") != std::string::npos)
    return {503, why, "server_error", "", "unavailable"};
  if (why.find("out_of_memory") != std::string::npos)
    return {400, why, "invalid_request_error", "max_tokens", "context_length_exceeded"};
  return {400, why, "invalid_request_error", "", ""};
}

// One HTTP request's life: submit, collect or stream, answer.
struct session_state {
  std::shared_ptr<gateway::impl> gw; // kept alive while the session runs
  std::shared_ptr<response_writer> w;
  parsed_request req;
  std::string id;
  int64_t created = 0;
  std::vector<int64_t> engine_ids; // one per prompt
  std::vector<choice_result> choices;
  std::vector<bool> started, finished;
  int open = 0;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  bool cancelled = false;
  static inline const char* name = "troupe.session";
};

using session_ptr = caf::stateful_actor<session_state>*;

void finish_session(session_ptr self) {
  auto& st = self->state;
  if (st.req.stream) {
    if (st.req.include_usage)
      st.w->chunk(usage_chunk(st.req, st.id, st.created, st.prompt_tokens, st.completion_tokens));
    st.w->chunk("data: [DONE]\n\n");
    st.w->end();
  } else {
    st.w->respond(200, "application/json",
                  completion_body(st.req, st.id, st.created, st.choices, st.prompt_tokens,
                                  st.completion_tokens, *st.gw->info.tok));
  }
  st.gw->count(200);
  self->quit();
}

caf::behavior session(session_ptr self, std::shared_ptr<gateway::impl> gw, parsed_request req,
                      std::shared_ptr<response_writer> w, caf::actor engine) {
  auto& st = self->state;
  st.gw = gw;
  st.w = w;
  st.req = std::move(req);
  st.id = (st.req.chat ? "chatcmpl-" : "cmpl-") + std::to_string(gw->started) + "-" +
          std::to_string(++gw->counter);
  st.created = unix_now();
  const int n = st.req.n;
  const int total = static_cast<int>(st.req.prompts.size()) * n;
  st.choices.resize(total);
  st.started.assign(total, false);
  st.finished.assign(total, false);
  st.open = total;
  for (int i = 0; i < total; ++i) st.choices[i].index = i;
  // the client going away cancels everything this session asked for
  w->on_close([s = caf::actor_cast<caf::actor>(self)] { caf::anon_send(s, cancel_atom::value); });
  // submit every prompt; answer with an error if the engine refuses the first one
  for (size_t p = 0; p < st.req.prompts.size(); ++p) {
    gen_request g = st.req.base;
    g.prompt = st.req.prompts[p];
    g.tag = st.id;
    st.prompt_tokens += static_cast<int64_t>(g.prompt.size());
    self->request(engine, std::chrono::seconds(30), generate_atom::value, std::move(g),
                  caf::actor_cast<caf::actor>(self))
        .then(
            [=](int64_t engine_id) {
              auto& st = self->state;
              st.engine_ids.push_back(engine_id);
              if (st.cancelled) self->send(engine, cancel_atom::value, engine_id);
            },
            [=](const caf::error& e) {
              auto& st = self->state;
              for (int64_t eid : st.engine_ids) self->send(engine, cancel_atom::value, eid);
              if (!st.cancelled) st.gw->fail(st.w, engine_refusal(self->system().render(e)));
              self->quit();
            });
  }
  if (st.req.stream) w->start_stream(200, "text/event-stream");
  return {
      [=](event_atom, const gen_event& e) {
        auto& st = self->state;
        // choice index = prompt position * n + completion index
        int prompt_pos = -1;
        for (size_t p = 0; p < st.engine_ids.size(); ++p)
          if (st.engine_ids[p] == e.request_id) prompt_pos = static_cast<int>(p);
        if (prompt_pos < 0)
          return; // not ours (the engine answers a request's id before its events)
        const int idx = prompt_pos * st.req.n + e.index;
        if (idx < 0 || idx >= static_cast<int>(st.choices.size()) || st.finished[idx]) return;
        auto& c = st.choices[idx];
        c.text += e.text;
        c.tokens.insert(c.tokens.end(), e.tokens.begin(), e.tokens.end());
        c.logprobs.insert(c.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
        c.top_logprobs.insert(c.top_logprobs.end(), e.top_logprobs.begin(), e.top_logprobs.end());
        st.completion_tokens += static_cast<int64_t>(e.tokens.size());
        if (st.req.stream && (!e.text.empty() || !e.finish.empty() || !st.started[idx])) {
          st.w->chunk(stream_chunk(st.req, st.id, st.created, idx, e.text, e.finish,
                                   !st.started[idx], &e, *st.gw->info.tok));
          st.started[idx] = true;
        }
        if (!e.finish.empty()) {
          c.finish = e.finish;
          st.finished[idx] = true;
          if (--st.open == 0) {
            const bool failed = std::any_of(st.choices.begin(), st.choices.end(),
                                            [](auto& ch) { return ch.finish == "error"; });
            if (failed && !st.req.stream) {
              st.gw->fail(st.w, {503, "the model failed while generating (a shard is down)",
                                 "server_error", "", "unavailable"});
              self->quit();
              return;
            }
            finish_session(self);
          }
        }
      },
      [=](cancel_atom) {
        auto& st = self->state;
        st.cancelled = true;
        for (int64_t eid : st.engine_ids) self->send(engine, cancel_atom::value, eid);
        st.gw->count(499); // client closed the request
        self->quit();
      },
  };
}

// Answers once with the engine's stats.
caf::behavior stats_probe(caf::event_based_actor* self, caf::actor engine,
                          std::function<void(const engine_stats*)> done) {
  self->request(engine, std::chrono::seconds(5), stats_atom::value)
      .then(
          [=](const engine_stats& s) {
            done(&s);
            self->quit();
          },
          [=](const caf::error&) {
            done(nullptr);
            self->quit();
          });
  return {[](int) {}};
}

} // namespace

void gateway::impl::health(std::shared_ptr<response_writer> w) {
  auto& in = h->internals();
  in.sys->spawn(stats_probe, in.engine, [self = shared_from_this(), w](const engine_stats* s) {
    auto count = [&](int code) { self->count(code); };
    if (s && s->ready) {
      count(200);
      w->respond(200, "application/json", R"({"status":"ok"})");
    } else {
      const std::string why = s ? s->not_ready_reason : "the engine does not answer";
      count(503);
      w->respond(503, "application/json",
                 nlohmann::json{{"status", "unavailable"}, {"reason", why}}.dump());
    }
  });
}

void gateway::impl::metrics(std::shared_ptr<response_writer> w) {
  auto& in = h->internals();
  in.sys->spawn(stats_probe, in.engine, [self = shared_from_this(), w](const engine_stats* s) {
    auto& status_mu = self->status_mu;
    auto& by_status = self->by_status;
    auto count = [&](int code) { self->count(code); };
    std::string out;
    auto gauge = [&out](const char* name, const char* help, const char* type, double v) {
      out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, v);
    };
    {
      std::lock_guard<std::mutex> lk(status_mu);
      out += "# HELP troupe_http_requests_total HTTP responses by status code.\n# TYPE "
             "troupe_http_requests_total counter\n";
      for (auto [code, n] : by_status)
        out += fmt::format("troupe_http_requests_total{{status=\"{}\"}} {}\n", code, n);
    }
    if (s) {
      gauge("troupe_requests_total", "Generation requests accepted by the engine.", "counter",
            s->requests_total);
      gauge("troupe_prompt_tokens_total", "Prompt tokens of accepted requests.", "counter",
            s->prompt_tokens);
      gauge("troupe_generation_tokens_total", "Tokens generated.", "counter", s->generated_tokens);
      gauge("troupe_queue_depth", "Sequences waiting to be scheduled.", "gauge",
            s->requests_waiting);
      gauge("troupe_running_sequences", "Sequences running.", "gauge", s->requests_running);
      gauge("troupe_kv_blocks_total", "KV-cache blocks in the pool.", "gauge", s->kv_blocks_total);
      gauge("troupe_kv_blocks_free", "KV-cache blocks free or evictable.", "gauge",
            s->kv_blocks_free);
      gauge("troupe_kv_leases", "KV leases held by sequences.", "gauge", s->leases);
      gauge("troupe_preemptions_total", "Sequences preempted for lack of KV blocks.", "counter",
            s->preemptions);
      gauge("troupe_prefix_cache_hit_blocks_total", "KV blocks reused from the prefix cache.",
            "counter", s->prefix_hit_blocks);
      gauge("troupe_shard_restarts_total", "Shards restarted by the supervisor.", "counter",
            s->shard_restarts);
      gauge("troupe_ready", "1 when every shard can serve.", "gauge", s->ready ? 1 : 0);
      out += s->ttft.exposition("troupe_time_to_first_token_seconds",
                                "Time from request to first token.");
      out += s->itl.exposition("troupe_inter_token_latency_seconds",
                               "Time between consecutive tokens of a stream.");
    }
    count(200);
    w->respond(200, "text/plain; version=0.0.4", out);
  });
}

void gateway::impl::generate(http_request req, std::shared_ptr<response_writer> w, bool chat) {
  auto parsed = parse_request(req.body, chat, info);
  if (auto* e = std::get_if<api_error>(&parsed)) return fail(w, *e);
  auto& in = h->internals();
  in.sys->spawn(session, shared_from_this(), std::move(std::get<parsed_request>(parsed)), w,
                in.engine);
}

void gateway::impl::handle(http_request req, std::shared_ptr<response_writer> w) {
  std::string path = req.target.substr(0, req.target.find('?'));
  if (!opt.api_key.empty() && path != "/health") {
    auto it = req.headers.find("authorization");
    if (it == req.headers.end() || it->second != "Bearer " + opt.api_key)
      return fail(w, {401,
                      it == req.headers.end() ? "missing API key (Authorization: Bearer ...)"
                                              : "wrong API key",
                      "authentication_error", "", "invalid_api_key"});
  }
  const bool get = req.method == "GET", post = req.method == "POST";
  if (path == "/v1/completions" && post) return generate(std::move(req), w, false);
  if (path == "/v1/chat/completions" && post) return generate(std::move(req), w, true);
  if (path == "/v1/models" && get) {
    count(200);
    return w->respond(200, "application/json", models_body(info.model_name, started));
  }
  if (path == "/health" && get) return health(w);
  if (path == "/metrics" && get) return metrics(w);
  const bool known = path == "/v1/completions" || path == "/v1/chat/completions" ||
                     path == "/v1/models" || path == "/health" || path == "/metrics";
  if (known)
    return fail(w, {405, fmt::format("method {} is not allowed on {}", req.method, path),
                    "invalid_request_error", "", ""});
  return fail(w, {404, fmt::format("no route {} {}", req.method, path), "invalid_request_error", "",
                  "not_found"});
}

gateway::gateway(std::shared_ptr<impl> p)
    : impl_(std::move(p)) {}

expected<std::unique_ptr<gateway>> gateway::start(host& h, gateway_options o) {
  auto p = std::make_shared<impl>();
  p->h = &h;
  p->started = unix_now();
  const model_source& m = h.model();
  if (o.model_name.empty()) {
    std::filesystem::path path(m.path);
    o.model_name =
        path.filename().empty() ? path.parent_path().filename().string() : path.filename().string();
  }
  p->opt = o;
  p->info.model_name = o.model_name;
  p->info.tok = m.tok.get();
  p->info.context = m.config.ctx;
  p->info.chat = detect_chat_format(m.tok->chat_template());
  auto* raw = p.get();
  TROUPE_TRY_ASSIGN(server, transport::http_server::start(
                                o.host, o.port,
                                [raw](http_request r, std::shared_ptr<response_writer> w) {
                                  raw->handle(std::move(r), std::move(w));
                                },
                                o.limits));
  p->server = std::move(server);
  TROUPE_LOG_INFO("gateway", "serving model={} chat_template={} on http://{}:{}", o.model_name,
                  to_string(p->info.chat), o.host, p->server->port());
  return std::unique_ptr<gateway>(new gateway(std::move(p)));
}

gateway::~gateway() {
  shutdown();
}
uint16_t gateway::port() const {
  return impl_->server->port();
}
const std::string& gateway::model_name() const {
  return impl_->opt.model_name;
}

bool gateway::drain(double timeout_s) {
  impl_->server->stop_accepting();
  return impl_->server->drain(timeout_s);
}

void gateway::shutdown() {
  if (impl_ && impl_->server) impl_->server->shutdown();
}

} // namespace troupe::actors
