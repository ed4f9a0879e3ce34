// gateway_api_test.cpp: what real clients need from the API, over real sockets: a refused
// streaming request gets a real HTTP status (never error bytes inside a 200 stream), a
// failure after the stream started ends it with an error event; echo with logprobs scores
// the prompt (checked against transformers' logits in the stories260K-hf fixture);
// max_tokens 0 with echo; the accepted extension fields and what they do (min_tokens,
// logit_bias, continuous usage stats, the developer role); logprob token strings that join
// into the text, with bytes and text offsets; /v1/models/{id}; HEAD; Expect: 100-continue; a
// 413 the client receives; WWW-Authenticate and a case-insensitive Bearer; /metrics without
// the key; error messages in our words; metrics with a model_name label under troupe's and
// vLLM's names; large bodies parsed off the I/O threads so /health stays fast.
#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include <gtest/gtest.h>

#include "gateway_util.hpp"
#include "text/chat_template.hpp"

using namespace gw_test;

namespace {

const std::string good =
    R"({"model":"stories","prompt":"Once upon a time","max_tokens":8,"temperature":0})";

double log_softmax_at(const std::vector<float>& logits, int id) {
  double mx = -1e300, s = 0;
  for (float v : logits) mx = std::max(mx, static_cast<double>(v));
  for (float v : logits) s += std::exp(v - mx);
  return logits[static_cast<size_t>(id)] - mx - std::log(s);
}

} // namespace

