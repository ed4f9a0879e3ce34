// gateway_session.cpp: one HTTP request's session actor (gateway_impl.hpp): it submits each
// prompt to the engine (the status line waits until the engine accepted all of them, so a
// refusal is a real HTTP status), then turns the engine's token events into choices -
// detokenized, cut at stop strings, with logprobs, reasoning and tool calls - and writes them as
// one JSON body or as a stream: chat / completion chunks, or for the Responses and Messages APIs
// their output items or content blocks and typed events (response_builder, message_builder); a
// client that goes away cancels what it asked for.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/gateway_impl.hpp"
#include "actors/responses_api.hpp"
#include "actors/tool_reply.hpp"
#include "text/output_processor.hpp"

namespace troupe::actors {

using transport::response_writer;

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Code points in UTF-8 bytes (continuation bytes do not start one).
int64_t code_points(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// One choice (completion) of a request, on its way out.
struct choice_state {
  std::unique_ptr<output_processor> proc;
  std::unique_ptr<tool_reply> tools; // chat with tools: content and calls out of the text
  choice_result res;
  std::vector<int32_t> context; // prompt + accepted tokens: where the next token's piece starts
  int64_t offset = 0;           // code points of the choice's text so far (text_offset)
  bool started = false;         // a chunk of it has been written (streams)
  bool finished = false;
  int64_t tokens = 0; // accepted completion tokens
};

// One HTTP request's life: submit, collect or stream, answer.
struct session_state {
  std::shared_ptr<gateway::impl> gw; // kept alive while the session runs
  std::shared_ptr<response_writer> w;
  parsed_request req;
  engine_actor engine;
  std::string id;
  int64_t created = 0;
  std::vector<int64_t> engine_ids; // per prompt; -1 until the engine accepted it
  int pending = 0;                 // prompts not yet answered by the engine
  std::vector<choice_state> choices;
  // scored prompt tokens per prompt, by position (echo with logprobs)
  std::vector<std::vector<std::optional<prompt_logprob>>> scores;
  int open = 0;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  std::vector<int32_t> cached; // per prompt: its tokens the prefix cache gave (usage)
  bool header_sent = false;
  bool done = false;
  std::chrono::steady_clock::time_point last_write; // of a stream's bytes (keep-alive)
  std::vector<std::string> held;          // stream chunks made before the header could go out
  std::unique_ptr<response_builder> resp; // a /v1/responses request: its output items
  std::unique_ptr<message_builder> msg;   // a /v1/messages request: its content blocks
  static inline const char* name = "troupe.session";
};

using session_ptr = caf::stateful_actor<session_state>*;

void cancel_all(session_ptr self) {
  auto& st = self->state;
  for (int64_t eid : st.engine_ids)
    if (eid >= 0) self->send(st.engine, cancel_atom::value, eid);
}

void emit(session_ptr self, std::string chunk) {
  auto& st = self->state;
  if (st.header_sent) {
    st.w->chunk(std::move(chunk));
    st.last_write = std::chrono::steady_clock::now();
  } else {
    st.held.push_back(std::move(chunk));
  }
}

std::chrono::milliseconds keepalive_period(session_ptr self) {
  const double s = self->state.gw->opt.sse_keepalive_s; // > 0: at least a millisecond
  return std::chrono::milliseconds(s > 0 ? std::max<int64_t>(1, static_cast<int64_t>(s * 1000))
                                         : 0);
}

// A stream that wrote nothing for the keep-alive period (a long prefill, a tool call's text
// held until it is complete, a queue) gets an SSE comment line: clients skip it, and proxies
// that close idle connections see bytes. Checked once per period.
void keep_alive(session_ptr self) {
  auto& st = self->state;
  if (st.done) return;
  const auto period = keepalive_period(self);
  const auto idle = std::chrono::steady_clock::now() - st.last_write;
  if (idle >= period) emit(self, ": keep-alive\n\n");
  self->delayed_send(self, idle >= period ? period : period - idle, tick_atom::value);
}

// Every prompt is accepted: the status line may go out now, and what waited with it.
void open_stream(session_ptr self) {
  auto& st = self->state;
  st.w->start_stream(200, "text/event-stream");
  st.header_sent = true;
  for (auto& c : st.held) st.w->chunk(std::move(c));
  st.held.clear();
  st.last_write = std::chrono::steady_clock::now();
  if (const auto period = keepalive_period(self); period.count() > 0)
    self->delayed_send(self, period, tick_atom::value);
}

// The request failed: an HTTP error while nothing was written, else an error event in the
// stream (OpenAI's shape) and its end.
void fail_session(session_ptr self, const api_error& e) {
  auto& st = self->state;
  if (st.done) return;
  st.done = true;
  cancel_all(self);
  if (st.req.stream && st.header_sent) st.gw->count(e.status); // (before the stream ends)
  if (st.req.stream && st.header_sent && (st.resp || st.msg)) {
    st.w->chunk(st.resp ? st.resp->failed(e) : anthropic_error_event(e));
    st.w->end();
  } else if (st.req.stream && st.header_sent) {
    st.w->chunk(error_event(e));
    st.w->chunk("data: [DONE]\n\n");
    st.w->end();
  } else {
    st.gw->fail(st.w, e, {}, st.req.messages_api);
  }
  self->quit();
}

// The prompts' tokens the prefix cache gave, each prompt counted once (its first completion's).
int64_t cached_tokens(const session_state& st) {
  int64_t n = 0;
  for (int32_t c : st.cached) n += c;
  return n;
}

void finish_session(session_ptr self) {
  auto& st = self->state;
  if (st.done) return;
  st.done = true;
  // counted before the answer goes out: a client that reads /metrics once it has its answer
  // finds it there (counted after, a fast one could miss it)
  st.gw->count(200);
  if (st.msg || st.resp) { // one choice
    const auto& c = st.choices[0];
    std::string events =
        st.msg ? st.msg->finish(c.res.finish, c.proc->stop_string(), st.completion_tokens,
                                cached_tokens(st))
               : st.resp->finish(c.res.finish,
                                 {st.prompt_tokens, st.completion_tokens, cached_tokens(st)});
    if (st.resp && st.resp->stored())
      st.gw->responses.put(st.id,
                           {st.resp->body(), st.resp->conversation(), st.resp->input_items()});
    if (st.req.stream) {
      st.w->chunk(std::move(events));
      st.w->end();
    } else {
      st.w->respond(200, "application/json", st.msg ? st.msg->body() : st.resp->body());
    }
  } else if (st.req.stream) {
    if (st.req.include_usage)
      st.w->chunk(usage_chunk(st.req, st.id, st.created,
                              {st.prompt_tokens, st.completion_tokens, cached_tokens(st)}));
    st.w->chunk("data: [DONE]\n\n");
    st.w->end();
  } else {
    std::vector<choice_result> out;
    for (auto& c : st.choices) out.push_back(std::move(c.res));
    st.w->respond(200, "application/json",
                  completion_body(st.req, st.id, st.created, out, st.prompt_tokens,
                                  st.completion_tokens, *st.gw->info.tok, cached_tokens(st)));
  }
  self->quit();
}

// Logprob detail of `ids`, each after `context` and the ones before it.
token_logprobs detail(const tokenizer& tok, std::vector<int32_t>& context,
                      std::span<const int32_t> ids, std::span<const float> lps,
                      std::span<const std::vector<std::pair<int32_t, float>>> tops,
                      int64_t& offset) {
  token_logprobs out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string piece = token_pieces(tok, context, ids.subspan(i, 1))[0];
    out.pieces.push_back(piece);
    out.logprobs.push_back(i < lps.size() ? std::optional<float>(lps[i]) : std::nullopt);
    std::vector<std::pair<std::string, float>> alts;
    if (i < tops.size())
      for (auto [alt, v] : tops[i])
        alts.emplace_back(token_pieces(tok, context, std::span<const int32_t>(&alt, 1))[0], v);
    out.top.push_back(std::move(alts));
    out.text_offset.push_back(offset);
    offset += code_points(piece);
    context.push_back(ids[i]);
  }
  return out;
}

// The echoed prompt of a choice: its text, and with logprobs its tokens' detail.
void echo_prompt(session_ptr self, int prompt_pos, choice_state& c, std::string& text,
                 token_logprobs* lp) {
  auto& st = self->state;
  text = st.req.prompt_texts[static_cast<size_t>(prompt_pos)];
  if (!lp) return;
  const tokenizer& tok = *st.gw->info.tok;
  const auto& prompt = st.req.prompts[static_cast<size_t>(prompt_pos)];
  const auto& sc = st.scores[static_cast<size_t>(prompt_pos)];
  std::vector<int32_t> ctx;
  int64_t offset = 0;
  for (size_t i = 0; i < prompt.size(); ++i) {
    const std::string piece = token_pieces(tok, ctx, std::span<const int32_t>(&prompt[i], 1))[0];
    lp->pieces.push_back(piece);
    std::vector<std::pair<std::string, float>> alts;
    if (i > 0 && i < sc.size() && sc[i]) {
      lp->logprobs.push_back(sc[i]->logprob);
      for (auto [alt, v] : sc[i]->top)
        alts.emplace_back(token_pieces(tok, ctx, std::span<const int32_t>(&alt, 1))[0], v);
    } else {
      lp->logprobs.push_back(std::nullopt); // the first token: nothing came before it
    }
    lp->top.push_back(std::move(alts));
    lp->text_offset.push_back(offset);
    offset += code_points(piece);
    ctx.push_back(prompt[i]);
  }
  c.offset = offset;
}

void on_event(session_ptr self, const gen_event& e) {
  auto& st = self->state;
  if (st.done) return;
  int prompt_pos = -1;
  for (size_t p = 0; p < st.engine_ids.size(); ++p)
    if (st.engine_ids[p] == e.request_id) prompt_pos = static_cast<int>(p);
  if (prompt_pos < 0) return; // not ours (the engine answers a request's id before its events)
  auto& scores = st.scores[static_cast<size_t>(prompt_pos)];
  for (const auto& s : e.prompt_logprobs)
    if (s.pos >= 0 && s.pos < static_cast<int32_t>(scores.size())) scores[s.pos] = s;
  if (e.index == 0) st.cached[static_cast<size_t>(prompt_pos)] = e.cached_tokens;
  const int idx = prompt_pos * st.req.n + e.index;
  if (idx < 0 || idx >= static_cast<int>(st.choices.size())) return;
  auto& c = st.choices[static_cast<size_t>(idx)];
  if (c.finished || (e.tokens.empty() && e.finish == finish_reason::none)) return;
  if (e.finish == finish_reason::error)
    return fail_session(self, error_for({e.error_code, e.error_message}));
  const tokenizer& tok = *st.gw->info.tok;
  const bool want_lp = st.req.logprobs();
  std::string text;
  token_logprobs lp;
  if (!c.started && st.req.echo) { // the prompt comes first
    echo_prompt(self, prompt_pos, c, text, want_lp ? &lp : nullptr);
    c.res.text += text;
  }
  std::string fresh, reasoning;
  std::vector<tool_call> read_calls; // harmony: calls the reply's router read
  finish_reason fin = e.finish;
  int64_t n_reasoning = 0;
  if (!e.tokens.empty()) {
    auto d = c.proc->push(e.tokens);
    fresh = d.text;
    reasoning = d.reasoning;
    read_calls = std::move(d.calls);
    const auto accepted = std::span<const int32_t>(e.tokens).first(d.accepted);
    if (want_lp) {
      const size_t n = accepted.size();
      lp.append(detail(tok, c.context, accepted,
                       std::span<const float>(e.logprobs).first(std::min(n, e.logprobs.size())),
                       std::span<const std::vector<std::pair<int32_t, float>>>(e.top_logprobs)
                           .first(std::min(n, e.top_logprobs.size())),
                       c.offset));
    }
    n_reasoning = static_cast<int64_t>(d.reasoning_tokens);
    c.tokens += static_cast<int64_t>(d.accepted);
    st.completion_tokens += static_cast<int64_t>(d.accepted);
    if (c.proc->stopped()) {
      fin = finish_reason::stop;
      if (e.finish == finish_reason::none) // the engine goes on until told
        self->send(st.engine, finish_atom::value, e.request_id, e.index);
    }
  }
  if (fin != finish_reason::none && !c.proc->stopped()) {
    auto tail = c.proc->finish();
    fresh += tail.text;
    reasoning += tail.reasoning;
    for (auto& call : tail.calls) read_calls.push_back(std::move(call));
  }
  std::vector<tool_call> calls;
  if (c.tools) {
    auto t = c.tools->step(std::move(fresh), std::move(read_calls), fin != finish_reason::none,
                           fin == finish_reason::length);
    fresh = std::move(t.text);
    calls = std::move(t.calls);
  }
  const size_t first_call = c.res.calls.size();
  c.res.calls.insert(c.res.calls.end(), calls.begin(), calls.end());
  const auto& calls_all = c.res.calls;
  c.res.called = !c.res.calls.empty() && st.req.tools != tool_mode::named;
  c.res.text += fresh;
  c.res.reasoning += reasoning;
  text += fresh;
  if (want_lp) c.res.lp.append(lp);
  if (st.msg) {
    auto events = st.msg->step(reasoning, text, calls);
    if (st.req.stream && !c.started) events = st.msg->start(cached_tokens(st)) + events;
    if (st.req.stream) emit(self, std::move(events));
  } else if (st.resp) {
    auto events = st.resp->step(reasoning, text, &lp, calls, n_reasoning);
    if (st.req.stream) emit(self, std::move(events));
  } else if (st.req.stream) {
    const usage u{st.prompt_tokens, st.completion_tokens, cached_tokens(st)};
    // calls go in a chunk of their own before the one that ends the choice, as OpenAI sends
    // them (clients close a call's arguments when the next chunk comes)
    const bool split = !calls.empty() && fin != finish_reason::none;
    if (!text.empty() || !reasoning.empty() || fin != finish_reason::none || !c.started ||
        !lp.pieces.empty() || !calls.empty())
      emit(self,
           stream_chunk(st.req, st.id, st.created, idx, text, split ? finish_reason::none : fin,
                        !c.started, &lp, tok, st.req.continuous_usage ? &u : nullptr, reasoning,
                        chunk_calls{calls_all, first_call, c.res.called}));
    if (split)
      emit(self, stream_chunk(st.req, st.id, st.created, idx, "", fin, false, nullptr, tok,
                              st.req.continuous_usage ? &u : nullptr, "",
                              chunk_calls{calls_all, calls_all.size(), c.res.called}));
  }
  c.started = true;
  if (fin == finish_reason::none) return;
  c.res.finish = fin;
  c.finished = true;
  if (--st.open == 0) finish_session(self);
}

caf::behavior session(session_ptr self, std::shared_ptr<gateway::impl> gw, parsed_request req,
                      std::shared_ptr<response_writer> w, engine_actor engine) {
  auto& st = self->state;
  st.gw = gw;
  st.w = w;
  st.req = std::move(req);
  st.engine = engine;
  st.id = st.req.responses ? new_random_id("resp_")
          : st.req.messages_api
              ? new_random_id("msg_")
              : (st.req.chat ? "chatcmpl-" : "cmpl-") + std::to_string(gw->started) + "-" +
                    std::to_string(++gw->counter);
  st.created = unix_now();
  if (st.req.responses) {
    st.resp = std::make_unique<response_builder>(st.req, st.id, st.created);
    if (st.req.stream) emit(self, st.resp->start()); // goes out with the status line
  } else if (st.req.messages_api) {
    // (its message_start waits for the engine's first event, which says what the cache gave)
    st.msg = std::make_unique<message_builder>(st.req, st.id,
                                               static_cast<int64_t>(st.req.prompts.at(0).size()));
  }
  const int n = st.req.n;
  const size_t prompts = st.req.prompts.size();
  st.choices.resize(prompts * static_cast<size_t>(n));
  for (size_t i = 0; i < st.choices.size(); ++i) {
    auto& c = st.choices[i];
    const auto& prompt = st.req.prompts[i / static_cast<size_t>(n)];
    c.res.index = static_cast<int>(i);
    c.proc = std::make_unique<output_processor>(
        *gw->info.tok, prompt, st.req.base.stop, st.req.base.min_tokens,
        st.req.reasoning ? gw->info.harmony : std::nullopt,
        st.req.reasoning ? gw->info.think : std::nullopt, st.req.include_stop);
    if (!st.req.skip_special) c.proc->show_special_tokens();
    c.context = prompt;
    if (st.req.tools != tool_mode::none) c.tools = std::make_unique<tool_reply>(st.req);
    c.proc->read_tool_calls(st.req.tools == tool_mode::automatic);
    if (st.req.tools == tool_mode::automatic) c.proc->keep_tool_markers(st.req.tool_fmt);
  }
  st.open = static_cast<int>(st.choices.size());
  st.scores.resize(prompts);
  for (size_t p = 0; p < prompts; ++p) st.scores[p].resize(st.req.prompts[p].size());
  st.engine_ids.assign(prompts, -1);
  st.cached.assign(prompts, 0);
  st.pending = static_cast<int>(prompts);
  gw->add_session(caf::actor_cast<caf::actor>(self));
  self->attach_functor([gw, addr = self->address()] { gw->drop_session(addr); });
  // the client going away cancels everything this session asked for
  w->on_close([s = caf::actor_cast<caf::actor>(self)] { caf::anon_send(s, cancel_atom::value); });
  // submit every prompt; the status line waits until the engine has accepted all of them,
  // so a refusal (429, 503, ...) is a real HTTP status, never bytes inside a stream
  for (size_t p = 0; p < prompts; ++p) {
    gen_request g = st.req.base;
    g.prompt = st.req.prompts[p];
    g.tag = st.id + (st.req.user.empty() ? "" : " user=" + st.req.user);
    st.prompt_tokens += static_cast<int64_t>(g.prompt.size());
    self->request(engine, std::chrono::seconds(30), generate_atom::value, std::move(g),
                  caf::actor_cast<caf::actor>(self))
        .then(
            [=](int64_t engine_id) {
              auto& st = self->state;
              st.engine_ids[p] = engine_id;
              if (st.done) {
                self->send(st.engine, cancel_atom::value, engine_id);
                return;
              }
              if (--st.pending == 0 && st.req.stream) open_stream(self);
            },
            [=](const caf::error& e) { fail_session(self, error_for(from_caf(e))); });
  }
  return {
      [=](event_atom, const gen_event& e) { on_event(self, e); },
      [=](tick_atom) { keep_alive(self); },
      [=](cancel_atom) { // the client went away
        auto& st = self->state;
        if (!st.done) {
          st.done = true;
          cancel_all(self);
          st.gw->count(499); // client closed the request
        }
        self->quit();
      },
      [=](close_atom) { // the server shuts down: end what is open, with an error
        fail_session(self, {503, "the server is shutting down; retry on another replica",
                            "server_error", "", "shutting_down"});
      },
  };
}

} // namespace

void spawn_session(caf::actor_system& sys, std::shared_ptr<gateway::impl> gw, parsed_request req,
                   std::shared_ptr<response_writer> w, engine_actor engine) {
  sys.spawn(session, std::move(gw), std::move(req), std::move(w), std::move(engine));
}

} // namespace troupe::actors
