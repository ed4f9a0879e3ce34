// chat_template.cpp: native renderings of the common chat template families
// (chat_template.hpp). Each case follows its published Jinja template literally, including
// where it strips content (Jinja's trim and Python's str.strip(): the ASCII whitespace here) and
// where it does not.
#include "text/chat_template.hpp"

#include <cctype>
#include <ctime>

namespace troupe {

std::string_view to_string(chat_format f) {
  switch (f) {
  case chat_format::plain:
    return "plain";
  case chat_format::llama2:
    return "llama2";
  case chat_format::llama3:
    return "llama3";
  case chat_format::chatml:
    return "chatml";
  case chat_format::mistral:
    return "mistral";
  case chat_format::gemma:
    return "gemma";
  case chat_format::phi3:
    return "phi3";
  case chat_format::command_r:
    return "command_r";
  case chat_format::olmo2:
    return "olmo2";
  case chat_format::harmony:
    return "harmony";
  }
  return "?";
}

namespace {

bool has(std::string_view t, std::string_view s) {
  return t.find(s) != std::string_view::npos;
}

// OLMo 2's user turn is {{ '<|user|>\n' + message['content'] + '\n' }}: a literal after the
// content and no eos (Zephyr appends eos_token, Tulu 2 and OLMo 1 nothing), and the template
// opens with bos_token (Tulu 3 has the same turns without it, and another eos).
bool olmo2_layout(std::string_view t) {
  const size_t user = t.find("'<|user|>");
  if (user == std::string_view::npos || !has(t, "bos_token")) return false;
  const size_t end = t.find("}}", user);
  if (end == std::string_view::npos) return false;
  const std::string_view turn = t.substr(user, end - user);
  return !has(turn, "eos_token") && has(turn, "message['content'] + '");
}

} // namespace

chat_format detect_chat_format(std::string_view t) {
  if (has(t, "<|start|>") && has(t, "<|channel|>") && has(t, "<|message|>"))
    return chat_format::harmony;
  if (has(t, "<|start_header_id|>")) return chat_format::llama3;
  if (has(t, "<|im_start|>")) return chat_format::chatml;
  if (has(t, "<start_of_turn>")) return chat_format::gemma;
  // Command R7B and Command A share the turn tokens but wrap replies in <|START_RESPONSE|>
  if (has(t, "<|START_OF_TURN_TOKEN|>") && has(t, "<|CHATBOT_TOKEN|>") &&
      !has(t, "<|START_RESPONSE|>"))
    return chat_format::command_r;
  if (has(t, "[INST]")) return has(t, "<<SYS>>") ? chat_format::llama2 : chat_format::mistral;
  if (has(t, "<|user|>") && has(t, "<|end|>")) return chat_format::phi3;
  if (has(t, "<|user|>") && has(t, "<|assistant|>") && olmo2_layout(t)) return chat_format::olmo2;
  return chat_format::plain;
}

std::string chat_default_system(chat_format f, std::string_view t) {
  if (f != chat_format::chatml) return {};
  // a quoted literal '<|im_start|>system\n...<|im_end|>' (newline as written or as \n)
  for (size_t at = t.find("<|im_start|>system"); at != std::string_view::npos;
       at = t.find("<|im_start|>system", at + 1)) {
    if (at == 0 || (t[at - 1] != '\'' && t[at - 1] != '"')) continue;
    const char quote = t[at - 1];
    size_t p = at + std::string_view("<|im_start|>system").size();
    const bool escaped = t.substr(p, 2) == "\\n";
    if (!escaped && (p >= t.size() || t[p] != '\n')) continue;
    p += escaped ? 2 : 1;
    const size_t close = t.find(quote, p), end = t.find("<|im_end|>", p);
    if (end == std::string_view::npos || close == std::string_view::npos || close < end) continue;
    std::string out(t.substr(p, end - p));
    if (out.find('\\') != std::string::npos) return {}; // escapes beyond \n: not a plain literal
    return out;
  }
  return {};
}

bool chat_opens_think(chat_format f, std::string_view t) {
  // QwQ's "{{- '<|im_start|>assistant\n<think>\n' }}" (newlines as written or as \n)
  return f == chat_format::chatml &&
         (t.find("<|im_start|>assistant\\n<think>\\n") != std::string_view::npos ||
          t.find("<|im_start|>assistant\n<think>\n") != std::string_view::npos);
}

bool chat_has_bos(chat_format f) {
  switch (f) {
  case chat_format::llama2:
  case chat_format::llama3:
  case chat_format::mistral:
  case chat_format::gemma:
  case chat_format::command_r:
  case chat_format::olmo2:
    return true;
  default:
    return false;
  }
}

std::vector<std::string_view> chat_end_of_turn(chat_format f) {
  switch (f) {
  case chat_format::llama3:
    return {"<|eot_id|>"};
  case chat_format::chatml:
    return {"<|im_end|>"};
  case chat_format::gemma:
    return {"<end_of_turn>"};
  case chat_format::phi3:
    return {"<|end|>"};
  case chat_format::command_r:
    return {"<|END_OF_TURN_TOKEN|>"};
  case chat_format::harmony:
    return {"<|return|>", "<|call|>"};
  default: // olmo2 ends a turn with eos (<|endoftext|>), a stop already
    return {};
  }
}

namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

expected<std::string> system_not_first() {
  return make_error(errc::invalid_argument, "a system message may only come first");
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

// GPT-OSS's template: the system block, the first system (developer) message as instructions,
// then user turns and earlier replies on the final channel (their reasoning is not replayed).
// The template raises on a reply that carries channel tags; a later system message, which it
// would drop silently, is refused.
} // namespace

bool valid_reasoning_effort(std::string_view e) {
  return e == "low" || e == "medium" || e == "high";
}

namespace {

expected<std::string> render_harmony(const std::vector<chat_message>& msgs,
                                     const harmony_settings& h) {
  const std::string& effort = h.reasoning_effort;
  if (!valid_reasoning_effort(effort))
    return make_error(errc::invalid_argument,
                      "reasoning effort must be low, medium or high, got '{}'", effort);
  std::string out = "<|start|>system<|message|>You are ChatGPT, a large language model trained "
                    "by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: " +
                    (h.date.empty() ? today() : h.date) + "\n\nReasoning: " + effort +
                    "\n\n# Valid channels: analysis, commentary, final. Channel must be "
                    "included for every message.<|end|>";
  const bool has_system = msgs[0].role == "system";
  if (has_system && !msgs[0].content.empty())
    out += "<|start|>developer<|message|># Instructions\n\n" + msgs[0].content + "<|end|>";
  for (size_t i = has_system ? 1 : 0; i < msgs.size(); ++i) {
    const auto& m = msgs[i];
    if (m.role == "system") return system_not_first();
    if (m.role == "user") {
      out += "<|start|>user<|message|>" + m.content + "<|end|>";
      continue;
    }
    if (has(m.content, "<|channel|>analysis<|message|>") ||
        has(m.content, "<|channel|>final<|message|>"))
      return make_error(errc::invalid_argument,
                        "an assistant message's content must not carry harmony channel tags");
    out += "<|start|>assistant<|channel|>final<|message|>" + m.content + "<|end|>";
  }
  out += "<|start|>assistant";
  return out;
}

} // namespace

expected<std::string> render_chat(chat_format f, const std::vector<chat_message>& msgs,
                                  std::string_view default_system,
                                  const harmony_settings& harmony) {
  if (msgs.empty()) return make_error(errc::invalid_argument, "messages must not be empty");
  for (const auto& m : msgs)
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      return make_error(errc::invalid_argument,
                        "unknown message role '{}' (system, user, assistant)", m.role);
  std::string out;
  // the templates take a leading system message out of the loop, even an empty one
  const bool has_system = msgs[0].role == "system";
  const std::string system = has_system ? msgs[0].content : std::string();
  const size_t first = has_system ? 1 : 0;
  switch (f) {
  case chat_format::llama3:
    out = "<|begin_of_text|>";
    for (const auto& m : msgs)
      out +=
          "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
    out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    return out;
  case chat_format::chatml:
    if (!has_system && !default_system.empty())
      out = "<|im_start|>system\n" + std::string(default_system) + "<|im_end|>\n";
    for (const auto& m : msgs) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    out += "<|im_start|>assistant\n";
    return out;
  case chat_format::gemma:
    out = "<bos>";
    for (size_t i = first; i < msgs.size(); ++i) {
      std::string text = trim(msgs[i].content);
      if (i == first && !system.empty()) text = trim(system) + "\n\n" + text;
      out += "<start_of_turn>" + std::string(msgs[i].role == "assistant" ? "model" : "user") +
             "\n" + text + "<end_of_turn>\n";
    }
    out += "<start_of_turn>model\n";
    return out;
  case chat_format::llama2: // <s>[INST] strip(<<SYS>> block + user) [/INST] strip(reply) </s>
    for (size_t i = first; i < msgs.size(); ++i) {
      const auto& m = msgs[i];
      if (m.role == "system") return system_not_first();
      if (m.role == "assistant") {
        out += " " + trim(m.content) + " </s>";
        continue;
      }
      std::string text = m.content;
      if (has_system && i == first) text = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + text;
      out += "<s>[INST] " + trim(text) + " [/INST]";
    }
    return out;
  case chat_format::mistral: // one <s>, nothing stripped, the system text joins the first turn
    out = "<s>";
    for (size_t i = first; i < msgs.size(); ++i) {
      const auto& m = msgs[i];
      if (m.role == "system") return system_not_first();
      if (m.role == "assistant") {
        out += " " + m.content + "</s>";
        continue;
      }
      out += " [INST] " + (has_system && i == first ? system + "\n\n" : std::string()) + m.content +
             " [/INST]";
    }
    return out;
  case chat_format::phi3:
    for (const auto& m : msgs) out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
    out += "<|assistant|>\n";
    return out;
  case chat_format::command_r: // the system text is not stripped, the turns are
    out = "<BOS_TOKEN>";
    if (has_system)
      out += "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>" + system + "<|END_OF_TURN_TOKEN|>";
    for (size_t i = first; i < msgs.size(); ++i) {
      const auto& m = msgs[i];
      if (m.role == "system") return system_not_first();
      out += std::string("<|START_OF_TURN_TOKEN|>") +
             (m.role == "user" ? "<|USER_TOKEN|>" : "<|CHATBOT_TOKEN|>") + trim(m.content) +
             "<|END_OF_TURN_TOKEN|>";
    }
    out += "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>";
    return out;
  case chat_format::olmo2: // BOS and eos are both <|endoftext|>
    out = "<|endoftext|>";
    for (size_t i = 0; i < msgs.size(); ++i) {
      const auto& m = msgs[i];
      if (m.role == "assistant")
        out += "<|assistant|>\n" + m.content + "<|endoftext|>" + (i + 1 < msgs.size() ? "\n" : "");
      else
        out += "<|" + m.role + "|>\n" + m.content + "\n";
    }
    out += "<|assistant|>\n";
    return out;
  case chat_format::harmony:
    return render_harmony(msgs, harmony);
  case chat_format::plain:
    if (!system.empty()) out = trim(system) + "\n\n";
    for (size_t i = first; i < msgs.size(); ++i) {
      const auto& m = msgs[i];
      if (m.role == "system") return system_not_first();
      out += (m.role == "user" ? "User: " : "Assistant: ") + trim(m.content) + "\n";
    }
    out += "Assistant:";
    return out;
  }
  return out;
}

} // namespace troupe
