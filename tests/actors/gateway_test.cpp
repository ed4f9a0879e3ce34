// gateway_test.cpp: the HTTP gateway over real sockets. The bad-input suite (malformed and
// truncated JSON, wrong types, huge and negative numbers, invalid UTF-8, unknown routes and
// models, oversized bodies, stalled headers, abrupt disconnects) gets the documented statuses
// and OpenAI's error shape, and a normal request succeeds right after each. Also: API keys,
// queue full (429), not ready (503), hundreds of idle connections and a connect burst that
// never stop /health from answering, a client that disconnects mid-stream freeing its KV.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../test_paths.hpp"
#include "actors/gateway.hpp"
#include "gateway_util.hpp"

using namespace troupe;
using namespace troupe::actors;
using json = nlohmann::json;

namespace {

using namespace gw_test;

const std::string good =
    R"({"model":"stories","prompt":"Once upon a time","max_tokens":8,"temperature":0})";

void expect_error(const reply& r, int status, const std::string& needle) {
  EXPECT_EQ(r.status, status) << r.body;
  ASSERT_TRUE(r.j.is_object()) << r.body;
  ASSERT_TRUE(r.j.contains("error")) << r.body;
  EXPECT_NE(r.j["error"]["message"].get<std::string>().find(needle), std::string::npos) << r.body;
}

} // namespace

