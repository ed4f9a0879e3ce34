// local_node.cpp: the coordinator's process as a node (local_node.hpp).
#include "actors/local_node.hpp"

#include "exec/expert_load.hpp"

namespace troupe::actors {
namespace {

node_actor::behavior_type local_node(node_actor::pointer self, std::shared_ptr<watchdog> watch) {
  return {
      [](spawn_atom, const shard_order&) -> caf::result<caf::actor> {
        return to_caf(error{errc::unavailable, "the coordinator's process takes no shard orders"});
      },
      [](ping_atom) { return true; },
      [=](halt_atom, uint64_t epoch, const std::string& why) {
        const auto& from = self->current_sender();
        if (from && from->node() == self->node()) watch->abort_all(epoch, why);
      },
      [](experts_atom) { return exec::flatten(exec::expert_counts()); },
  };
}

} // namespace

node_actor spawn_local_node(caf::actor_system& sys, std::shared_ptr<watchdog> watch) {
  return sys.spawn(local_node, std::move(watch));
}

} // namespace troupe::actors
