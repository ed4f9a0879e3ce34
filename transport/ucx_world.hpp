// ucx_world.hpp: the processes of one run, found and connected. Rank 0 listens at
// MASTER_ADDR:MASTER_PORT (a UCX listener); every other rank connects, proves it knows the
// run's shared secret, and sends its worker address; once all WORLD_SIZE ranks are in, rank 0
// answers each with the table of addresses, and every rank connects to every other by worker
// address (so UCX can pick shared memory, cma, tcp or rdma per pair). The result is the world
// group (all ranks) from which split() cuts the groups the model needs (a stage's TP ranks, an
// expert group), each with its own worker so that shards of one process drive theirs from
// their own threads.
//
// Join protocol (version `rendezvous_version`, over a UCX stream, integers little-endian):
//   0 -> r  challenge  magic, version, 32-byte nonce
//   r -> 0  hello      magic, version, rank, world size, address length, 32-byte client nonce,
//                      HMAC-SHA256(secret, "hello" nonce rank size address), then the address
//   0 -> r  verdict    magic, code (0 = welcome), text length, text (why it was refused)
//   0 -> r  table      per rank: length, address; then HMAC-SHA256(secret, "table" client
//                      nonce table), so a rank also knows rank 0 holds the secret
// Everything a peer sends is checked (magic, version, rank range, a rank already taken, the
// world size, address length at most 64 KiB, the MAC); a peer that fails is refused with the
// reason, logged, and the run waits for the right one. The secret never crosses the wire.
// Tests: tests/transport/ucx_group_test.cpp
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/expected.hpp"
#include "transport/ucx_group.hpp"

namespace troupe::transport {

inline constexpr uint32_t rendezvous_version = 1;

struct world_options {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  uint16_t master_port = 29500;
  std::string secret;                             // required when size > 1
  std::chrono::milliseconds join_timeout{120000}; // the whole join, retries included
  ucx_group_options group;                        // the world group's options
  uint32_t version = rendezvous_version;          // spoken in the join (tests vary it)
};

/// RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (as torchrun and Kubernetes set them)
/// and TROUPE_SECRET or TROUPE_SECRET_FILE over `base`; a malformed value is an error naming it.
expected<world_options> world_options_from_env(world_options base = {});

class ucx_world {
 public:
  static expected<std::unique_ptr<ucx_world>> join(const world_options& opt);
  int rank() const { return world_->rank(); }
  int size() const { return world_->size(); }
  ucx_group& group() { return *world_; }
  /// Collective over the world: `members` lists world ranks in group-rank order. Members get
  /// their group; the others get null. `id` (1..255) must differ between groups that share
  /// ranks.
  expected<std::unique_ptr<ucx_group>> split(std::span<const int> members, uint8_t id,
                                             ucx_group_options opt = {});

 private:
  ucx_world() = default;
  std::shared_ptr<ucx_context> ctx_;
  std::unique_ptr<ucx_group> world_;
};

} // namespace troupe::transport
