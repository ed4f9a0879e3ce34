// gateway.cpp: HTTP routes and metrics (gateway.hpp). The HTTP I/O threads only route: bodies
// are parsed and tokenized on the gateway's job queue, and each request's output work
// (detokenizing, stop strings, logprob strings, JSON) runs in its session actor
// (gateway_session.cpp) on CAF's threads, never on the engine's.
#include "actors/gateway.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "actors/gateway_impl.hpp"
#include "actors/openai_api.hpp"
#include "actors/pipeline.hpp"
#include "core/job_queue.hpp"
#include "core/log.hpp"
#include "exec/expert_load.hpp"
#include "kernels/jit.hpp"
#include "text/unicode.hpp"

namespace troupe::actors {

using transport::http_request;
using transport::response_writer;

namespace {

// A Prometheus label value as the text format wants it: \\, \" and \n escaped.
std::string label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out;
}

// Asks `to` once (`atom`), hands the reply to `done` (null on an error or no answer within
// `timeout`), then quits.
template <class Reply, class Actor, class Atom>
caf::behavior probe(caf::event_based_actor* self, Actor to, Atom atom, std::chrono::seconds timeout,
                    std::function<void(const Reply*)> done) {
  self->request(to, timeout, atom)
      .then(
          [=](const Reply& r) {
            done(&r);
            self->quit();
          },
          [=](const caf::error&) {
            done(nullptr);
            self->quit();
          });
  return {[](int) {}};
}

// The engine's stats (2 s).
caf::behavior stats_probe(caf::event_based_actor* self, engine_actor engine,
                          std::function<void(const engine_stats*)> done) {
  return probe<engine_stats>(self, engine, stats_atom::value, std::chrono::seconds(2),
                             std::move(done));
}

// Authorization: Bearer KEY, the scheme in any case (RFC 7235).
bool authorized(const http_request& req, const std::string& key, std::string& why) {
  auto it = req.headers.find("authorization");
  auto xkey = req.headers.find("x-api-key"); // Anthropic's clients send the key in this one
  if (it == req.headers.end() && xkey == req.headers.end()) {
    why = "missing API key (Authorization: Bearer ..., or x-api-key)";
    return false;
  }
  // compare without an early exit, so timing does not tell how much of a guess was right
  auto same = [&key](const std::string& t) {
    unsigned diff = t.size() != key.size();
    for (size_t i = 0; i < t.size() && i < key.size(); ++i)
      diff |= static_cast<unsigned>(t[i] ^ key[i]);
    return diff == 0;
  };
  if (xkey != req.headers.end() && same(xkey->second)) return true; // either header may hold it
  std::string token;
  if (it == req.headers.end()) {
    token = xkey->second;
  } else {
    const std::string& v = it->second;
    const size_t sp = v.find(' ');
    std::string scheme = v.substr(0, sp);
    for (auto& ch : scheme) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    token = sp == std::string::npos ? "" : v.substr(sp + 1);
    while (!token.empty() && token.front() == ' ') token.erase(0, 1);
    if (scheme != "bearer") {
      why = "the Authorization scheme must be Bearer";
      return false;
    }
  }
  const bool ok = same(token);
  if (!ok) why = "wrong API key";
  return ok;
}

} // namespace

void gateway::impl::health(std::shared_ptr<response_writer> w) {
  auto& in = h->internals();
  in.sys->spawn(stats_probe, in.engine, [self = shared_from_this(), w](const engine_stats* s) {
    nlohmann::json j;
    int code = 503;
    if (s && s->ready) {
      code = 200;
      j = {{"status", "ok"}};
    } else {
      j = {{"status", "unavailable"},
           {"reason", s ? s->not_ready_reason : "the engine does not answer"}};
    }
    if (s && !s->restart_policy.empty()) j["restart_policy"] = s->restart_policy;
    self->count(code);
    w->respond(code, "application/json", j.dump());
  });
}

// The expert counts of every worker process (3 s; none on an error).
caf::behavior experts_probe(caf::event_based_actor* self, pool_actor pool,
                            std::function<void(std::vector<exec::expert_count>)> done) {
  return probe<std::vector<int64_t>>(self, pool, experts_atom::value, std::chrono::seconds(3),
                                     [done = std::move(done)](const std::vector<int64_t>* v) {
                                       if (!v) return done({});
                                       auto c = exec::unflatten(*v);
                                       done(c ? std::move(*c) : std::vector<exec::expert_count>{});
                                     });
}