TEST(Gateway, BadInputGetsClearErrorsAndServiceContinues) {
  server s;
  const std::string big(5 << 20, 'x');
  struct bad_case {
    std::string name, request;
    int status;
    std::string needle;
  };
  const std::vector<bad_case> cases = {
      {"malformed json", "{\"model\": \"stories\", \"prompt\": ", 400, "not valid JSON"},
      {"not an object", "[1,2,3]", 400, "JSON object"},
      {"wrong type", R"({"model":"stories","prompt":"a","max_tokens":"ten"})", 400, "max_tokens"},
      {"negative max_tokens", R"({"model":"stories","prompt":"a","max_tokens":-1})", 400,
       "max_tokens"},
      {"huge max_tokens",
       R"({"model":"stories","prompt":"a","max_tokens":100000000000000000000000})", 400,
       "max_tokens"},
      {"temperature range", R"({"model":"stories","prompt":"a","temperature":7})", 400,
       "temperature"},
      {"top_p zero", R"({"model":"stories","prompt":"a","top_p":0})", 400, "top_p"},
      {"n too big", R"({"model":"stories","prompt":"a","n":1000})", 400, "'n'"},
      {"stop type", R"({"model":"stories","prompt":"a","stop":[1,2]})", 400, "stop"},
      {"unknown field", R"({"model":"stories","prompt":"a","frobnicate":1})", 400, "frobnicate"},
      {"missing prompt", R"({"model":"stories"})", 400, "prompt"},
      {"token out of vocab", R"({"model":"stories","prompt":[1, 99999]})", 400, "vocabulary"},
      {"unknown model", R"({"model":"gpt-9","prompt":"a"})", 404, "gpt-9"},
      {"prompt too long", R"({"model":"stories","prompt":")" + std::string(2000, 'a') + R"("})",
       400, "context"},
      {"invalid utf-8", "{\"model\":\"stories\",\"prompt\":\"\xff\xfe\"}", 400, "UTF-8"},
      {"logit_bias key", R"({"model":"stories","prompt":"a","logit_bias":{"abc":1}})", 400,
       "logit_bias"},
      {"logit_bias range", R"({"model":"stories","prompt":"a","logit_bias":{"3":1e9}})", 400,
       "logit_bias"},
      {"logit_bias id", R"({"model":"stories","prompt":"a","logit_bias":{"99999":1}})", 400,
       "logit_bias"},
      {"logit_bias key with a sign", R"({"model":"stories","prompt":"a","logit_bias":{"+5":1}})",
       400, "logit_bias"},
      {"logit_bias key with a space", R"({"model":"stories","prompt":"a","logit_bias":{" 5":1}})",
       400, "logit_bias"},
      {"top_k below -1", R"({"model":"stories","prompt":"a","top_k":-2})", 400, "top_k"},
      {"min_tokens over max", R"({"model":"stories","prompt":"a","max_tokens":4,"min_tokens":9})",
       400, "min_tokens"},
      {"max_tokens 0 without echo", R"({"model":"stories","prompt":"a","max_tokens":0})", 400,
       "max_tokens"},
      {"metadata values", R"({"model":"stories","prompt":"a","metadata":{"k":[1]}})", 400,
       "metadata"},
      {"store type", R"({"model":"stories","prompt":"a","store":"yes"})", 400, "store"},
      {"stream option",
       R"({"model":"stories","prompt":"a","stream":true,"stream_options":{"x":1}})", 400,
       "stream_options.x"},
      {"echo type", R"({"model":"stories","prompt":"a","echo":1})", 400, "echo"},
      {"nested token lists", R"({"model":"stories","prompt":[[1,2],[3,"x"]]})", 400, "token ids"},
  };
  for (const auto& c : cases) {
    expect_error(post(s.port, "/v1/completions", c.request), c.status, c.needle);
    const reply ok = post(s.port, "/v1/completions", good);
    EXPECT_EQ(ok.status, 200) << "after " << c.name << ": " << ok.body;
  }
  expect_error(post(s.port, "/v1/chat/completions", R"({"model":"stories","messages":[]})"), 400,
               "messages");
  expect_error(post(s.port, "/v1/chat/completions",
                    R"({"model":"stories","messages":[{"role":"wizard","content":"x"}]})"),
               400, "role");
  // a chat too long for the context is told to shorten its messages (chat has no
  // truncate_prompt_tokens); vLLM's top_k -1 means no top-k
  expect_error(post(s.port, "/v1/chat/completions",
                    R"({"model":"stories","messages":[{"role":"user","content":")" +
                        std::string(2000, 'a') + R"("}]})"),
               400, "shorten the messages");
  EXPECT_EQ(post(s.port, "/v1/completions",
                 R"({"model":"stories","prompt":"a","max_tokens":2,"top_k":-1})")
                .status,
            200);
  expect_error(get(s.port, "/v2/everything"), 404, "no route");
  expect_error(get(s.port, "/v1/completions"), 405, "not allowed");
  // a body over the limit: 413 before it is read whole
  const reply too_big =
      post(s.port, "/v1/completions", R"({"model":"stories","prompt":")" + big + "\"}");
  EXPECT_EQ(too_big.status, 413) << too_big.body.substr(0, 200);
  // truncated body: the client promises more than it sends, then stalls -> dropped
  int fd = connect_to(s.port);
  send_all(fd,
           "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"model\":");
  const auto t0 = std::chrono::steady_clock::now();
  std::string r = read_all(fd);
  ::close(fd);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  // headers over the limit: a 431 the client receives whole (no reset while it still sends)
  for (int i = 0; i < 3; ++i) {
    const reply h =
        raw(s.port,
            "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(64 << 10, 'h') + "\r\n\r\n");
    EXPECT_EQ(h.status, 431) << h.head;
  }
  EXPECT_EQ(post(s.port, "/v1/completions", good).status, 200);
  // garbage instead of HTTP
  EXPECT_EQ(raw(s.port, "\x16\x03\x01 this is not http\r\n\r\n").status, 400);
  EXPECT_EQ(post(s.port, "/v1/completions", good).status, 200);
}

TEST(Gateway, StalledAndIdleConnectionsDoNotBlockOthers) {
  server s;
  std::vector<int> idle;
  for (int i = 0; i < 300; ++i) {
    int fd = connect_to(s.port);
    ASSERT_GE(fd, 0);
    if (i % 2) send_all(fd, "GET /health HTTP/1.1\r\nHost: x\r\n"); // half a header, then nothing
    idle.push_back(fd);
  }
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(get(s.port, "/health").status, 200);
  EXPECT_EQ(post(s.port, "/v1/completions", good).status, 200);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
  for (int fd : idle) ::close(fd);
  // a burst of simultaneous connects is accepted, not reset
  std::vector<std::thread> burst;
  std::atomic<int> ok{0};
  for (int i = 0; i < 200; ++i)
    burst.emplace_back([&] {
      if (get(s.port, "/health").status == 200) ++ok;
    });
  for (auto& t : burst) t.join();
  EXPECT_EQ(ok.load(), 200);
}

