// chat_template.cpp: native renderings of the common chat template families
// (chat_template.hpp).
#include "text/chat_template.hpp"

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
  }
  return "?";
}

chat_format detect_chat_format(std::string_view t) {
  if (t.find("<|start_header_id|>") != std::string_view::npos) return chat_format::llama3;
  if (t.find("<|im_start|>") != std::string_view::npos) return chat_format::chatml;
  if (t.find("<start_of_turn>") != std::string_view::npos) return chat_format::gemma;
  if (t.find("[INST]") != std::string_view::npos)
    return t.find("<<SYS>>") != std::string_view::npos ? chat_format::llama2 : chat_format::mistral;
  return chat_format::plain;
}

bool chat_has_bos(chat_format f) {
  return f == chat_format::llama2 || f == chat_format::llama3 || f == chat_format::mistral ||
         f == chat_format::gemma;
}

std::string_view chat_end_of_turn(chat_format f) {
  switch (f) {
  case chat_format::llama3:
    return "<|eot_id|>";
  case chat_format::chatml:
    return "<|im_end|>";
  case chat_format::gemma:
    return "<end_of_turn>";
  default:
    return "";
  }
}

namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

} // namespace

expected<std::string> render_chat(chat_format f, const std::vector<chat_message>& msgs) {
  if (msgs.empty()) return make_error(errc::invalid_argument, "messages must not be empty");
  for (const auto& m : msgs)
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      return make_error(errc::invalid_argument,
                        "unknown message role '{}' (system, user, assistant)", m.role);
  std::string out;
  std::string system;
  size_t first = 0;
  if (msgs[0].role == "system") {
    system = msgs[0].content;
    first = 1;
  }
  switch (f) {
  case chat_format::llama3:
    out = "<|begin_of_text|>";
    for (const auto& m : msgs)
      out +=
          "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
    out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    return out;
  case chat_format::chatml:
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
  case chat_format::llama2:
  case chat_format::mistral: {
    bool sys_used = false;
    for (size_t i = first; i < msgs.size(); ++i) {
      const auto& m = msgs[i];
      if (m.role == "user") {
        std::string text = trim(m.content);
        if (!system.empty() && !sys_used) {
          text = f == chat_format::llama2 ? "<<SYS>>\n" + trim(system) + "\n<</SYS>>\n\n" + text
                                          : trim(system) + "\n\n" + text;
          sys_used = true;
        }
        out += "<s>[INST] " + text + " [/INST]";
      } else if (m.role == "assistant") {
        out += " " + trim(m.content) + " </s>";
      } else {
        return make_error(errc::invalid_argument, "a system message may only come first");
      }
    }
    return out;
  }
  case chat_format::plain:
    if (!system.empty()) out = trim(system) + "\n\n";
    for (size_t i = first; i < msgs.size(); ++i) {
      const auto& m = msgs[i];
      if (m.role == "system")
        return make_error(errc::invalid_argument, "a system message may only come first");
      out += (m.role == "user" ? "User: " : "Assistant: ") + trim(m.content) + "\n";
    }
    out += "Assistant:";
    return out;
  }
  return out;
}

} // namespace troupe