// Every shard's report from the supervisor (2 s; none on an error).
caf::behavior shards_probe(caf::event_based_actor* self, supervisor_actor sup,
                           std::function<void(std::vector<shard_report>)> done) {
  return probe<std::vector<shard_report>>(
      self, sup, shards_atom::value, std::chrono::seconds(2),
      [done = std::move(done)](const std::vector<shard_report>* v) {
        done(v ? *v : std::vector<shard_report>{});
      });
}

void gateway::impl::metrics(std::shared_ptr<response_writer> w) {
  auto& in = h->internals();
  // the workers' expert counts first (with worker processes), the shards' reports, then the
  // engine's stats
  auto with_stats = [self = shared_from_this(), w](std::vector<exec::expert_count> remote) {
    auto& hi = self->h->internals();
    hi.sys->spawn(shards_probe, hi.supervisor,
                  [self, w, remote = std::move(remote)](std::vector<shard_report> shards) {
                    auto& h2 = self->h->internals();
                    h2.sys->spawn(
                        stats_probe, h2.engine,
                        [self, w, remote, shards = std::move(shards)](const engine_stats* s) {
                          self->render_metrics(w, s, remote, shards);
                        });
                  });
  };
  if (in.pool)
    in.sys->spawn(experts_probe, in.pool, with_stats);
  else
    with_stats({});
}

