// output_processor_test.cpp: a completion's tokens become text off the engine: stop strings
// end it (the tokens after the one that completed the stop are not accepted, the stop string
// is never shown), min_tokens delays them, and token pieces join back into the text with
// leading spaces kept ("▁Once" after a prompt is " Once"); a tool-call format's markers that
// the tokenizer has as special tokens stay in the text (the others are still dropped).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../test_paths.hpp"
#include "text/output_processor.hpp"

using namespace troupe;

namespace {

std::unique_ptr<tokenizer> stories() {
  auto t = tokenizer::from_hf_dir(test::model_path("stories260K-hf"));
  EXPECT_TRUE(t);
  return t ? std::move(*t) : nullptr;
}

std::vector<int32_t> enc(const tokenizer& tok, const std::string& s, bool bos) {
  auto r = tok.encode(s, bos, false);
  EXPECT_TRUE(r);
  return r ? *r : std::vector<int32_t>{};
}

} // namespace

TEST(OutputProcessor, StopStringEndsTheCompletion) {
  auto tok = stories();
  const auto prompt = enc(*tok, "Once upon a time", true);
  const auto all = enc(*tok, "Once upon a time, there was a little girl named Lily.", true);
  const std::vector<int32_t> gen(all.begin() + static_cast<std::ptrdiff_t>(prompt.size()),
                                 all.end());
  output_processor op(*tok, prompt, {"girl"});
  std::string text;
  size_t accepted = 0;
  for (int32_t id : gen) { // one token per event, as the engine streams them
    auto d = op.push(std::span<const int32_t>(&id, 1));
    text += d.text;
    accepted += d.accepted;
  }
  EXPECT_TRUE(op.stopped());
  EXPECT_EQ(text, ", there was a little ");
  EXPECT_EQ(op.finish().text, "");
  // accepted: up to the token that completed "girl", none after it
  EXPECT_LT(accepted, gen.size());
  const std::string upto =
      tok->decode(std::span<const int32_t>(all).first(prompt.size() + accepted));
  EXPECT_NE(upto.find("girl"), std::string::npos);
  const std::string before =
      tok->decode(std::span<const int32_t>(all).first(prompt.size() + accepted - 1));
  EXPECT_EQ(before.find("girl"), std::string::npos);
}

TEST(OutputProcessor, MinTokensDelaysStopStrings) {
  auto tok = stories();
  const auto prompt = enc(*tok, "Once upon a time", true);
  const auto all = enc(*tok, "Once upon a time, there was a girl. The girl ran.", true);
  const std::vector<int32_t> gen(all.begin() + static_cast<std::ptrdiff_t>(prompt.size()),
                                 all.end());
  output_processor op(*tok, prompt, {"girl"}, static_cast<int>(gen.size()) - 3);
  auto d = op.push(gen);
  EXPECT_FALSE(op.stopped()); // both "girl"s come before min_tokens
  EXPECT_EQ(d.accepted, gen.size());
  EXPECT_EQ(d.text + op.finish().text, ", there was a girl. The girl ran.");
}

TEST(OutputProcessor, TokenPiecesJoinIntoTheText) {
  auto tok = stories();
  const auto prompt = enc(*tok, "Once upon", true);
  const auto all = enc(*tok, "Once upon a time 🤖 café", true);
  const std::span<const int32_t> gen = std::span<const int32_t>(all).subspan(prompt.size());
  const auto pieces = token_pieces(*tok, prompt, gen);
  ASSERT_EQ(pieces.size(), gen.size());
  EXPECT_EQ(pieces[0], " a"); // the leading space of "▁a" is kept after a prompt
  std::string joined;
  for (const auto& p : pieces) joined += p;
  EXPECT_EQ(joined, " a time 🤖 café");
  // the emoji arrives as byte-fallback tokens: pieces of one byte each
  int one_byte = 0;
  for (const auto& p : pieces)
    one_byte += p.size() == 1 && static_cast<unsigned char>(p[0]) >= 0x80;
  EXPECT_GE(one_byte, 4);
  // a prompt's own pieces (BOS skipped) join into the prompt text
  const auto pp = token_pieces(*tok, {}, prompt);
  std::string ptext;
  for (const auto& p : pp) ptext += p;
  EXPECT_EQ(ptext, "Once upon");
  EXPECT_EQ(pp[0], ""); // BOS
}

