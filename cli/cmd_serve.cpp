// cmd_serve.cpp: `troupe serve`: loads a model, builds the pipeline (--tp / --pp /
// --placement), and serves the OpenAI-compatible API until SIGTERM or SIGINT, then stops
// accepting, lets requests in flight finish (up to --drain-timeout), ends the rest with an
// error event, and exits 0. When the supervisor gives up on a shard: --on-give-up retry keeps
// trying (capped interval), exit leaves with status 3.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <pthread.h>

#include <CLI/CLI.hpp>

#include "actors/gateway.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "kernels/device.hpp"
#include "text/jinja_template.hpp"
#include "text/unicode.hpp"
#include "transport/cors.hpp"
#include "workers.hpp"

namespace troupe::cli {
namespace {

// A stop signal that reached a thread other than the waiting one: threads that libraries start
// before main (OpenBLAS's pool) do not block SIGTERM, and the default action there would kill
// the process without draining. The handler only records it; the wait loop below acts.
std::atomic<int> stray_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void record_stop_signal(int sig) {
  stray_stop_signal.store(sig);
}

// Seconds given on the command line: finite, and within [lo, 1 day] (a NaN passes CLI11's
// Range, so the check is spelt out).
CLI::Validator seconds(double lo) {
  return CLI::Validator(
      [lo](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (end == s.c_str() || *end || !std::isfinite(v) || v < lo || v > 86400)
          return fmt::format("'{}' is not a number of seconds in [{}, 86400]", s, lo);
        return {};
      },
      "SECONDS");
}

struct serve_opts {
  std::string reasoning_format = "auto";
  std::string chat_template; // a file of Jinja text in place of the checkpoint's
  std::string chat_renderer = "jinja";
  std::string model, host = "127.0.0.1", placement, api_key, kv_memory = "256MiB", name,
                     kv_dtype = "f32", quantize;
  int port = 8080, tp = 1, ep = 1, pp = 1, threads = 1, block_size = 16, max_batch_tokens = 512,
      max_seqs = 256;
  int64_t max_waiting = 1024;
  int64_t context = 0; // tokens of one sequence (0: the model's)
  std::vector<std::string> inject, allowed_origins;
  worker_flags workers;
  double drain_timeout = 30, read_timeout = 15, step_timeout = 60, sse_keepalive = 15;
  double step_target_ms = 100; // stall-free batching (bench/README.md "Stall-free batching")
  size_t max_body = 4 << 20;
  bool no_prefix_cache = false;
  bool metrics_auth = false;
  std::string on_give_up = "retry";
  double retry_interval = 10;
  int max_restarts = 5;
};

// "512MiB", "2GB", "1073741824", or a fraction of free memory: "0.5".
expected<int64_t> parse_kv_memory(const std::string& text) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    std::string unit = text.substr(used);
    if (unit.empty() && v > 0 && v <= 1) {
      const int64_t free = kernels::get_device(kernels::backend::cpu)->memory_free();
      return static_cast<int64_t>(v * static_cast<double>(free));
    }
    // "2.0" or "1.5" with no unit is neither a fraction nor a count of bytes (it meant 2
    // bytes, and the KV cache its floor of one context): ask for the unit
    if (!std::isfinite(v)) throw std::invalid_argument("not finite");
    // a unitless 2 (or 2048) is far too little for any KV cache: a unit was meant
    if (unit.empty() &&
        (v != std::floor(v) || text.find('.') != std::string::npos || (v > 1 && v < 1024.0 * 1024)))
      return make_error(errc::invalid_argument,
                        "--kv-memory '{}': a number without a unit is a fraction of free memory "
                        "(at most 1) or whole bytes (at least 1 MiB){}",
                        text, v <= 4096 ? fmt::format("; did you mean {}GiB?", v) : "");
    const double mult = unit.empty() ? 1 : byte_unit(unit);
    if (mult == 0) throw std::invalid_argument(unit);
    if (v <= 0) throw std::invalid_argument("not positive");
    if (v * mult > 4.0e18) // past int64_t: it would wrap to the smallest cache
      return make_error(errc::invalid_argument, "--kv-memory '{}': more bytes than any machine has",
                        text);
    return static_cast<int64_t>(v * mult);
  } catch (const std::exception&) {
    return make_error(
        errc::invalid_argument,
        "--kv-memory '{}': give bytes (512MiB, 2GB) or a fraction of free memory (0.5)", text);
  }
}