void gateway::impl::render_metrics(const std::shared_ptr<response_writer>& w, const engine_stats* s,
                                   const std::vector<exec::expert_count>& remote_experts,
                                   const std::vector<shard_report>& shards) {
  const std::string label = fmt::format("model_name=\"{}\"", label_value(info.model_name));
  std::string out;
  auto metric = [&](const std::string& name, const char* help, const char* type, double v,
                    const std::string& extra = "") {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{}{{{}{}}} {}\n", name, help, name, type, name,
                       label, extra, v);
  };
  {
    std::lock_guard<std::mutex> lk(status_mu);
    out += "# HELP troupe_http_requests_total HTTP responses by status code.\n# TYPE "
           "troupe_http_requests_total counter\n";
    for (auto [code, n] : by_status)
      out += fmt::format("troupe_http_requests_total{{{},status=\"{}\"}} {}\n", label, code, n);
  }
  // this process's counts and every worker's (each stage's first rank counts its layers)
  if (const auto experts = exec::merge_counts(exec::expert_counts(), remote_experts);
      !experts.empty()) {
    out += "# HELP troupe_expert_tokens_total Tokens routed to each expert of each MoE layer.\n"
           "# TYPE troupe_expert_tokens_total counter\n";
    for (const auto& e : experts)
      out += fmt::format("troupe_expert_tokens_total{{{},layer=\"{}\",expert=\"{}\"}} {}\n", label,
                         e.layer, e.expert, e.tokens);
  }
  if (!shards.empty()) { // where each shard runs and its device's memory when it loaded
    out += "# HELP troupe_shard_device_memory_bytes Memory of the device a shard runs on (used "
           "and free when it loaded).\n# TYPE troupe_shard_device_memory_bytes gauge\n";
    for (const auto& r : shards) {
      if (r.device.empty()) continue; // not loaded yet
      for (auto [state, v] :
           {std::pair<const char*, int64_t>{"used", r.device_total - r.device_free},
            {"free", r.device_free}})
        out += fmt::format("troupe_shard_device_memory_bytes{{{},shard=\"{}\",device=\"{}\",state="
                           "\"{}\"}} {}\n",
                           label, label_value(r.name), label_value(r.device), state, v);
    }
    out += "# HELP troupe_shard_resident_bytes Weight bytes a shard holds.\n# TYPE "
           "troupe_shard_resident_bytes gauge\n";
    for (const auto& r : shards)
      out += fmt::format("troupe_shard_resident_bytes{{{},shard=\"{}\"}} {}\n", label,
                         label_value(r.name), r.resident_bytes);
  }
  {
    const auto j = kernels::jit_counters();
    out += "# HELP troupe_jit_kernels_total Element-wise programs prepared by the JIT.\n# TYPE "
           "troupe_jit_kernels_total counter\n";
    out +=
        fmt::format("troupe_jit_kernels_total{{{},result=\"compiled\"}} {}\n", label, j.compiled);
    out += fmt::format("troupe_jit_kernels_total{{{},result=\"cached\"}} {}\n", label, j.cached);
    out += fmt::format("troupe_jit_kernels_total{{{},result=\"failed\"}} {}\n", label, j.failed);
    out += fmt::format(
        "# HELP troupe_composed_programs_total Element-wise programs run as "
        "compositions of primitives (no JIT).\n# TYPE "
        "troupe_composed_programs_total counter\ntroupe_composed_programs_total{{{}}} {}\n",
        label, j.composed);
  }
  if (s) {
    const double kv_usage =
        s->kv_blocks_total > 0
            ? 1.0 - static_cast<double>(s->kv_blocks_free) / static_cast<double>(s->kv_blocks_total)
            : 0.0;
    metric("troupe_requests_total", "Generation requests accepted by the engine.", "counter",
           s->requests_total);
    metric("troupe_prompt_tokens_total", "Prompt tokens of accepted requests.", "counter",
           s->prompt_tokens);
    metric("troupe_generation_tokens_total", "Tokens generated.", "counter", s->generated_tokens);
    metric("troupe_queue_depth", "Sequences waiting to be scheduled.", "gauge",
           s->requests_waiting);
    metric("troupe_running_sequences", "Sequences running.", "gauge", s->requests_running);
    metric("troupe_kv_blocks_total", "KV-cache blocks in the pool.", "gauge", s->kv_blocks_total);
    metric("troupe_kv_blocks_free", "KV-cache blocks free or evictable.", "gauge",
           s->kv_blocks_free);
    metric("troupe_kv_usage_ratio", "Fraction of KV-cache blocks in use.", "gauge", kv_usage);
    metric("troupe_kv_leases", "KV leases held by sequences.", "gauge", s->leases);
    metric("troupe_preemptions_total", "Sequences preempted for lack of KV blocks.", "counter",
           s->preemptions);
    metric("troupe_prefill_capped_steps_total",
           "Steps whose prefill share was cut to keep decoding streams near the step target.",
           "counter", s->prefill_capped_steps);
    metric("troupe_prefix_cache_hit_blocks_total", "KV blocks reused from the prefix cache.",
           "counter", s->prefix_hit_blocks);
    metric("troupe_prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
           "counter", s->prefix_query_tokens);
    metric("troupe_prefix_cache_hits_total", "Prompt tokens found in the prefix cache.", "counter",
           s->prefix_hit_tokens);
    metric("troupe_shard_restarts_total", "Shards restarted by the supervisor.", "counter",
           s->shard_restarts);
    metric("troupe_ready", "1 when every shard can serve.", "gauge", s->ready ? 1 : 0);
    out += "# HELP troupe_request_success_total Finished requests by finish reason.\n# TYPE "
           "troupe_request_success_total counter\n";
    for (auto [why, n] : {std::pair<const char*, int64_t>{"stop", s->finished_stop},
                          {"length", s->finished_length},
                          {"abort", s->finished_cancelled},
                          {"error", s->finished_error}})
      out += fmt::format("troupe_request_success_total{{{},finished_reason=\"{}\"}} {}\n", label,
                         why, n);
    out += s->ttft.exposition("troupe_time_to_first_token_seconds",
                              "Time from request to first token.", label);
    out += s->itl.exposition("troupe_inter_token_latency_seconds",
                             "Time between consecutive tokens of a stream.", label);
    out += s->e2e.exposition("troupe_e2e_request_latency_seconds",
                             "Time from arrival to the last token.", label);
    out += s->queue.exposition("troupe_request_queue_time_seconds",
                               "Time from arrival to the first step.", label);
    out += s->prefill.exposition("troupe_request_prefill_time_seconds",
                                 "Time from the first step to the first token.", label);
    out += s->decode.exposition("troupe_request_decode_time_seconds",
                                "Time from the first token to the last.", label);
    out +=
        s->prompt_len.exposition("troupe_request_prompt_tokens", "Prompt length in tokens.", label);
    out += s->generation_len.exposition("troupe_request_generation_tokens",
                                        "Generated tokens per request.", label);
    // the same under the names dashboards built for vLLM read
    metric("vllm:num_requests_running", "Sequences running.", "gauge", s->requests_running);
    metric("vllm:num_requests_waiting", "Sequences waiting.", "gauge", s->requests_waiting);
    metric("vllm:kv_cache_usage_perc", "KV-cache usage (1 = full).", "gauge", kv_usage);
    metric("vllm:gpu_cache_usage_perc", "KV-cache usage (1 = full; older name).", "gauge",
           kv_usage);
    metric("vllm:prompt_tokens_total", "Prompt tokens.", "counter", s->prompt_tokens);
    metric("vllm:generation_tokens_total", "Generated tokens.", "counter", s->generated_tokens);
    metric("vllm:num_preemptions_total", "Preemptions.", "counter", s->preemptions);
    metric("vllm:prefix_cache_queries_total", "Prefix cache queries (tokens).", "counter",
           s->prefix_query_tokens);
    metric("vllm:prefix_cache_hits_total", "Prefix cache hits (tokens).", "counter",
           s->prefix_hit_tokens);
    out += "# HELP vllm:request_success_total Finished requests.\n# TYPE "
           "vllm:request_success_total counter\n";
    for (auto [why, n] : {std::pair<const char*, int64_t>{"stop", s->finished_stop},
                          {"length", s->finished_length},
                          {"abort", s->finished_cancelled},
                          {"error", s->finished_error}})
      out += fmt::format("vllm:request_success_total{{{},finished_reason=\"{}\"}} {}\n", label, why,
                         n);
    out += s->ttft.exposition("vllm:time_to_first_token_seconds", "TTFT.", label);
    out += s->itl.exposition("vllm:inter_token_latency_seconds", "ITL.", label);
    out += s->itl.exposition("vllm:time_per_output_token_seconds", "TPOT (older name).", label);
    out += s->e2e.exposition("vllm:e2e_request_latency_seconds", "E2E latency.", label);
    out += s->queue.exposition("vllm:request_queue_time_seconds", "Queue time.", label);
    out += s->prefill.exposition("vllm:request_prefill_time_seconds", "Prefill time.", label);
    out += s->decode.exposition("vllm:request_decode_time_seconds", "Decode time.", label);
    out += s->prompt_len.exposition("vllm:request_prompt_tokens", "Prompt tokens.", label);
    out +=
        s->generation_len.exposition("vllm:request_generation_tokens", "Generated tokens.", label);
  }
  count(200);
  w->respond(200, "text/plain; version=0.0.4", out);
}

