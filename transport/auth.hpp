// auth.hpp: what processes of one run use to prove they hold its shared secret without
// sending it: HMAC-SHA256 over a challenge (OpenSSL), fresh random nonces, and a comparison
// in constant time, and where the secret comes from. Used by the UCX join (ucx_world.cpp) and by
// the worker registry (actors/worker_pool.cpp). Thread-safe. Tests: through
// tests/transport/ucx_group_test.cpp and tests/integration/workers_test.py.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "core/expected.hpp"

namespace troupe::transport {

using digest = std::array<uint8_t, 32>;
using nonce = std::array<uint8_t, 32>;

digest hmac_sha256(const std::string& secret, std::span<const uint8_t> data);
nonce random_nonce();
/// The run's secret from TROUPE_SECRET, else from the file TROUPE_SECRET_FILE names (trailing
/// newline dropped); "" when neither is set.
expected<std::string> secret_from_env();
/// Equal without a timing side channel.
bool same_digest(std::span<const uint8_t> a, std::span<const uint8_t> b);

} // namespace troupe::transport
