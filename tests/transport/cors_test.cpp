// cors_test.cpp: which requests get which CORS headers (cors_policy): none when off; with an
// exact list, only a listed origin is named (echoed) and every answer varies with Origin; "*"
// answers with the wildcard; a preflight is recognised only as OPTIONS with both headers, and
// what it echoes of the requested headers cannot smuggle in a line break.
#include <gtest/gtest.h>

#include "transport/cors.hpp"

using namespace troupe::transport;

namespace {

std::string value(const header_list& h, const std::string& name) {
  for (const auto& [k, v] : h)
    if (k == name) return v;
  return "(absent)";
}

} // namespace

TEST(Cors, OffByDefault) {
  cors_policy p;
  EXPECT_FALSE(p.enabled());
  EXPECT_TRUE(p.response_headers({{"origin", "https://a.example"}}).empty());
  EXPECT_TRUE(p.preflight_headers(
                   {{"origin", "https://a.example"}, {"access-control-request-method", "POST"}})
                  .empty());
}

TEST(Cors, AnExactListNamesOnlyItsOrigins) {
  cors_policy p({"https://a.example", "http://localhost:3000"});
  EXPECT_TRUE(p.allows("https://a.example"));
  EXPECT_TRUE(p.allows("http://localhost:3000"));
  EXPECT_FALSE(p.allows("https://a.example.evil"));
  EXPECT_FALSE(p.allows("http://localhost:3001"));
  EXPECT_FALSE(p.allows(""));
  const auto ok = p.response_headers({{"origin", "http://localhost:3000"}});
  EXPECT_EQ(value(ok, "Access-Control-Allow-Origin"), "http://localhost:3000");
  EXPECT_EQ(value(ok, "Vary"), "Origin");
  const auto no = p.response_headers({{"origin", "https://evil.example"}});
  EXPECT_EQ(value(no, "Access-Control-Allow-Origin"), "(absent)");
  EXPECT_EQ(value(no, "Vary"), "Origin"); // a cache must not reuse it for a listed origin
  EXPECT_EQ(value(p.response_headers({}), "Access-Control-Allow-Origin"), "(absent)");
}

TEST(Cors, OriginsAsTypedMatchAsBrowsersSendThem) {
  cors_policy p({" https://a.example", "https://b.example/ ", ""});
  EXPECT_TRUE(p.allows("https://a.example"));
  EXPECT_TRUE(p.allows("https://b.example"));
  EXPECT_FALSE(p.allows(""));
  EXPECT_FALSE(cors_policy({"", " "}).enabled());
}

TEST(Cors, AWildcardAllowsAnyOriginWithoutVarying) {
  cors_policy p({"*"});
  const auto h = p.response_headers({{"origin", "https://anything.example"}});
  EXPECT_EQ(value(h, "Access-Control-Allow-Origin"), "*");
  EXPECT_EQ(value(h, "Vary"), "(absent)");
  EXPECT_EQ(value(h, "Access-Control-Expose-Headers"), "Retry-After");
}

TEST(Cors, Preflights) {
  const std::map<std::string, std::string> pre = {{"origin", "https://a.example"},
                                                  {"access-control-request-method", "POST"}};
  EXPECT_TRUE(cors_policy::is_preflight("OPTIONS", pre));
  EXPECT_FALSE(cors_policy::is_preflight("POST", pre));
  EXPECT_FALSE(cors_policy::is_preflight("OPTIONS", {{"origin", "https://a.example"}}));
  EXPECT_FALSE(cors_policy::is_preflight("OPTIONS", {{"access-control-request-method", "GET"}}));

  cors_policy p({"https://a.example"});
  auto h = p.preflight_headers(pre);
  EXPECT_EQ(value(h, "Access-Control-Allow-Origin"), "https://a.example");
  EXPECT_EQ(value(h, "Access-Control-Allow-Methods"), "GET, HEAD, POST, OPTIONS");
  EXPECT_EQ(value(h, "Access-Control-Allow-Headers"), "Authorization, Content-Type");
  EXPECT_NE(value(h, "Access-Control-Max-Age"), "(absent)");
  auto asked = pre;
  asked["access-control-request-headers"] = "authorization, x-stainless-os, x.y\r\nSet-Cookie: a=b";
  h = p.preflight_headers(asked);
  const std::string allowed = value(h, "Access-Control-Allow-Headers");
  EXPECT_EQ(allowed.find('\r'), std::string::npos);
  EXPECT_EQ(allowed.find('\n'), std::string::npos);
  EXPECT_EQ(allowed.find(':'), std::string::npos);
  EXPECT_EQ(allowed.rfind("authorization, x-stainless-os, x.y", 0), 0u) << allowed;
  auto evil = pre;
  evil["origin"] = "https://evil.example";
  EXPECT_TRUE(p.preflight_headers(evil).empty());
}

// Origins from the command line: written as browsers send them, and refused, naming the value,
// where no browser would ever send them (a path, no scheme, another scheme) or where they
// would let in every sandboxed page ("null").
TEST(Cors, OriginsFromTheCommandLineAreCheckedAndLowerCased) {
  auto ok = parse_origins({"HTTPS://Chat.Example.com", " http://localhost:3000/ ", "*", ""});
  ASSERT_TRUE(ok) << ok.error().to_string();
  EXPECT_EQ(*ok,
            (std::vector<std::string>{"https://chat.example.com", "http://localhost:3000", "*"}));
  for (const char* bad : {"foo", "https://a.com/path", "null", "ftp://a.com", "https://",
                          "https://u@a.com", "a.com:443"}) {
    auto r = parse_origins({bad});
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find(bad), std::string::npos) << r.error().message;
  }
}
