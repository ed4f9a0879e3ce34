// auth.cpp: HMAC-SHA256, nonces and constant-time comparison over OpenSSL (auth.hpp).
#include "transport/auth.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

namespace troupe::transport {

digest hmac_sha256(const std::string& secret, std::span<const uint8_t> data) {
  digest d{};
  unsigned len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), data.data(), data.size(),
       d.data(), &len);
  return d;
}

nonce random_nonce() {
  nonce n{};
  RAND_bytes(n.data(), static_cast<int>(n.size()));
  return n;
}

expected<std::string> secret_from_env() {
  if (const char* s = std::getenv("TROUPE_SECRET"); s && *s) return std::string(s);
  const char* path = std::getenv("TROUPE_SECRET_FILE");
  if (!path || !*path) return std::string();
  std::ifstream in(path);
  if (!in) return make_error(errc::io_error, "TROUPE_SECRET_FILE={}: cannot read it", path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

bool same_digest(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

} // namespace troupe::transport