void gateway::impl::run_job(const std::shared_ptr<response_writer>& w, bool anthropic,
                            std::function<void()> job) {
  // a parser that throws (a JSON type error no check caught) answers this request with a
  // 500; it never ends the parsing thread, and with it the server
  auto guarded = [self = shared_from_this(), w, anthropic, job = std::move(job)] {
    try {
      job();
    } catch (const std::exception& ex) {
      TROUPE_LOG_ERROR("gateway", "reading a request failed: {}", ex.what());
      self->fail(w,
                 {500, fmt::format("the request could not be read: {}", ex.what()), "server_error",
                  "", "internal_error"},
                 {}, anthropic);
    }
  };
  if (!work->post(std::move(guarded)))
    fail(w, error_for({errc::busy, "too many requests are being parsed; retry later"}), {},
         anthropic);
}

void gateway::impl::generate(http_request req, std::shared_ptr<response_writer> w, endpoint api) {
  // parsing and tokenizing can take a while for a large body: never on an I/O thread
  auto self = shared_from_this();
  auto job = [self, body = std::move(req.body), w, api] {
    auto parsed =
        api == endpoint::responses  ? parse_responses_request(body, self->info, &self->responses)
        : api == endpoint::messages ? parse_messages_request(body, self->info)
                                    : parse_request(body, api == endpoint::chat, self->info);
    if (auto* e = std::get_if<api_error>(&parsed))
      return self->fail(w, *e, {}, api == endpoint::messages);
    if (w->closed()) return;
    auto& in = self->h->internals();
    spawn_session(*in.sys, self, std::move(std::get<parsed_request>(parsed)), w, in.engine);
  };
  run_job(w, api == endpoint::messages, std::move(job));
}

void gateway::impl::count_tokens(http_request req, std::shared_ptr<response_writer> w) {
  auto self = shared_from_this();
  auto job = [self, body = std::move(req.body), w] {
    auto r = count_tokens_request(body, self->info);
    if (auto* e = std::get_if<api_error>(&r)) return self->fail(w, *e, {}, true);
    self->count(200);
    w->respond(200, "application/json", std::get<std::string>(r));
  };
  run_job(w, true, std::move(job));
}

void gateway::impl::stored_response(const std::string& id, bool erase,
                                    std::shared_ptr<response_writer> w) {
  std::optional<response_store::entry> found;
  if (erase ? !responses.erase(id) : !(found = responses.get(id)))
    return fail(w,
                {404, fmt::format("response '{}' is not stored here ({})", id, responses.bounds()),
                 "invalid_request_error", "", "not_found"});
  count(200);
  if (erase)
    return w->respond(200, "application/json",
                      nlohmann::json{{"id", id}, {"object", "response"}, {"deleted", true}}.dump());
  w->respond(200, "application/json", found->body);
}