TEST(Gateway, DisconnectMidStreamCancelsAndFreesBlocks) {
  server s;
  const std::string body =
      R"({"model":"stories","prompt":"Once upon a time","max_tokens":100,"stream":true,"ignore_eos":true})";
  int fd = connect_to(s.port);
  send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                   std::to_string(body.size()) + "\r\n\r\n" + body);
  char buf[256];
  ASSERT_GT(::recv(fd, buf, sizeof buf, 0), 0); // the stream has started
  ::close(fd);                                  // abrupt disconnect
  for (int i = 0; i < 200; ++i) {
    const auto st = s.h->stats();
    if (st.kv_blocks_free == st.kv_blocks_total && st.requests_running == 0 && st.leases == 0)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const auto st = s.h->stats();
  EXPECT_EQ(st.kv_blocks_free, st.kv_blocks_total);
  EXPECT_EQ(st.leases, 0);
  EXPECT_EQ(post(s.port, "/v1/completions", good).status, 200);
}

TEST(Gateway, ApiKeyQueueFullAndNotReady) {
  gateway_options go;
  go.api_key = "sekrit";
  server s(go);
  expect_error(post(s.port, "/v1/completions", good), 401, "API key");
  expect_error(post(s.port, "/v1/completions", good, "Authorization: Bearer nope\r\n"), 401,
               "wrong");
  EXPECT_EQ(post(s.port, "/v1/completions", good, "Authorization: Bearer sekrit\r\n").status, 200);
  EXPECT_EQ(get(s.port, "/health").status, 200); // health needs no key

  host_options tight;
  tight.max_waiting = 1;
  tight.max_inflight = 1;
  server q({}, tight);
  std::vector<std::thread> ts;
  std::atomic<int> too_many{0}, fine{0}, told_when{0};
  const std::string slow =
      R"({"model":"stories","prompt":"Once upon a time","max_tokens":60,"ignore_eos":true})";
  for (int i = 0; i < 24; ++i)
    ts.emplace_back([&] {
      const reply r = post(q.port, "/v1/completions", slow);
      if (r.status == 429) ++too_many;
      if (r.status == 429 && !r.header("Retry-After").empty()) ++told_when;
      if (r.status == 200) ++fine;
    });
  for (auto& t : ts) t.join();
  EXPECT_GT(too_many.load(), 0);
  EXPECT_EQ(told_when.load(), too_many.load()) << "every 429 says when to retry";
  EXPECT_GT(fine.load(), 0);

  host_options doomed;
  doomed.place = *even_placement(stories()->config, 2, 1);
  ASSERT_TRUE(doomed.faults.add("kill-shard:stage=0,rank=1,p=1.0"));
  doomed.max_restarts = 1;
  server d({}, doomed);
  EXPECT_NE(post(d.port, "/v1/completions", good).status, 200); // the shard dies on the first step
  for (int i = 0; i < 100 && get(d.port, "/health").status == 200; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const reply h = get(d.port, "/health");
  EXPECT_EQ(h.status, 503);
  EXPECT_NE(h.body.find("stage0.rank1"), std::string::npos) << h.body;
  const reply down = post(d.port, "/v1/completions", good);
  EXPECT_EQ(down.status, 503);
  EXPECT_EQ(down.header("Retry-After"), "1") << down.head;
}

TEST(Gateway, MetricsAndModels) {
  server s;
  EXPECT_EQ(post(s.port, "/v1/completions", good).status, 200);
  const reply m = get(s.port, "/metrics");
  EXPECT_EQ(m.status, 200);
  for (const char* name :
       {"troupe_http_requests_total{model_name=\"stories\",status=\"200\"}",
        "troupe_kv_blocks_total", "troupe_kv_blocks_free", "troupe_preemptions_total",
        "troupe_shard_restarts_total", "troupe_queue_depth", "troupe_running_sequences",
        "troupe_time_to_first_token_seconds_bucket", "troupe_inter_token_latency_seconds_count",
        "troupe_generation_tokens_total"})
    EXPECT_NE(m.body.find(name), std::string::npos) << name;
  const reply models = get(s.port, "/v1/models");
  EXPECT_EQ(models.j["data"][0]["id"], "stories");
}