TEST(StopMatcher, HoldsBackPartialMatches) {
  stop_matcher m({"STOP", "\n\n"});
  std::string out = m.push("hello S");
  EXPECT_EQ(out, "hello ");
  out = m.push("T");
  EXPECT_EQ(out, "");
  out = m.push("ill going");
  EXPECT_EQ(out, "STill going");
  out = m.push(" then \nwait\n");
  EXPECT_EQ(out, " then \nwait");
  out = m.push("\nafter");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(out, "");
  stop_matcher n({"end"});
  EXPECT_EQ(n.push("the en"), "the ");
  EXPECT_EQ(n.finish(), "en");
}

// stories' tokenizer with Kimi K2's tool-call markers added as special tokens, as Kimi's own
// tokenizer has them
TEST(OutputProcessor, ToolMarkersThatAreSpecialTokensStayInTheText) {
  const std::string dir = test::model_path("stories260K-hf");
  auto j = nlohmann::json::parse(test::read_file(dir + "/tokenizer.json"));
  int32_t next = static_cast<int32_t>(j["model"]["vocab"].size());
  const auto markers = tool_markers(tool_format::kimi_k2);
  for (std::string_view m : markers)
    j["added_tokens"].push_back({{"id", next++}, {"content", std::string(m)}, {"special", true}});
  auto made = tokenizer::from_hf_json(j.dump(), test::read_file(dir + "/tokenizer_config.json"),
                                      "stories + markers");
  ASSERT_TRUE(made) << made.error().message;
  const tokenizer& tok = **made;
  const auto prompt = enc(tok, "Hi", true);
  auto reply = *tok.encode("Sure.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_"
                           "weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}"
                           "<|tool_call_end|><|tool_calls_section_end|>",
                           false, true);
  ASSERT_TRUE(tok.is_special(reply.back()));
  reply.push_back(tok.eos_id()); // a special token that is no marker
  auto text_of = [&](bool keep) {
    output_processor op(tok, prompt, {});
    if (keep) op.keep_tool_markers(tool_format::kimi_k2);
    std::string text;
    for (int32_t id : reply) text += op.push(std::span<const int32_t>(&id, 1)).text;
    return text + op.finish().text;
  };
  const std::string dropped = text_of(false), kept = text_of(true);
  EXPECT_EQ(dropped.find("<|"), std::string::npos) << dropped;
  for (std::string_view m : markers) EXPECT_NE(kept.find(m), std::string::npos) << m;
  EXPECT_EQ(kept.find("</s>"), std::string::npos) << kept; // other special tokens still out
  tool_call_parser p(tool_format::kimi_k2);
  auto d = p.push(kept);
  auto e = p.finish();
  for (auto& c : e.calls) d.calls.push_back(c);
  ASSERT_EQ(d.calls.size(), 1u) << kept;
  EXPECT_EQ(d.calls[0].name, "get_weather");
  EXPECT_EQ(d.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(d.text, " Sure."); // "▁Sure." after the prompt
}

TEST(StopMatcher, IncludedStopStringEndsTheText) {
  for (size_t split : {1, 3, 100}) {
    stop_matcher m({"xyz", "girl"}, true);
    const std::string text = "a little girl here";
    std::string out;
    for (size_t i = 0; i < text.size() && !m.stopped(); i += split)
      out += m.push(text.substr(i, split));
    out += m.finish();
    EXPECT_TRUE(m.stopped());
    EXPECT_EQ(out, "a little girl") << split;
  }
  // of two that complete in one piece, the one that starts first
  stop_matcher m({"girl", "little"}, true);
  EXPECT_EQ(m.push("a little girl"), "a little");
}