void gateway::impl::stored_input_items(const std::string& id, const std::string& query,
                                       std::shared_ptr<response_writer> w) {
  const std::optional<response_store::entry> found = responses.get(id);
  if (!found)
    return fail(w,
                {404, fmt::format("response '{}' is not stored here ({})", id, responses.bounds()),
                 "invalid_request_error", "", "not_found"});
  api_error err;
  const std::optional<std::string> page = list_input_items(found->input_items, query, err);
  if (!page) return fail(w, err);
  count(200);
  w->respond(200, "application/json", *page);
}

void gateway::impl::tokenize(http_request req, std::shared_ptr<response_writer> w,
                             bool detokenize) {
  auto self = shared_from_this();
  auto job = [self, body = std::move(req.body), w, detokenize] {
    auto r = detokenize ? detokenize_request(body, self->info) : tokenize_request(body, self->info);
    if (auto* e = std::get_if<api_error>(&r)) return self->fail(w, *e);
    self->count(200);
    w->respond(200, "application/json", std::get<std::string>(r));
  };
  run_job(w, false, std::move(job));
}

void gateway::impl::handle(http_request req, std::shared_ptr<response_writer> w) {
  std::string path = req.target.substr(0, req.target.find('?'));
  const bool auth_exempt = path == "/health" || (path == "/metrics" && !opt.metrics_auth);
  const bool anthropic = path == "/v1/messages" || path == "/v1/messages/count_tokens";
  if (!opt.api_key.empty() && !auth_exempt) {
    std::string why;
    if (!authorized(req, opt.api_key, why))
      return fail(w, {401, why, "authentication_error", "", "invalid_api_key"},
                  {{"WWW-Authenticate", "Bearer realm=\"troupe\""}}, anthropic);
  }
  const bool get = req.method == "GET" || req.method == "HEAD", post = req.method == "POST";
  const std::string models_prefix = "/v1/models/";
  const std::string responses_prefix = "/v1/responses/";
  if (path == "/v1/completions" && post) return generate(std::move(req), w, endpoint::completions);
  if (path == "/v1/chat/completions" && post) return generate(std::move(req), w, endpoint::chat);
  if (path == "/v1/responses" && post) return generate(std::move(req), w, endpoint::responses);
  if (path == "/v1/messages" && post) return generate(std::move(req), w, endpoint::messages);
  if (path == "/v1/messages/count_tokens" && post) return count_tokens(std::move(req), w);
  const bool one_response = path.rfind(responses_prefix, 0) == 0 &&
                            path.find('/', responses_prefix.size()) == std::string::npos;
  if (one_response && (get || req.method == "DELETE"))
    return stored_response(path.substr(responses_prefix.size()), !get, w);
  const std::string items_suffix = "/input_items";
  const bool input_items =
      path.rfind(responses_prefix, 0) == 0 && path.ends_with(items_suffix) &&
      path.size() > responses_prefix.size() + items_suffix.size() &&
      path.find('/', responses_prefix.size()) == path.size() - items_suffix.size();
  if (input_items && get) {
    const size_t q = req.target.find('?');
    return stored_input_items(
        path.substr(responses_prefix.size(),
                    path.size() - responses_prefix.size() - items_suffix.size()),
        q == std::string::npos ? "" : req.target.substr(q + 1), w);
  }
  if (path == "/v1/models" && get) {
    count(200);
    return w->respond(200, "application/json", models_body(info, started));
  }
  if (path.rfind(models_prefix, 0) == 0 && get) {
    const std::string id = path.substr(models_prefix.size());
    if (!info.serves(id))
      return fail(w, {404,
                      fmt::format("model '{}' does not exist; this server serves '{}'", id,
                                  info.model_name),
                      "invalid_request_error", "model", "model_not_found"});
    count(200);
    return w->respond(200, "application/json", model_body(id, started));
  }
  if (path == "/health" && get) return health(w);
  if (path == "/metrics" && get) return metrics(w);
  if ((path == "/tokenize" || path == "/detokenize") && post)
    return tokenize(std::move(req), w, path == "/detokenize");
  const bool posted = path == "/v1/completions" || path == "/v1/chat/completions" ||
                      path == "/tokenize" || path == "/detokenize" || path == "/v1/responses" ||
                      anthropic;
  const bool known = posted || one_response || input_items || path == "/v1/models" ||
                     path.rfind(models_prefix, 0) == 0 || path == "/health" || path == "/metrics";
  if (known)
    return fail(w,
                {405, fmt::format("method {} is not allowed on {}", req.method, path),
                 "invalid_request_error", "", ""},
                {{"Allow", posted         ? "POST"
                           : one_response ? "GET, HEAD, DELETE"
                                          : "GET, HEAD"}},
                anthropic);
  return fail(w, {404, fmt::format("no route {} {}", req.method, path), "invalid_request_error", "",
                  "not_found"});
}