int run_serve(const serve_opts& o) {
  // block the stop signals before our threads start, so the wait below takes them; one that
  // reaches a library's thread instead is recorded by the handler
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  struct sigaction sa {};
  sa.sa_handler = record_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  auto kv = parse_kv_memory(o.kv_memory); // before the load: a typo should not wait for it
  if (!kv) return fail(kv.error());
  auto m = open_model_verbose(o.model.empty() ? default_model_path() : o.model, false);
  if (!m) return fail(m.error());
  m = with_context(*m, o.context);
  if (!m) return fail(m.error());
  actors::host_options ho;
  ho.threads_per_shard = o.threads;
  auto place = o.placement.empty() ? even_placement((*m)->config, o.tp, o.pp)
                                   : parse_placement((*m)->config, o.placement);
  if (!place) return fail(place.error());
  if (auto st = set_expert_parallel((*m)->config, *place, o.ep); !st) return fail(st.error());
  ho.place = *place;
  if (auto st = apply_worker_flags(o.workers, ho); !st) return fail(st.error());
  ho.block_size = o.block_size;
  ho.kv_memory = *kv;
  const auto kvd = parse_kv_dtype(o.kv_dtype);
  if (!kvd) return fail(kvd.error());
  ho.kv_dtype = *kvd;
  const auto q = parse_quantize(o.quantize);
  if (!q) return fail(q.error());
  ho.quantize = *q;
  ho.sched.max_batch_tokens = o.max_batch_tokens;
  ho.sched.max_seqs = o.max_seqs;
  ho.sched.step_target_s = o.step_target_ms / 1e3;
  ho.sched.prefix_caching = !o.no_prefix_cache;
  ho.max_waiting = o.max_waiting;
  ho.step_timeout_s = o.step_timeout;
  ho.on_give_up =
      o.on_give_up == "exit" ? actors::give_up_policy::exit : actors::give_up_policy::retry;
  ho.retry_interval_s = o.retry_interval;
  ho.max_restarts = o.max_restarts;
  static std::atomic<bool> gave_up{false};
  ho.on_fatal = [] { gave_up.store(true); };
  for (const auto& f : o.inject)
    if (auto st = ho.faults.add(f); !st) return fail(st.error());
  if (!ho.faults.empty())
    std::fprintf(stderr, "troupe: fault injection on: %s\n", ho.faults.to_string().c_str());
  auto h = actors::host::start(*m, ho);
  if (!h) return fail(h.error());
  if (!(*h)->wait_ready(600))
    return fail(
        make_error(errc::unavailable, "shards did not start: {}", (*h)->stats().not_ready_reason));
  actors::gateway_options go;
  go.host = o.host;
  go.port = static_cast<uint16_t>(o.port);
  go.api_key = o.api_key;
  // NAME[,ALIAS...]: the first is the model's id, the others are names clients may use too
  for (size_t at = 0; at <= o.name.size() && !o.name.empty();) {
    const size_t comma = std::min(o.name.find(',', at), o.name.size());
    std::string one = o.name.substr(at, comma - at);
    if (one.empty())
      return fail(make_error(errc::invalid_argument, "--served-model-name: an empty name"));
    const bool again =
        one == go.model_name ||
        std::find(go.model_aliases.begin(), go.model_aliases.end(), one) != go.model_aliases.end();
    if (again)
      return fail(
          make_error(errc::invalid_argument, "--served-model-name: '{}' is named twice", one));
    if (go.model_name.empty())
      go.model_name = std::move(one);
    else
      go.model_aliases.push_back(std::move(one));
    at = comma + 1;
  }
  go.limits.read_timeout_s = o.read_timeout;
  go.limits.max_body_bytes = o.max_body;
  auto origins = transport::parse_origins(o.allowed_origins);
  if (!origins) return fail(origins.error());
  go.limits.allowed_origins = *origins;
  go.metrics_auth = o.metrics_auth;
  go.split_reasoning = o.reasoning_format != "none";
  go.sse_keepalive_s = o.sse_keepalive;
  go.native_chat = o.chat_renderer == "native";
  if (!o.chat_template.empty()) {
    // a file, or (as vLLM takes it) the template itself when no such file exists
    std::error_code ec;
    const bool file = std::filesystem::exists(o.chat_template, ec);
    if (file && !std::filesystem::is_regular_file(o.chat_template, ec))
      return fail(
          make_error(errc::invalid_argument, "--chat-template {}: not a file", o.chat_template));
    if (file) {
      std::ifstream in(o.chat_template, std::ios::binary);
      if (!in)
        return fail(
            make_error(errc::io_error, "--chat-template {}: cannot read it", o.chat_template));
      go.chat_template.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    } else if (o.chat_template.find("{{") != std::string::npos ||
               o.chat_template.find("{%") != std::string::npos) {
      go.chat_template = o.chat_template;
    } else {
      return fail(make_error(errc::not_found, "--chat-template {}: no such file (nor a template)",
                             o.chat_template));
    }
    if (go.chat_template.empty())
      return fail(make_error(errc::invalid_argument, "--chat-template {}: empty", o.chat_template));
    if (!unicode::valid(go.chat_template))
      return fail(make_error(errc::invalid_argument, "--chat-template {}: not valid UTF-8",
                             o.chat_template));
    if (!go.native_chat)
      if (auto t = jinja_template::parse(go.chat_template); !t)
        return fail(make_error(errc::invalid_argument, "--chat-template {}: {}", o.chat_template,
                               t.error().message));
  }
  // thousands of connections need more descriptors than the usual soft limit of 1024
  const auto [soft, hard] =
      transport::raise_open_file_limit(static_cast<int64_t>(go.limits.max_connections) + 256);
  if (soft >= 0 && soft < static_cast<int64_t>(go.limits.max_connections) + 256)
    std::fprintf(stderr,
                 "troupe: warning: open-file limit %lld (hard %lld) is below the %zu connections "
                 "the server accepts; connections beyond it wait\n",
                 static_cast<long long>(soft), static_cast<long long>(hard),
                 go.limits.max_connections);
  auto gw = actors::gateway::start(**h, go);
  if (!gw) return fail(gw.error());
  std::fprintf(stderr, "troupe: serving %s on http://%s:%u (placement %s, %lld KV blocks)\n",
               (*gw)->model_name().c_str(), o.host.c_str(), (*gw)->port(),
               ho.place.to_string().c_str(), static_cast<long long>((*h)->stats().kv_blocks_total));
  std::fflush(stderr);
  // wait for a stop signal, or for the supervisor to give up with --on-give-up exit
  int sig = 0;
  const timespec tick{0, 100 * 1000 * 1000};
  while (sig <= 0) {
    sig = sigtimedwait(&stop_signals, nullptr, &tick);
    if (sig <= 0) sig = stray_stop_signal.load();
    if (sig <= 0 && gave_up.load()) {
      std::fprintf(stderr, "troupe: a shard keeps failing and --on-give-up is exit: %s\n",
                   (*h)->stats().not_ready_reason.c_str());
      (*gw)->drain(0);
      (*gw)->close_all(1.0);
      (*gw)->shutdown();
      std::fflush(stderr);
      std::_Exit(3); // the orchestrator restarts the process
    }
  }
  std::fprintf(stderr, "troupe: %s: draining requests in flight (up to %.0f s)\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM", o.drain_timeout);
  const bool drained = (*gw)->drain(o.drain_timeout);
  if (!drained) {
    const size_t n = (*gw)->close_all(1.0);
    std::fprintf(stderr, "troupe: drain timeout; ended %zu open requests with an error\n", n);
  }
  (*gw)->shutdown();
  std::fprintf(stderr, "troupe: %s\n", drained ? "drained; bye" : "bye");
  std::fflush(stderr);
  return 0;
}

} // namespace

