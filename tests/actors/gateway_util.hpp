// gateway_util.hpp: what the gateway tests share: a raw HTTP/1.1 client over a socket (so
// tests control every byte, and see exactly what the server wrote), and a server fixture
// that starts a host and a gateway on a free port.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../test_paths.hpp"
#include "actors/gateway.hpp"
#include "actors/openai_api.hpp"

namespace gw_test {

using namespace troupe;
using namespace troupe::actors;
using json = nlohmann::json;

inline int connect_to(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

inline void send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

inline std::string read_all(int fd) {
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

struct reply {
  int status = 0;
  std::string head; // status line and header fields
  std::string body;
  json j;
  /// The value of header field `name` (case-insensitive), or "".
  std::string header(const std::string& name) const {
    std::string lh = head, ln = "\r\n" + name + ":";
    for (auto& c : lh) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (auto& c : ln) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const size_t at = lh.find(ln);
    if (at == std::string::npos) return "";
    size_t b = at + ln.size(), e = head.find("\r\n", b);
    while (b < e && head[b] == ' ') ++b;
    return head.substr(b, e - b);
  }
};

inline reply raw(uint16_t port, const std::string& bytes) {
  int fd = connect_to(port);
  if (fd < 0) return {};
  send_all(fd, bytes);
  std::string r = read_all(fd);
  ::close(fd);
  reply out;
  if (r.size() > 12) out.status = std::atoi(r.c_str() + 9);
  auto sep = r.find("\r\n\r\n");
  if (sep != std::string::npos) {
    out.head = r.substr(0, sep);
    out.body = r.substr(sep + 4);
  }
  out.j = json::parse(out.body, nullptr, false);
  return out;
}

inline reply post(uint16_t port, const std::string& path, const std::string& body,
                  const std::string& extra = "") {
  return raw(port,
             "POST " + path +
                 " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n" +
                 extra + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
}

inline reply get(uint16_t port, const std::string& path, const std::string& extra = "") {
  return raw(port,
             "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + extra + "\r\n");
}

inline std::shared_ptr<const model_source> stories() {
  static auto m = *open_model(test::model_path("stories260K/stories260K.gguf"));
  return m;
}

// The published chat templates and transformers' renderings (make_jinja_fixtures.py).
inline const nlohmann::ordered_json& jinja_fixture() {
  static const nlohmann::ordered_json j =
      nlohmann::ordered_json::parse(test::read_file(test::fixture_path("jinja_templates.json")));
  return j;
}

// `base`'s weights and config with another tokenizer
inline std::shared_ptr<model_source> with_tokenizer(const model_source& base,
                                                    std::unique_ptr<tokenizer> tok) {
  auto m = std::make_shared<model_source>();
  m->path = base.path;
  m->format = base.format;
  m->config = base.config;
  m->tensors = base.tensors;
  m->tok = std::move(tok);
  return m;
}

// stories260K-hf whose tokenizer_config carries `chat_template`; `ctx`: its context, if set
inline std::shared_ptr<const model_source> stories_with(const std::string& chat_template,
                                                        int64_t ctx = 0) {
  auto base = open_model(test::model_path("stories260K-hf"));
  EXPECT_TRUE(base);
  json config = test::load_json(test::model_path("stories260K-hf/tokenizer_config.json"));
  config["chat_template"] = chat_template;
  auto tok =
      tokenizer::from_hf_json(test::read_file(test::model_path("stories260K-hf/tokenizer.json")),
                              config.dump(), "stories with a chat template");
  EXPECT_TRUE(tok) << tok.error().message;
  auto m = with_tokenizer(**base, std::move(*tok));
  if (ctx > 0) m->config.ctx = ctx;
  return m;
}

// Qwen2.5-7B-Instruct's published template ("template"), or transformers' rendering of one of
// the fixture's contexts with it ("renders", the context's name)
inline std::string qwen25(const char* what, const std::string& case_name = "") {
  for (const auto& t : jinja_fixture()["templates"])
    if (t["name"] == "Qwen-Qwen2.5-7B-Instruct")
      return what == std::string("template") ? t["template"] : t["renders"][case_name]["text"];
  return "";
}

// What the gateway knows of `m` serving as "stories" with `chat_template` run as Jinja (for
// parsing requests without a server)
inline serving_info jinja_serving_info(const model_source& m, const std::string& chat_template) {
  serving_info info;
  info.model_name = "stories";
  info.tok = m.tok.get();
  info.context = m.config.ctx;
  info.chat_template = chat_template;
  info.chat = detect_chat_format(chat_template);
  info.jinja = std::make_shared<const jinja_template>(*jinja_template::parse(chat_template));
  return info;
}

struct server {
  std::unique_ptr<host> h;
  std::unique_ptr<gateway> gw;
  uint16_t port = 0;
  explicit server(gateway_options go = {}, host_options ho = {},
                  std::shared_ptr<const model_source> m = nullptr) {
    if (!m) m = stories();
    ho.place = ho.place.stages.empty() ? *even_placement(m->config, 1, 1) : ho.place;
    auto hh = host::start(m, ho);
    EXPECT_TRUE(hh);
    h = std::move(*hh);
    EXPECT_TRUE(h->wait_ready(60));
    go.port = 0;
    go.model_name = "stories";
    if (go.limits.read_timeout_s == 15) go.limits.read_timeout_s = 1.0;
    auto g = gateway::start(*h, go);
    EXPECT_TRUE(g) << (g ? "" : g.error().to_string());
    gw = std::move(*g);
    port = gw->port();
  }
};

// The bytes of a chunked body, de-chunked.
inline std::string dechunk(const std::string& body) {
  std::string out;
  size_t at = 0;
  while (at < body.size()) {
    const size_t eol = body.find("\r\n", at);
    if (eol == std::string::npos) break;
    const size_t n = std::stoul(body.substr(at, eol - at), nullptr, 16);
    if (n == 0) break;
    out += body.substr(eol + 2, n);
    at = eol + 2 + n + 2;
  }
  return out;
}

// The JSON of each "data: ..." event of an SSE body ([DONE] as the string "[DONE]").
inline std::vector<json> events(const std::string& chunked) {
  const std::string body = dechunk(chunked);
  std::vector<json> out;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    const std::string data = body.substr(at + 6, end - at - 6);
    out.push_back(data == "[DONE]" ? json("[DONE]") : json::parse(data, nullptr, false));
    at = end;
  }
  return out;
}

} // namespace gw_test