TEST(GatewayApi, RefusedStreamGetsARealStatus) {
  host_options tight;
  tight.max_waiting = 1;
  tight.max_inflight = 1;
  server q({}, tight);
  const std::string slow =
      R"({"model":"stories","prompt":"Once upon a time","max_tokens":60,"ignore_eos":true,"stream":true})";
  std::vector<std::thread> ts;
  std::atomic<int> refused{0}, streamed{0}, corrupt{0};
  for (int i = 0; i < 24; ++i)
    ts.emplace_back([&] {
      const reply r = post(q.port, "/v1/completions", slow);
      if (r.status == 429) {
        ++refused;
        // our words, not the actor framework's rendering
        if (!r.j.is_object() || r.body.find("system_error") != std::string::npos ||
            r.body.find("queue is full") == std::string::npos)
          ++corrupt;
      } else if (r.status == 200) {
        ++streamed;
        // a 200 stream holds only events: no HTTP status line inside the body
        if (r.body.find("HTTP/1.1") != std::string::npos) ++corrupt;
        const auto ev = events(r.body);
        if (ev.empty() || ev.back() != "[DONE]") ++corrupt;
      } else {
        ++corrupt;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_GT(refused.load(), 0);
  EXPECT_GT(streamed.load(), 0);
  EXPECT_EQ(corrupt.load(), 0);
}

TEST(GatewayApi, FailureAfterTheStreamStartedIsAnErrorEvent) {
  host_options doomed;
  doomed.place = *even_placement(stories()->config, 2, 1);
  ASSERT_TRUE(doomed.faults.add("kill-shard:stage=0,rank=1,p=1.0"));
  doomed.max_restarts = 1;
  server d({}, doomed);
  const reply r =
      post(d.port, "/v1/completions",
           R"({"model":"stories","prompt":"Once upon a time","max_tokens":20,"stream":true})");
  ASSERT_EQ(r.status, 200) << r.head;
  const auto ev = events(r.body);
  ASSERT_GE(ev.size(), 2u) << r.body;
  EXPECT_EQ(ev.back(), "[DONE]");
  const json& err = ev[ev.size() - 2];
  ASSERT_TRUE(err.contains("error")) << err.dump();
  EXPECT_EQ(err["error"]["type"], "server_error");
  EXPECT_FALSE(err["error"]["message"].get<std::string>().empty());
  // and /health tells the restart policy
  for (int i = 0; i < 100 && get(d.port, "/health").status == 200; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const reply h = get(d.port, "/health");
  EXPECT_EQ(h.status, 503);
  EXPECT_TRUE(h.j.contains("restart_policy")) << h.body;
}

// Prompt scoring as lm-evaluation-harness asks for it: token-id prompts, echo, logprobs 1,
// max_tokens 1. The score of the first continuation token is transformers' log-softmax at
// the prompt's last position (stories260k_hf.json), and greedy continuations are top-1.
TEST(GatewayApi, EchoScoresThePromptAsTransformersDoes) {
  const json fx = test::load_json(test::fixture_path("stories260k_hf.json"));
  auto hf = open_model(test::model_path("stories260K-hf"));
  ASSERT_TRUE(hf);
  host_options ho;
  ho.place = *even_placement((*hf)->config, 1, 1);
  auto hh = host::start(*hf, ho);
  ASSERT_TRUE(hh);
  ASSERT_TRUE((*hh)->wait_ready(60));
  gateway_options go;
  go.model_name = "stories";
  auto g = gateway::start(**hh, go);
  ASSERT_TRUE(g);
  const uint16_t port = (*g)->port();
  for (size_t ci = 0; ci < 3; ++ci) {
    const auto& c = fx["cases"][ci];
    auto ids = c["prompt_tokens"].get<std::vector<int32_t>>();
    const auto greedy = c["greedy_tokens"].get<std::vector<int32_t>>();
    const size_t P = ids.size();
    ids.insert(ids.end(), greedy.begin(), greedy.begin() + 4);
    json req = {{"model", "stories"}, {"prompt", json::array({ids})},
                {"echo", true},       {"logprobs", 1},
                {"max_tokens", 1},    {"temperature", 0}};
    const reply r = post(port, "/v1/completions", req.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const json& lp = r.j["choices"][0]["logprobs"];
    ASSERT_EQ(lp["tokens"].size(), ids.size() + 1) << r.body;
    EXPECT_TRUE(lp["token_logprobs"][0].is_null());
    EXPECT_TRUE(lp["top_logprobs"][0].is_null());
    const double want = log_softmax_at(c["last_logits"].get<std::vector<float>>(), greedy[0]);
    EXPECT_NEAR(lp["token_logprobs"][P].get<double>(), want, 1e-3) << c["text"];
    for (size_t k = P; k < ids.size(); ++k) { // greedy tokens are each position's best
      double best = -1e9;
      for (auto& [tok, v] : lp["top_logprobs"][k].items()) best = std::max(best, v.get<double>());
      EXPECT_NEAR(lp["token_logprobs"][k].get<double>(), best, 1e-6) << "position " << k;
    }
    // the text is the echoed prompt, then the one new token; tokens join into it
    std::string joined;
    for (const auto& t : lp["tokens"]) joined += t.get<std::string>();
    EXPECT_EQ(joined, r.j["choices"][0]["text"].get<std::string>());
    EXPECT_EQ(r.j["usage"]["completion_tokens"], 1);
  }
  // max_tokens 0 with echo: the prompt alone, scored
  const reply z = post(
      port, "/v1/completions",
      R"({"model":"stories","prompt":"Once upon a time","echo":true,"logprobs":0,"max_tokens":0})");
  ASSERT_EQ(z.status, 200) << z.body;
  EXPECT_EQ(z.j["choices"][0]["text"], "Once upon a time");
  EXPECT_EQ(z.j["usage"]["completion_tokens"], 0);
  EXPECT_EQ(z.j["choices"][0]["logprobs"]["token_logprobs"].size(), z.j["usage"]["prompt_tokens"]);
  // max_tokens 0 needs echo
  EXPECT_EQ(
      post(port, "/v1/completions", R"({"model":"stories","prompt":"a","max_tokens":0})").status,
      400);
}

TEST(GatewayApi, ExtensionFieldsAreAcceptedAndDoWhatTheySay) {
  server s;
  const std::string base = R"("model":"stories","prompt":"Once upon a time","temperature":0)";
  // accepted, no effect on the tokens
  const reply plain = post(s.port, "/v1/completions", "{" + base + R"(,"max_tokens":8})");
  const reply extras = post(
      s.port, "/v1/completions",
      "{" + base +
          R"(,"max_tokens":8,"store":false,"service_tier":"auto","metadata":{"k":"v"},"user":"u1"})");
  ASSERT_EQ(extras.status, 200) << extras.body;
  EXPECT_EQ(extras.j["choices"][0]["text"], plain.j["choices"][0]["text"]);
  EXPECT_EQ(post(s.port, "/v1/completions", "{" + base + R"(,"metadata":{"k":1}})").status, 400);
  EXPECT_EQ(post(s.port, "/v1/completions", "{" + base + R"(,"frobnicate":1})").status, 400);
  // logit_bias: +100 on EOS (id 2) ends at once; min_tokens holds EOS off for 5 tokens
  const reply eos =
      post(s.port, "/v1/completions", "{" + base + R"(,"max_tokens":16,"logit_bias":{"2":100}})");
  ASSERT_EQ(eos.status, 200) << eos.body;
  EXPECT_EQ(eos.j["usage"]["completion_tokens"], 0);
  EXPECT_EQ(eos.j["choices"][0]["finish_reason"], "stop");
  const reply held =
      post(s.port, "/v1/completions",
           "{" + base + R"(,"max_tokens":16,"logit_bias":{"2":100},"min_tokens":5})");
  ASSERT_EQ(held.status, 200) << held.body;
  EXPECT_EQ(held.j["usage"]["completion_tokens"], 5);
  EXPECT_EQ(held.j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(post(s.port, "/v1/completions", "{" + base + R"(,"logit_bias":{"x":1}})").status, 400);
  EXPECT_EQ(post(s.port, "/v1/completions", "{" + base + R"(,"logit_bias":{"5":101}})").status,
            400);
  // min_tokens also delays stop strings
  const reply stop =
      post(s.port, "/v1/completions", "{" + base + R"(,"max_tokens":30,"stop":["girl"]})");
  const reply late = post(s.port, "/v1/completions",
                          "{" + base + R"(,"max_tokens":30,"stop":["girl"],"min_tokens":25})");
  EXPECT_EQ(stop.j["choices"][0]["text"].get<std::string>().find("girl"), std::string::npos);
  EXPECT_NE(late.j["choices"][0]["text"].get<std::string>().find("girl"), std::string::npos)
      << late.body;
  // include_stop_str_in_output: the stop string ends the text (streamed the same)
  for (const char* stream : {"false", "true"}) {
    const reply incl = post(s.port, "/v1/completions",
                            "{" + base + R"(,"max_tokens":30,"stop":["girl"],"stream":)" + stream +
                                R"(,"include_stop_str_in_output":true})");
    ASSERT_EQ(incl.status, 200) << incl.body;
    std::string text;
    if (std::string(stream) == "true") {
      for (const auto& e : events(incl.body))
        if (e.is_object()) text += e["choices"][0]["text"].get<std::string>();
    } else {
      text = incl.j["choices"][0]["text"];
    }
    EXPECT_EQ(text, stop.j["choices"][0]["text"].get<std::string>() + "girl") << stream;
  }
  // stop_token_ids: a token that is not special ends the text as its last token (vLLM); EOS,
  // special, ends it unseen even under ignore_eos
  const int32_t named = stories()->tok->find("▁named");
  ASSERT_GE(named, 0);
  const reply by_id =
      post(s.port, "/v1/completions",
           "{" + base + R"(,"max_tokens":30,"stop_token_ids":[)" + std::to_string(named) + "]}");
  ASSERT_EQ(by_id.status, 200) << by_id.body;
  const std::string full = by_id.j["choices"][0]["text"];
  EXPECT_EQ(full, ", there was a little girl named") << by_id.body;
  EXPECT_EQ(by_id.j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(by_id.j["usage"]["completion_tokens"], 9);
  const reply by_eos =
      post(s.port, "/v1/completions",
           "{" + base +
               R"(,"max_tokens":8,"logit_bias":{"2":100},"ignore_eos":true,"stop_token_ids":[2]})");
  ASSERT_EQ(by_eos.status, 200) << by_eos.body;
  EXPECT_EQ(by_eos.j["choices"][0]["text"], "");
  EXPECT_EQ(by_eos.j["usage"]["completion_tokens"], 0);
  EXPECT_EQ(by_eos.j["choices"][0]["finish_reason"], "stop");
  for (const char* bad : {"[-1]", "[100000]", "[1.5]", "5", "[[2]]"})
    EXPECT_EQ(post(s.port, "/v1/completions",
                   "{" + base + R"(,"stop_token_ids":)" + std::string(bad) + "}")
                  .status,
              400)
        << bad;
  // skip_special_tokens: false shows special tokens' text (EOS, generated past with ignore_eos)
  const std::string eos3 = R"(,"max_tokens":3,"logit_bias":{"2":100},"ignore_eos":true)";
  const reply hidden = post(s.port, "/v1/completions", "{" + base + eos3 + "}");
  const reply shown =
      post(s.port, "/v1/completions", "{" + base + eos3 + R"(,"skip_special_tokens":false})");
  ASSERT_EQ(shown.status, 200) << shown.body;
  EXPECT_EQ(hidden.j["choices"][0]["text"], "");
  EXPECT_EQ(shown.j["choices"][0]["text"], "</s></s></s>");
  EXPECT_EQ(post(s.port, "/v1/completions", "{" + base + R"(,"skip_special_tokens":1})").status,
            400);
  // continuous usage stats: usage in every chunk
  const reply st = post(
      s.port, "/v1/completions",
      "{" + base +
          R"(,"max_tokens":6,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}})");
  ASSERT_EQ(st.status, 200);
  const auto ev = events(st.body);
  ASSERT_GE(ev.size(), 3u);
  for (size_t i = 0; i + 1 < ev.size(); ++i)
    EXPECT_TRUE(ev[i]["usage"].is_object()) << ev[i].dump();
  // developer is system under another name; parallel_tool_calls is accepted
  const std::string chat = R"("model":"stories","max_tokens":8,"temperature":0)";
  const reply sys = post(
      s.port, "/v1/chat/completions",
      "{" + chat +
          R"(,"messages":[{"role":"system","content":"Be nice."},{"role":"user","content":"Hi"}]})");
  const reply dev = post(
      s.port, "/v1/chat/completions",
      "{" + chat +
          R"(,"parallel_tool_calls":false,"messages":[{"role":"developer","content":"Be nice."},{"role":"user","content":"Hi"}]})");
  ASSERT_EQ(dev.status, 200) << dev.body;
  EXPECT_EQ(dev.j["choices"][0]["message"]["content"], sys.j["choices"][0]["message"]["content"]);
}

TEST(GatewayApi, LogprobTokensJoinIntoTheText) {
  server s;
  const reply r = post(
      s.port, "/v1/completions",
      R"({"model":"stories","prompt":"Once upon a time","max_tokens":12,"temperature":0,"logprobs":2})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json& lp = r.j["choices"][0]["logprobs"];
  std::string joined;
  int64_t expect_offset = 0;
  for (size_t i = 0; i < lp["tokens"].size(); ++i) {
    const std::string t = lp["tokens"][i].get<std::string>();
    EXPECT_EQ(lp["text_offset"][i].get<int64_t>(), expect_offset);
    joined += t;
    for (unsigned char ch : t) expect_offset += (ch & 0xC0) != 0x80;
  }
  EXPECT_EQ(joined, r.j["choices"][0]["text"].get<std::string>());
  // "▁there" after "," is " there": the leading space is kept
  ASSERT_GE(lp["tokens"].size(), 2u);
  EXPECT_EQ(lp["tokens"][1].get<std::string>()[0], ' ') << lp["tokens"].dump();
  const reply c = post(
      s.port, "/v1/chat/completions",
      R"({"model":"stories","messages":[{"role":"user","content":"Hi"}],"max_tokens":6,"temperature":0,"logprobs":true,"top_logprobs":2})");
  ASSERT_EQ(c.status, 200) << c.body;
  std::string text;
  for (const auto& e : c.j["choices"][0]["logprobs"]["content"]) {
    std::string from_bytes;
    for (const auto& b : e["bytes"]) from_bytes += static_cast<char>(b.get<int>());
    text += from_bytes;
    EXPECT_EQ(e["top_logprobs"].size(), 2u);
  }
  EXPECT_EQ(text, c.j["choices"][0]["message"]["content"].get<std::string>());
}

TEST(GatewayApi, HttpDetailsClientsRelyOn) {
  gateway_options go;
  go.api_key = "sekrit";
  server s(go);
  const std::string key = "Authorization: Bearer sekrit\r\n";
  // /v1/models/{id}
  const reply m = get(s.port, "/v1/models/stories", key);
  EXPECT_EQ(m.status, 200);
  EXPECT_EQ(m.j["id"], "stories");
  EXPECT_EQ(get(s.port, "/v1/models/gpt-9", key).status, 404);
  // HEAD: the GET header, no body
  for (const char* path : {"/health", "/v1/models", "/metrics"}) {
    const reply h = raw(s.port, std::string("HEAD ") + path +
                                    " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + key + "\r\n");
    EXPECT_EQ(h.status, 200) << path;
    EXPECT_TRUE(h.body.empty()) << path << ": " << h.body;
    EXPECT_GT(std::atoi(h.header("Content-Length").c_str()), 0) << path;
  }
  // 401 says how to authenticate; the scheme is case-insensitive
  const reply no = post(s.port, "/v1/completions", good);
  EXPECT_EQ(no.status, 401);
  EXPECT_NE(no.header("WWW-Authenticate").find("Bearer"), std::string::npos) << no.head;
  EXPECT_EQ(post(s.port, "/v1/completions", good, "Authorization: bearer sekrit\r\n").status, 200);
  EXPECT_EQ(post(s.port, "/v1/completions", good, "Authorization: BEARER sekrit\r\n").status, 200);
  EXPECT_EQ(post(s.port, "/v1/completions", good, "Authorization: Basic sekrit\r\n").status, 401);
  // /metrics is open unless --metrics-auth
  EXPECT_EQ(get(s.port, "/metrics").status, 200);
  gateway_options locked = go;
  locked.metrics_auth = true;
  server s2(locked);
  EXPECT_EQ(get(s2.port, "/metrics").status, 401);
  EXPECT_EQ(get(s2.port, "/metrics", key).status, 200);
  // Expect: 100-continue is answered before the body is sent
  {
    int fd = connect_to(s.port);
    send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + key +
                     "Expect: 100-continue\r\nContent-Length: " + std::to_string(good.size()) +
                     "\r\n\r\n");
    char buf[64] = {};
    const ssize_t n = ::recv(fd, buf, sizeof buf - 1, 0);
    ASSERT_GT(n, 0);
    EXPECT_EQ(std::string(buf, static_cast<size_t>(n)).rfind("HTTP/1.1 100", 0), 0u) << buf;
    send_all(fd, good);
    const std::string rest = read_all(fd);
    ::close(fd);
    EXPECT_NE(rest.find("HTTP/1.1 200"), std::string::npos) << rest;
  }
  // a body over the limit announced with Expect: 413 at once, the body never sent
  {
    int fd = connect_to(s.port);
    send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + key +
                     "Expect: 100-continue\r\nContent-Length: 99999999\r\n\r\n");
    const std::string r = read_all(fd);
    ::close(fd);
    EXPECT_EQ(r.rfind("HTTP/1.1 413", 0), 0u) << r;
  }
  // a client that sends a too-big body whole, then reads, receives the 413 (no reset)
  for (int i = 0; i < 3; ++i) {
    const std::string big(6 << 20, 'x');
    const reply r =
        post(s.port, "/v1/completions", R"({"model":"stories","prompt":")" + big + "\"}", key);
    EXPECT_EQ(r.status, 413);
  }
  EXPECT_EQ(post(s.port, "/v1/completions", good, key).status, 200);
}

TEST(GatewayApi, MetricsCarryTheModelNameUnderBothNames) {
  server s;
  ASSERT_EQ(post(s.port, "/v1/completions", good).status, 200);
  const reply m = get(s.port, "/metrics");
  ASSERT_EQ(m.status, 200);
  for (const char* name :
       {"troupe_kv_usage_ratio{model_name=\"stories\"}",
        "troupe_request_success_total{model_name=\"stories\",finished_reason=\"length\"} 1",
        "troupe_e2e_request_latency_seconds_count{model_name=\"stories\"} 1",
        "troupe_request_queue_time_seconds_bucket{model_name=\"stories\",le=",
        "troupe_request_prefill_time_seconds_count{model_name=\"stories\"} 1",
        "troupe_request_decode_time_seconds_count{model_name=\"stories\"} 1",
        "troupe_request_prompt_tokens_sum{model_name=\"stories\"} 5",
        "troupe_request_generation_tokens_sum{model_name=\"stories\"} 8",
        "troupe_prefix_cache_queries_total{model_name=\"stories\"}",
        "troupe_prefix_cache_hits_total{model_name=\"stories\"}",
        "vllm:kv_cache_usage_perc{model_name=\"stories\"}",
        "vllm:num_requests_running{model_name=\"stories\"}",
        "vllm:request_success_total{model_name=\"stories\",finished_reason=\"length\"} 1",
        "vllm:e2e_request_latency_seconds_bucket",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:request_prompt_tokens_bucket",
        "vllm:prefix_cache_hits_total",
        "troupe_jit_kernels_total{model_name=\"stories\",result=\"compiled\"}",
        "troupe_composed_programs_total{model_name=\"stories\"}",
        "troupe_http_requests_total{model_name=\"stories\",status=\"200\"} 1"})
    EXPECT_NE(m.body.find(name), std::string::npos) << name;
  // the block count the server prints at start-up is the one /metrics reports
  EXPECT_NE(m.body.find(fmt::format("troupe_kv_blocks_total{{model_name=\"stories\"}} {}",
                                    s.h->stats().kv_blocks_total)),
            std::string::npos);
}

// Four 4 MB prompts at once: parsing and tokenizing them runs on the gateway's job queue, so
// the I/O threads keep answering /health (before, it took 4-7 s).
TEST(GatewayApi, LargeBodiesDoNotStallHealth) {
  gateway_options go;
  go.limits.max_body_bytes = 8 << 20;
  server s(go);
  std::string text;
  while (text.size() < (4u << 20)) text += "Once upon a time there was a little girl. ";
  const std::string body = R"({"model":"stories","prompt":")" + text + R"(","max_tokens":1})";
  std::vector<std::thread> big;
  std::atomic<int> done{0};
  for (int i = 0; i < 4; ++i)
    big.emplace_back([&] {
      post(s.port, "/v1/completions", body); // 400: longer than the context, once tokenized
      ++done;
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(300)); // the bodies are in
  double worst = 0;
  int overlapped = 0;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(get(s.port, "/health").status, 200);
    worst = std::max(worst,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    overlapped += done.load() < 4;
  }
  for (auto& t : big) t.join();
  EXPECT_GT(overlapped, 0) << "the large requests finished before /health was asked";
  EXPECT_LT(worst, 1.0) << "/health waited behind request parsing";
}

namespace {

// stories260K-hf with two rare pieces ('z' 451, 'j' 449) renamed <think> and </think> and made
// added tokens, as Qwen3's vocabulary has them: a model that can "think" under logit_bias.
// `qwen3`: with a ChatML template that reads enable_thinking, as Qwen3's does.
std::shared_ptr<const model_source> make_thinking_stories(bool qwen3, bool qwq = false) {
  {
    auto base = open_model(test::model_path("stories260K-hf"));
    EXPECT_TRUE(base);
    json t = test::load_json(test::model_path("stories260K-hf/tokenizer.json"));
    auto& vocab = t["model"]["vocab"];
    vocab.erase("z");
    vocab.erase("j");
    vocab["<think>"] = 451;
    vocab["</think>"] = 449;
    for (auto [name, id] : {std::pair{"<think>", 451}, std::pair{"</think>", 449}})
      t["added_tokens"].push_back({{"id", id},
                                   {"content", name},
                                   {"single_word", false},
                                   {"lstrip", false},
                                   {"rstrip", false},
                                   {"normalized", false},
                                   {"special", false}});
    const json config = {{"chat_template",
                          "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
                          "<|im_end|>\n{% endfor %}<|im_start|>assistant\n{% if "
                          "enable_thinking is defined and enable_thinking is false %}<think>"
                          "\n\n</think>\n\n{% endif %}"}};
    // QwQ's: the generation prompt opens the block
    const json qwq_config = {{"chat_template",
                              "{% for m in messages %}{{- '<|im_start|>' + m.role + '\\n' + "
                              "m.content + '<|im_end|>\\n' }}{% endfor %}{{- "
                              "'<|im_start|>assistant\\n<think>\\n' }}"}};
    auto tok =
        tokenizer::from_hf_json(t.dump(), qwen3 ? config.dump() : (qwq ? qwq_config.dump() : ""),
                                "stories with think tags");
    EXPECT_TRUE(tok) << tok.error().message;
    return std::shared_ptr<const model_source>(with_tokenizer(**base, std::move(*tok)));
  }
}

std::shared_ptr<const model_source> thinking_stories() {
  static auto made = make_thinking_stories(false);
  return made;
}

} // namespace

// A model that thinks in <think> blocks: a chat reply's block is its reasoning_content and the
// rest its content; a response_format holds from the token after </think> (the block itself
// runs free); --reasoning-format none leaves the block in the content. logit_bias makes the
// random model open the block (+50 on <think>, 451) and close it at once (+100 on </think>,
// 449), which only the reasoning-aware rule allows in front of the JSON.
TEST(GatewayApi, ThinkBlocksAreReasoningAndTheFormatHoldsAfterThem) {
  server s({}, {}, thinking_stories());
  const std::string chat = R"({"model":"stories","messages":[{"role":"user","content":"Tell"}],)"
                           R"("temperature":0,)";
  const reply r =
      post(s.port, "/v1/chat/completions",
           chat + R"("max_tokens":48,"logprobs":true,"logit_bias":{"451":50,"449":100},)"
                  R"("response_format":{"type":"json_schema","json_schema":{"name":"a",)"
                  R"("schema":{"type":"object","properties":{"ok":{"type":"boolean"}},)"
                  R"("required":["ok"],"additionalProperties":false}}}})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json& choice = r.j["choices"][0];
  const json& lp = choice["logprobs"]["content"];
  ASSERT_GE(lp.size(), 3u) << r.body;
  EXPECT_EQ(lp[0]["token"], "<think>");
  EXPECT_EQ(lp[1]["token"], "</think>");
  EXPECT_TRUE(choice["message"]["reasoning_content"].is_null()) << r.body; // an empty block
  const json answer = json::parse(choice["message"]["content"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(answer.is_object()) << r.body; // {"ok": true} or false: no string for </think>
  EXPECT_TRUE(answer["ok"].is_boolean()) << r.body;
  EXPECT_EQ(choice["finish_reason"], "stop") << r.body;

  // streamed, the block never closed (only <think> favoured): every delta is reasoning
  const reply st = post(s.port, "/v1/chat/completions",
                        chat + R"("max_tokens":6,"stream":true,"logit_bias":{"451":100}})");
  ASSERT_EQ(st.status, 200);
  std::string reasoning, content;
  for (const auto& e : events(st.body)) {
    if (!e.is_object() || e["choices"].empty()) continue;
    const json& d = e["choices"][0]["delta"];
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content") && d["content"].is_string())
      content += d["content"].get<std::string>();
  }
  EXPECT_EQ(reasoning, "<think><think><think><think><think>"); // the first opened the block
  EXPECT_EQ(content, "");

  // --reasoning-format none: the block stays in the content, as generated
  gateway_options whole;
  whole.split_reasoning = false;
  server plain(whole, {}, thinking_stories());
  const reply p = post(plain.port, "/v1/chat/completions",
                       chat + R"("max_tokens":3,"logit_bias":{"451":100}})");
  ASSERT_EQ(p.status, 200);
  EXPECT_EQ(p.j["choices"][0]["message"]["content"], "<think><think><think>");
  EXPECT_FALSE(p.j["choices"][0]["message"].contains("reasoning_content"));
}

// Qwen3's switch: chat_template_kwargs {"enable_thinking": false} writes the empty block the
// template writes after the generation prompt (four more prompt tokens here), for templates
// that read it only; an earlier reply's reasoning_content sent back in an assistant message is
// accepted (the templates drop earlier turns' reasoning).
TEST(GatewayApi, EnableThinkingFollowsTheTemplate) {
  const auto model = make_thinking_stories(true);
  server q({}, {}, model);
  const std::string head = R"({"model":"stories","max_tokens":2,"temperature":0,)"
                           R"("messages":[{"role":"user","content":"Tell"}])";
  const reply on = post(q.port, "/v1/chat/completions", head + "}");
  const reply off = post(q.port, "/v1/chat/completions",
                         head + R"(,"chat_template_kwargs":{"enable_thinking":false}})");
  ASSERT_EQ(on.status, 200) << on.body;
  ASSERT_EQ(off.status, 200) << off.body;
  // the prompt with the block: as many more tokens as the block adds to the rendered chat
  const auto chat = troupe::render_chat(troupe::chat_format::chatml, {{"user", "Tell"}}, "", {});
  ASSERT_TRUE(chat);
  const auto without = model->tok->encode(*chat, true, true);
  const auto with = model->tok->encode(*chat + "<think>\n\n</think>\n\n", true, true);
  ASSERT_TRUE(without && with);
  EXPECT_EQ(off.j["usage"]["prompt_tokens"].get<int64_t>() -
                on.j["usage"]["prompt_tokens"].get<int64_t>(),
            static_cast<int64_t>(with->size() - without->size()));
  EXPECT_EQ((*with)[without->size()], 451); // the block's own <think> token
  EXPECT_EQ(post(q.port, "/v1/chat/completions",
                 head + R"(,"chat_template_kwargs":{"enable_thinking":"no"}})")
                .status,
            400);
  const reply other = post(q.port, "/v1/chat/completions",
                           head + R"(,"chat_template_kwargs":{"add_vision_id":true}})");
  EXPECT_EQ(other.status, 400);
  EXPECT_NE(other.body.find("add_vision_id"), std::string::npos) << other.body;
  const reply history =
      post(q.port, "/v1/chat/completions",
           R"({"model":"stories","max_tokens":2,"messages":[{"role":"user","content":"Hi"},)"
           R"({"role":"assistant","content":"Hello","reasoning_content":"greet back"},)"
           R"({"role":"user","content":"Tell"}]})");
  EXPECT_EQ(history.status, 200) << history.body;
  EXPECT_EQ(post(q.port, "/v1/chat/completions",
                 R"({"model":"stories","max_tokens":2,"messages":[{"role":"user",)"
                 R"("content":"Hi","reasoning_content":"x"}]})")
                .status,
            400);
  // a template that does not read it: refused by name
  server plain({}, {}, thinking_stories());
  const reply no = post(plain.port, "/v1/chat/completions",
                        head + R"(,"chat_template_kwargs":{"enable_thinking":false}})");
  EXPECT_EQ(no.status, 400);
  EXPECT_NE(no.body.find("enable_thinking"), std::string::npos) << no.body;
}

// A template whose generation prompt opens the block (QwQ's "<|im_start|>assistant\n<think>\n"):
// the prompt ends so, and the reply starts inside its reasoning (cut there: all reasoning). An
// assistant message's content may be null; a reasoning_content that is not text is refused
// as such.
TEST(GatewayApi, AGenerationPromptThatOpensTheBlockStartsTheReplyInside) {
  server s({}, {}, make_thinking_stories(false, true));
  const std::string head = R"({"model":"stories","max_tokens":4,"temperature":0,)"
                           R"("messages":[{"role":"user","content":"Tell"}])";
  const reply r = post(s.port, "/v1/chat/completions", head + "}");
  ASSERT_EQ(r.status, 200) << r.body;
  const json& msg = r.j["choices"][0]["message"];
  ASSERT_TRUE(msg["reasoning_content"].is_string()) << r.body;
  EXPECT_FALSE(msg["reasoning_content"].get<std::string>().empty());
  EXPECT_EQ(msg["content"], "") << r.body;
  // </think> at once: the reasoning is empty and the rest is the answer
  const reply c = post(s.port, "/v1/chat/completions",
                       head + R"(,"logprobs":true,"logit_bias":{"449":100},"max_tokens":3})");
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(c.j["choices"][0]["logprobs"]["content"][0]["token"], "</think>");
  EXPECT_TRUE(c.j["choices"][0]["message"]["reasoning_content"].is_null()) << c.body;
  // the same model without that template: the reply is the answer
  server plain({}, {}, thinking_stories());
  const reply p = post(plain.port, "/v1/chat/completions", head + "}");
  ASSERT_EQ(p.status, 200);
  EXPECT_TRUE(p.j["choices"][0]["message"]["reasoning_content"].is_null()) << p.body;
  EXPECT_NE(p.j["choices"][0]["message"]["content"], "");
  const std::string history =
      R"({"model":"stories","max_tokens":2,"messages":[{"role":"user","content":"Hi"},)"
      R"({"role":"assistant","content":null,"reasoning_content":RC},{"role":"user","content":"Go"}]})";
  auto with = [&](const std::string& rc) {
    std::string b = history;
    b.replace(b.find("RC"), 2, rc);
    return post(s.port, "/v1/chat/completions", b);
  };
  EXPECT_EQ(with(R"("greet")").status, 200);
  const reply bad = with("5");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("must be a string"), std::string::npos) << bad.body;
}
