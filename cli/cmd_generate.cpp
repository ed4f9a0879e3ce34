// cmd_generate.cpp: `troupe generate`: one prompt, tokens streamed to stdout as they are
// made, or one JSON object with --json (prompt_tokens with BOS, generated tokens, text);
// --chat renders the prompt as a user's message through the model's chat template.
#include <cstdio>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "actors/host.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "exec/generator.hpp"
#include "text/chat_template.hpp"
#include "text/jinja_template.hpp"
#include "workers.hpp"

namespace troupe::cli {

namespace {

struct opts {
  std::string model, prompt, prompt_pos, backend = "cpu";
  int max_tokens = 32, top_k = 0, threads = 1;
  float temperature = 0.0f, top_p = 1.0f, min_p = 0.0f, repetition_penalty = 1.0f;
  uint64_t seed = 0;
  bool json = false, quiet = false, no_bos = false, chat = false;
  std::string system;
  int tp = 1, ep = 1, pp = 1;
  int64_t context = 0; // tokens of the sequence (0: the model's)
  std::string placement, quantize;
  worker_flags workers;
};

// --chat: the prompt as one user turn (after --system's) through the model's chat template,
// run as Jinja as the server runs it (the native renderer where it does not parse; the plain
// fallback without one), encoded without adding special tokens; the turn's end tokens stop it.
struct chat_turn {
  std::vector<int32_t> ids;
  std::vector<int32_t> stop_ids;
};

expected<chat_turn> render_turn(const tokenizer& tok, const opts& o, const std::string& prompt) {
  const std::string& tmpl = tok.chat_template();
  const chat_format f = detect_chat_format(tmpl);
  std::vector<chat_message> msgs;
  if (!o.system.empty()) msgs.push_back({"system", o.system});
  msgs.push_back({"user", prompt});
  chat_turn out;
  std::string text;
  bool rendered = false;
  if (!tmpl.empty()) {
    if (auto t = jinja_template::parse(tmpl)) {
      nlohmann::ordered_json messages = nlohmann::ordered_json::array();
      for (const auto& m : msgs) messages.push_back({{"role", m.role}, {"content", m.content}});
      const auto ctx = chat_template_variables(tok, std::move(messages), nullptr, true);
      TROUPE_TRY_ASSIGN(t_text, t->render(ctx));
      text = std::move(t_text);
      rendered = true;
    }
  }
  if (!rendered) {
    TROUPE_TRY_ASSIGN(native, render_chat(f, msgs, chat_default_system(f, tmpl)));
    text = std::move(native);
  }
  TROUPE_TRY_ASSIGN(ids, tok.encode(text, !rendered && !chat_has_bos(f) && !o.no_bos, true));
  out.ids = std::move(ids);
  for (std::string_view end : chat_end_of_turn(f))
    if (int32_t id = tok.find(end); id >= 0) out.stop_ids.push_back(id);
  return out;
}

// Generation through the actor pipeline (--tp / --pp / --placement).
int run_sharded(const opts& o, std::shared_ptr<const model_source> m,
                const std::vector<int32_t>& ids, const std::string& prompt,
                const std::vector<int32_t>& stop_ids) {
  actors::host_options ho;
  ho.threads_per_shard = o.threads;
  ho.where = o.backend == "ref" ? kernels::backend::ref : kernels::backend::cpu;
  const auto q = parse_quantize(o.quantize);
  if (!q) return fail(q.error());
  ho.quantize = *q;
  auto place = o.placement.empty() ? even_placement(m->config, o.tp, o.pp)
                                   : parse_placement(m->config, o.placement);
  if (!place) return fail(place.error());
  if (auto st = set_expert_parallel(m->config, *place, o.ep); !st) return fail(st.error());
  ho.place = *place;
  if (auto st = apply_worker_flags(o.workers, ho); !st) return fail(st.error());
  auto h = actors::host::start(m, ho);
  if (!h) return fail(h.error());
  if (!(*h)->wait_ready(300))
    return fail(
        make_error(errc::unavailable, "shards did not start: {}", (*h)->stats().not_ready_reason));
  if (!o.quiet && !o.json) {
    const auto bytes = (*h)->resident_bytes();
    std::string per;
    for (auto b : bytes) per += fmt::format("{}{:.2f}", per.empty() ? "" : " ", b / 1048576.0);
    std::fprintf(stderr, "troupe: placement %s, %zu shards, resident weights per shard (MiB): %s\n",
                 ho.place.to_string().c_str(), bytes.size(), per.c_str());
  }
  actors::gen_request r;
  r.prompt = ids;
  r.stop_ids = stop_ids;
  r.max_tokens = o.max_tokens;
  r.sampling.temperature = o.temperature;
  r.sampling.top_k = o.top_k;
  r.sampling.top_p = o.top_p;
  r.sampling.min_p = o.min_p;
  r.sampling.repetition_penalty = o.repetition_penalty;
  r.sampling.seed = o.seed;
  if (!o.json) {
    std::fputs(prompt.c_str(), stdout);
    std::fflush(stdout);
  }
  auto out = (*h)->generate(r, [&o](const actors::gen_event& e) {
    if (o.json) return;
    std::fputs(e.text.c_str(), stdout);
    std::fflush(stdout);
  });
  if (!out) return fail(out.error());
  const auto& c = (*out)[0];
  if (o.json) {
    nlohmann::json j = {{"prompt_tokens", c.prompt_tokens},
                        {"tokens", c.tokens},
                        {"text", c.text},
                        {"finish_reason", to_string(c.finish)}};
    std::puts(j.dump().c_str());
  } else {
    std::puts("");
    std::fflush(stdout);
  }
  if (c.finish == finish_reason::error)
    std::fprintf(stderr, "troupe: %s\n", c.err.to_string().c_str());
  return c.finish == finish_reason::error ? 1 : 0;
}

} // namespace

void add_generate(CLI::App& app, std::function<int()>& run) {
  auto o = std::make_shared<opts>();
  auto* cmd = app.add_subcommand("generate", "generate text from a prompt");
  cmd->add_option("prompt_text", o->prompt_pos, "the prompt (or --prompt)");
  cmd->add_option("--model,-m", o->model,
                  "a .gguf file or a Hugging Face directory (default: bundled stories260K)");
  cmd->add_option("--prompt,-p", o->prompt, "the prompt");
  cmd->add_option("--max-tokens,-n", o->max_tokens, "tokens to generate")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--temperature,-t", o->temperature, "0 = greedy")->check(CLI::Range(0.0, 2.0));
  cmd->add_option("--top-k", o->top_k, "keep the k most likely tokens (0 = off)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", o->top_p, "nucleus sampling mass")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-p", o->min_p, "drop tokens below min_p x the top probability")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--repetition-penalty", o->repetition_penalty, "CTRL-style penalty (1 = off)");
  cmd->add_option("--seed", o->seed, "seed for sampling (same seed, same text)");
  cmd->add_option("--threads", o->threads, "compute threads")->check(CLI::Range(1, 256));
  cmd->add_option("--context", o->context,
                  "tokens of the sequence, prompt and output (default: the model's context)")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 40));
  cmd->add_option("--backend", o->backend, "cpu or ref")->check(CLI::IsMember({"cpu", "ref"}));
  cmd->add_option("--quantize", o->quantize,
                  "quantize matrices stored in f32 / f16 / bf16 to q8_0 or q4_0 as they load "
                  "(none: as published)");
  cmd->add_option("--tp", o->tp, "tensor-parallel shards per stage")->check(CLI::Range(1, 64));
  cmd->add_option("--ep", o->ep, "expert parallelism: 1, or --tp (each shard holds whole experts)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--pp", o->pp, "pipeline stages")->check(CLI::Range(1, 1024));
  cmd->add_option("--placement", o->placement, "per-stage layers and TP, e.g. 0-2:tp2,3-4:tp1");
  cmd->add_flag("--json", o->json, "print one JSON object instead of streaming text");
  cmd->add_flag("--quiet,-q", o->quiet, "no loading messages");
  cmd->add_flag("--no-bos", o->no_bos, "do not add the BOS token");
  cmd->add_flag("--chat", o->chat,
                "the prompt is a user's chat message: rendered by the model's chat template, "
                "and the reply (only) is printed");
  cmd->add_option("--system", o->system, "with --chat: a system message first");
  add_worker_flags(cmd, o->workers);
  cmd->callback([&run, o] {
    run = [o]() -> int {
      const std::string prompt = !o->prompt.empty() ? o->prompt : o->prompt_pos;
      if (prompt.empty())
        return fail(make_error(errc::invalid_argument, "no prompt (give one, or --prompt)"));
      auto m = open_model_verbose(o->model.empty() ? default_model_path() : o->model,
                                  o->quiet || o->json);
      if (!m) return fail(m.error());
      m = with_context(*m, o->context);
      if (!m) return fail(m.error());
      if (!o->system.empty() && !o->chat)
        return fail(make_error(errc::invalid_argument, "--system goes with --chat"));
      std::vector<int32_t> stop_ids;
      expected<std::vector<int32_t>> ids = std::vector<int32_t>();
      if (o->chat) {
        auto turn = render_turn(*(*m)->tok, *o, prompt);
        if (!turn) return fail(turn.error());
        ids = std::move(turn->ids);
        stop_ids = std::move(turn->stop_ids);
      } else {
        ids = (*m)->tok->encode(prompt, !o->no_bos, false);
      }
      if (!ids) return fail(ids.error());
      // a chat prints the reply only; a completion its prompt first
      const std::string shown = o->chat ? std::string() : prompt;
      if (o->tp > 1 || o->pp > 1 || !o->placement.empty() || o->workers.workers > 0)
        return run_sharded(*o, *m, *ids, shown, stop_ids);
      exec::exec_options ro;
      ro.threads = o->threads;
      ro.where = o->backend == "ref" ? kernels::backend::ref : kernels::backend::cpu;
      const auto q = parse_quantize(o->quantize);
      if (!q) return fail(q.error());
      ro.quantize = *q;
      auto g = exec::generator::create(*m, ro);
      if (!g) return fail(g.error());
      exec::generate_options go;
      go.max_tokens = o->max_tokens;
      go.sampling.temperature = o->temperature;
      go.sampling.top_k = o->top_k;
      go.sampling.top_p = o->top_p;
      go.sampling.min_p = o->min_p;
      go.sampling.repetition_penalty = o->repetition_penalty;
      go.sampling.seed = o->seed;
      go.stop_ids = stop_ids;
      if (!o->json) {
        std::fputs(shown.c_str(), stdout);
        std::fflush(stdout);
      }
      auto r = (*g)->run(
          *ids, go, o->json ? std::function<void(const std::string&)>() : [](const std::string& s) {
            std::fputs(s.c_str(), stdout);
            std::fflush(stdout);
          });
      if (!r) return fail(r.error());
      if (o->json) {
        nlohmann::json j = {{"prompt_tokens", r->prompt_tokens},
                            {"tokens", r->tokens},
                            {"text", r->text},
                            {"finish_reason", r->finish_reason}};
        std::puts(j.dump().c_str());
      } else {
        std::puts("");
        std::fflush(stdout); // the newline before the timing line, also when both are piped
        if (!o->quiet)
          std::fprintf(stderr,
                       "troupe: %zu prompt tokens in %.2f ms, %zu tokens in %.2f ms (%.1f tok/s)\n",
                       r->prompt_tokens.size(), r->prefill_seconds * 1e3, r->tokens.size(),
                       r->decode_seconds * 1e3,
                       r->tokens.size() > 1 ? (r->tokens.size() - 1) / r->decode_seconds : 0.0);
      }
      return 0;
    };
  });
}

} // namespace troupe::cli