void add_serve(CLI::App& app, std::function<int()>& run) {
  auto o = std::make_shared<serve_opts>();
  auto* cmd = app.add_subcommand("serve", "serve the OpenAI-compatible HTTP API");
  cmd->add_option("--model,-m", o->model,
                  "a .gguf file or a Hugging Face directory (default: bundled stories260K)");
  cmd->add_option("--host", o->host, "listen address");
  cmd->add_option("--port", o->port, "listen port (0: any free port)")->check(CLI::Range(0, 65535));
  cmd->add_option("--tp", o->tp, "tensor-parallel shards per stage")->check(CLI::Range(1, 64));
  cmd->add_option("--ep", o->ep, "expert parallelism: 1, or --tp (each shard holds whole experts)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--pp", o->pp, "pipeline stages")->check(CLI::Range(1, 1024));
  cmd->add_option("--placement", o->placement, "per-stage layers and TP, e.g. 0-2:tp2,3-4:tp1");
  add_worker_flags(cmd, o->workers);
  cmd->add_option("--api-key", o->api_key, "require Authorization: Bearer KEY");
  cmd->add_option("--allowed-origins", o->allowed_origins,
                  "web origins whose pages may call the API (CORS), comma-separated, e.g. "
                  "https://chat.example.com; * for any; default none")
      ->delimiter(',');
  cmd->add_option("--served-model-name", o->name,
                  "the model id clients use (default: the file or directory name); more names "
                  "after commas are accepted too (NAME,ALIAS,...: a client that asks for a "
                  "fixed model name)");
  cmd->add_option("--threads", o->threads, "compute threads per shard")->check(CLI::Range(1, 256));
  cmd->add_option("--kv-memory", o->kv_memory,
                  "KV cache per shard: bytes (512MiB) or a fraction of free memory (0.5)");
  cmd->add_option("--kv-dtype", o->kv_dtype, "KV cache element type: f32, f16 or bf16");
  cmd->add_option("--context", o->context,
                  "tokens of one sequence, prompt and output (default: the model's context)")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 40));
  cmd->add_option("--quantize", o->quantize,
                  "quantize matrices stored in f32 / f16 / bf16 to q8_0 or q4_0 as they load "
                  "(none: as published)");
  cmd->add_option("--block-size", o->block_size, "tokens per KV block")->check(CLI::Range(1, 1024));
  cmd->add_option("--max-batch-tokens", o->max_batch_tokens, "token budget per step")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-seqs", o->max_seqs, "sequences per step")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--step-target-ms", o->step_target_ms,
                  "while streams decode, cut each step's prefill share to what keeps the step "
                  "near this many ms (learnt step time; 0: off, prompts take the whole budget)")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--reasoning-format", o->reasoning_format,
                  "auto: a chat reply's <think> block as reasoning_content (models whose "
                  "vocabulary has <think> and </think>); none: left in the content")
      ->check(CLI::IsMember({"auto", "none"}));
  cmd->add_option("--chat-template", o->chat_template,
                  "a Jinja chat template file to use in place of the checkpoint's "
                  "(tokenizer_config.json / GGUF), as vLLM's --chat-template");
  cmd->add_option("--chat-renderer", o->chat_renderer,
                  "jinja: run the chat template as transformers does (default); native: "
                  "Troupe's renderer of the template's recognised family")
      ->check(CLI::IsMember({"jinja", "native"}));
  cmd->add_option("--max-waiting", o->max_waiting, "queued requests before answering 429")
      ->check(CLI::Range(1, 1 << 30));
  cmd->add_option("--inject", o->inject,
                  "fault injection rule (repeatable), e.g. kill-shard:stage=0,rank=1,step=20");
  cmd->add_option("--drain-timeout", o->drain_timeout, "seconds to finish requests on SIGTERM")
      ->check(seconds(0));
  cmd->add_option("--read-timeout", o->read_timeout,
                  "seconds a client may take to send one request")
      ->check(seconds(0.01));
  cmd->add_option("--sse-keepalive", o->sse_keepalive,
                  "seconds a stream may go without a byte before a ': keep-alive' comment line is "
                  "written (proxies close idle streams; 0: never)")
      ->check(seconds(0));
  cmd->add_option("--step-timeout", o->step_timeout,
                  "seconds before a step in flight counts as lost")
      ->check(seconds(0.01));
  cmd->add_option("--max-body", o->max_body, "largest request body in bytes")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 34));
  cmd->add_flag("--no-prefix-cache", o->no_prefix_cache,
                "do not reuse KV blocks of shared prefixes");
  cmd->add_flag("--metrics-auth", o->metrics_auth,
                "require the API key on /metrics too (default: /metrics is open)");
  cmd->add_option("--on-give-up", o->on_give_up,
                  "when a shard keeps failing: retry (keep restarting it every "
                  "--retry-interval s, /health 503 meanwhile) or exit (status 3, for an "
                  "orchestrator to restart the process)")
      ->check(CLI::IsMember({"retry", "exit"}));
  cmd->add_option("--max-restarts", o->max_restarts,
                  "failures of a shard in a row, without a completed step, before giving up")
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--retry-interval", o->retry_interval,
                  "seconds between restart attempts after giving up (--on-give-up retry)")
      ->check(CLI::Range(0.1, 3600.0));
  cmd->callback([&run, o] { run = [o] { return run_serve(*o); }; });
}

} // namespace troupe::cli
