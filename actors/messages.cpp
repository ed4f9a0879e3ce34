// messages.cpp: announces the message types (messages.hpp).
#include "actors/messages.hpp"

namespace troupe::actors {

namespace {
const caf::atom_value troupe_category = caf::atom("troupe");
}

caf::error to_caf(const error& e) {
  return caf::error(static_cast<uint8_t>(e.code), troupe_category, caf::make_message(e.message));
}

error from_caf(const caf::error& e) {
  if (!e) return {errc::internal, "no error"};
  if (e.category() == troupe_category) {
    std::string msg;
    if (e.context().match_elements<std::string>()) msg = e.context().get_as<std::string>(0);
    return {static_cast<errc>(e.code()), std::move(msg)};
  }
  if (e.category() == caf::atom("system")) {
    switch (static_cast<caf::sec>(e.code())) {
    case caf::sec::request_timeout:
      return {errc::timeout, "the engine did not answer in time"};
    case caf::sec::request_receiver_down:
      return {errc::unavailable, "the engine is not running"};
    default:
      break;
    }
  }
  return {errc::internal, caf::to_string(e)};
}

void register_messages(caf::actor_system_config& cfg) {
  cfg.add_error_category(troupe_category, [](uint8_t code, caf::atom_value, const caf::message& m) {
    std::string out(to_string(static_cast<errc>(code)));
    if (m.match_elements<std::string>()) out += ": " + m.get_as<std::string>(0);
    return out;
  });
  cfg.add_message_type<prompt_logprob>("troupe.prompt_logprob");
  cfg.add_message_type<prompt_score>("troupe.prompt_score");
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
  cfg.add_message_type<shard_order>("troupe.shard_order");
  cfg.add_message_type<shard_report>("troupe.shard_report");
  cfg.add_message_type<std::vector<shard_report>>("troupe.shard_reports");
  cfg.add_message_type<route_update>("troupe.route_update");
  cfg.add_message_type<std::vector<caf::actor>>("troupe.actor_vector");
  cfg.add_message_type<std::vector<std::vector<caf::actor>>>("troupe.actor_vector2");
  cfg.add_message_type<std::vector<uint8_t>>("troupe.bytes");
  cfg.add_message_type<std::vector<int64_t>>("troupe.int64s"); // expert counts (triples)
  cfg.add_message_type<std::vector<std::vector<uint8_t>>>("troupe.byte_vectors");
}

} // namespace troupe::actors