gateway::gateway(std::shared_ptr<impl> p)
    : impl_(std::move(p)) {}

expected<std::unique_ptr<gateway>> gateway::start(host& h, gateway_options o) {
  auto p = std::make_shared<impl>();
  p->h = &h;
  p->started = std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
  const model_source& m = h.model();
  if (o.model_name.empty()) {
    std::filesystem::path path(m.path);
    o.model_name =
        path.filename().empty() ? path.parent_path().filename().string() : path.filename().string();
  }
  p->opt = o;
  p->info.model_name = o.model_name;
  p->info.model_aliases = o.model_aliases;
  p->info.tok = m.tok.get();
  p->info.context = m.config.ctx;
  const std::string& tmpl = o.chat_template.empty() ? m.tok->chat_template() : o.chat_template;
  p->info.chat_template = tmpl;
  p->info.chat = detect_chat_format(tmpl);
  p->info.chat_system = chat_default_system(p->info.chat, tmpl);
  if (!tmpl.empty() && !o.native_chat && !unicode::valid(tmpl)) {
    TROUPE_LOG_WARN("gateway",
                    "the chat template is not valid UTF-8; chats are rendered "
                    "natively ({})",
                    to_string(p->info.chat));
  } else if (!tmpl.empty() && !o.native_chat) {
    // the template itself, as transformers runs it; the native renderer only where it fails
    if (auto t = jinja_template::parse(tmpl)) {
      p->info.jinja = std::make_shared<const jinja_template>(std::move(*t));
    } else {
      TROUPE_LOG_WARN("gateway", "{}; chats are rendered natively ({})", t.error().message,
                      to_string(p->info.chat));
    }
  }
  if (p->info.chat == chat_format::harmony) {
    p->info.harmony = harmony_tokens::of(*m.tok);
    if (!p->info.harmony)
      TROUPE_LOG_WARN("gateway", "harmony chat template without <|start|>, <|channel|>, "
                                 "<|message|> and <|end|> tokens: replies are not split");
  }
  // a model that thinks in <think> blocks: its chat replies split (--reasoning-format none
  // keeps them whole)
  if (p->info.chat != chat_format::harmony && o.split_reasoning) {
    p->info.think = think_tokens::of(*m.tok);
    p->info.thinking_switch =
        p->info.think.has_value() && tmpl.find("enable_thinking") != std::string::npos;
    p->info.think_opened = p->info.think.has_value() && chat_opens_think(p->info.chat, tmpl);
    if (p->info.think)
      TROUPE_LOG_INFO("gateway", "<think> blocks of chat replies are served as reasoning_content");
  }
  p->work = std::make_unique<job_queue>(std::max(1, o.parse_threads), 1024);
  auto* raw = p.get();
  TROUPE_TRY_ASSIGN(server, transport::http_server::start(
                                o.host, o.port,
                                [raw](http_request r, std::shared_ptr<response_writer> w) {
                                  raw->handle(std::move(r), std::move(w));
                                },
                                o.limits));
  p->server = std::move(server);
  TROUPE_LOG_INFO("gateway", "serving model={} chat_template={}{} on http://{}:{}", o.model_name,
                  to_string(p->info.chat), p->info.jinja ? " (jinja)" : "", o.host,
                  p->server->port());
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

size_t gateway::close_all(double timeout_s) {
  std::vector<caf::actor> open;
  {
    std::lock_guard<std::mutex> lk(impl_->sessions_mu);
    for (auto& [addr, a] : impl_->sessions) open.push_back(a);
  }
  for (auto& a : open) caf::anon_send(a, close_atom::value);
  // the sessions write their last bytes; the server then flushes them to the sockets
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (impl_->live_sessions() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  impl_->server->drain(std::max(
      0.0, std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count()));
  return open.size();
}

void gateway::shutdown() {
  if (impl_ && impl_->work) impl_->work->stop();
  if (impl_ && impl_->server) impl_->server->shutdown();
}

} // namespace troupe::actors
