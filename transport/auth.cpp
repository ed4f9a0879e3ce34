// auth.cpp: HMAC-SHA256, nonces and constant-time comparison over OpenSSL (auth.hpp).
#include "transport/auth.hpp"

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

bool same_digest(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

} // namespace troupe::transport
