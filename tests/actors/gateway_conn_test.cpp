// gateway_conn_test.cpp: connection handling in the HTTP server under the gateway, over real
// sockets: requests sent back to back on one keep-alive connection, and two pipelined in one
// write, are all answered (the watcher that reads the socket while a response is produced
// hands every byte it took back before the next request is read; it used to keep a request it
// had read just as its response finished, and the connection then hung); a streamed response
// to an HTTP/1.0 request is delimited by the close, not chunked; a GET from a client that
// half-closes after sending it (nc -N) is still answered.
#include <string>

#include <gtest/gtest.h>

#include "gateway_util.hpp"

using namespace gw_test;

namespace {

// One response read off a keep-alive connection (Content-Length bodies), or status 0 when
// the server did not answer within the socket's 10 s timeout.
reply read_one(int fd, std::string& pending) {
  char buf[8192];
  size_t sep;
  while ((sep = pending.find("\r\n\r\n")) == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return {};
    pending.append(buf, static_cast<size_t>(n));
  }
  reply r;
  r.head = pending.substr(0, sep);
  r.status = std::atoi(r.head.c_str() + 9);
  const size_t len = static_cast<size_t>(std::atol(r.header("Content-Length").c_str()));
  while (pending.size() < sep + 4 + len) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return {};
    pending.append(buf, static_cast<size_t>(n));
  }
  r.body = pending.substr(sep + 4, len);
  pending.erase(0, sep + 4 + len);
  return r;
}

} // namespace

TEST(GatewayConnections, BackToBackAndPipelinedRequestsOnOneConnectionAreAllAnswered) {
  server s;
  const int fd = connect_to(s.port);
  ASSERT_GE(fd, 0);
  std::string pending;
  // /health and /metrics are answered from other threads (the host's probe), /v1/models at
  // once: each request goes out the moment the answer before it is complete
  const char* paths[] = {"/health", "/metrics", "/v1/models"};
  for (int i = 0; i < 1500; ++i) {
    const std::string path = paths[i % 3];
    send_all(fd, "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n");
    const reply r = read_one(fd, pending);
    ASSERT_EQ(r.status, 200) << "request " << i << " (" << path << ") was not answered";
  }
  // two requests in one write
  for (int i = 0; i < 50; ++i) {
    send_all(fd,
             "GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_EQ(read_one(fd, pending).status, 200) << i;
    const reply m = read_one(fd, pending);
    ASSERT_EQ(m.status, 200) << i;
    EXPECT_NE(m.body.find("stories"), std::string::npos);
  }
  ::close(fd);
}

TEST(GatewayConnections, AStreamToAnHttp10ClientIsNotChunked) {
  server s;
  const std::string body =
      R"({"model":"stories","prompt":"Once upon a time","max_tokens":4,"stream":true})";
  const reply r = raw(s.port, "POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\n"
                              "Content-Length: " +
                                  std::to_string(body.size()) + "\r\n\r\n" + body);
  ASSERT_EQ(r.status, 200) << r.head;
  EXPECT_EQ(r.header("Transfer-Encoding"), "") << r.head;
  EXPECT_EQ(r.body.rfind("data: {", 0), 0u) << r.body; // the events themselves, no chunk sizes
  const std::string done = "data: [DONE]\n\n";
  ASSERT_GE(r.body.size(), done.size());
  EXPECT_EQ(r.body.substr(r.body.size() - done.size()), done) << r.body;
  // the same over HTTP/1.1 is chunked
  const reply c = post(s.port, "/v1/completions", body);
  EXPECT_EQ(c.header("Transfer-Encoding"), "chunked") << c.head;
}

TEST(GatewayConnections, AGetFromAClientThatHalfClosesIsStillAnswered) {
  server s;
  for (const char* path : {"/health", "/metrics", "/v1/models"}) {
    const int fd = connect_to(s.port);
    ASSERT_GE(fd, 0);
    send_all(fd, std::string("GET ") + path + " HTTP/1.1\r\nHost: x\r\n\r\n");
    ::shutdown(fd, SHUT_WR); // no more requests: the answer is still wanted
    const std::string r = read_all(fd);
    ::close(fd);
    EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << path << ": " << r.substr(0, 200);
  }
}

// With --allowed-origins, a browser's preflight is answered 204 before authentication (it
// carries no key), and the answers themselves, a stream and the server's own 413 included,
// name the origin; another origin's preflight falls through to the gateway and its answers
// name no origin.
TEST(GatewayConnections, AllowedOriginsGetCorsHeadersAndPreflightsAnswered) {
  gateway_options go;
  go.api_key = "k";
  go.limits.allowed_origins = {"https://chat.example"};
  server s(go);
  const std::string pre = "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: "
                          "close\r\nAccess-Control-Request-Method: POST\r\n"
                          "Access-Control-Request-Headers: authorization, content-type\r\n";
  reply r = raw(s.port, pre + "Origin: https://chat.example\r\n\r\n");
  EXPECT_EQ(r.status, 204) << r.head;
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "https://chat.example") << r.head;
  EXPECT_EQ(r.header("Access-Control-Allow-Headers"), "authorization, content-type") << r.head;
  r = raw(s.port, pre + "Origin: https://evil.example\r\n\r\n");
  EXPECT_EQ(r.status, 401) << r.head; // not a preflight we answer: the gateway's rules apply
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "") << r.head;

  const std::string body =
      R"({"model":"stories","messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"stream":true})";
  r = post(s.port, "/v1/chat/completions", body,
           "Authorization: Bearer k\r\nOrigin: https://chat.example\r\n");
  ASSERT_EQ(r.status, 200) << r.head;
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "https://chat.example") << r.head;
  EXPECT_NE(r.body.find("[DONE]"), std::string::npos);
  r = get(s.port, "/v1/models", "Authorization: Bearer k\r\nOrigin: https://evil.example\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "") << r.head;
  EXPECT_EQ(r.header("Vary"), "Origin") << r.head;
  // the server's own early refusal (a body over the limit, said up front) names it too
  r = raw(s.port, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nOrigin: https://chat.example\r\n"
                  "Content-Length: 99999999\r\n\r\n");
  EXPECT_EQ(r.status, 413) << r.head;
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "https://chat.example") << r.head;
}

// A request that starts and does not finish within the read timeout (1 s here): a body that
// stops short of its Content-Length, or headers that never end, is answered 408 and the
// connection closed, instead of the socket just closing.
TEST(GatewayConnections, ARequestNotFinishedInTimeGets408) {
  server s;
  for (const std::string& start :
       {std::string("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                    "application/json\r\nContent-Length: 100\r\n\r\n{\"model\":"),
        std::string("GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")}) {
    const int fd = connect_to(s.port);
    ASSERT_GE(fd, 0);
    send_all(fd, start);
    const std::string got = read_all(fd); // until the server closes (or 10 s)
    ::close(fd);
    EXPECT_EQ(got.rfind("HTTP/1.1 408", 0), 0u) << got;
    EXPECT_NE(got.find("did not arrive within"), std::string::npos) << got;
  }
  EXPECT_EQ(get(s.port, "/health").status, 200); // the server carries on
}
