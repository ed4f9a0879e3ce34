// messages.cpp: announces the message types (messages.hpp).
#include "actors/messages.hpp"

namespace troupe::actors {

void register_messages(caf::actor_system_config& cfg) {
  cfg.add_message_type<sampling_params>("troupe.sampling_params");
  cfg.add_message_type<batch_seq>("troupe.batch_seq");
  cfg.add_message_type<batch>("troupe.batch");
  cfg.add_message_type<sampled_token>("troupe.sampled_token");
  cfg.add_message_type<step_msg>("troupe.step_msg");
  cfg.add_message_type<step_done>("troupe.step_done");
  cfg.add_message_type<step_failed>("troupe.step_failed");
  cfg.add_message_type<gen_request>("troupe.gen_request");
  cfg.add_message_type<gen_event>("troupe.gen_event");
  cfg.add_message_type<histogram>("troupe.histogram");
  cfg.add_message_type<engine_stats>("troupe.engine_stats");
}

} // namespace troupe::actors
