// Copyright 2026 The pagedkv Authors.
//
// The recognised ChatML templates (see pagedkv/model/chat_template.h).
#include "pagedkv/model/chat_template.h"

#include <filesystem>
#include <optional>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/model/formats/gguf_file.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

// The message loop of ChatML, as Hugging Face's ChatML templates write it.
// The Jinja string literals hold real newlines (tokenizer_config.json's "\n", decoded).
constexpr char kChatMlBody[] =
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + "
    "'\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif "
    "%}";
constexpr char kForMessages[] = "{% for message in messages %}";
// SmolLM2's default system turn: kSystemOpen S kSystemClose.
constexpr char kSystemOpen[] =
    "{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n";
constexpr char kSystemClose[] = "<|im_end|>\n' }}{% endif %}";

std::string Turn(const std::string& role, const std::string& text) {
  return absl::StrCat("<|im_start|>", role, "\n", text, "<|im_end|>\n");
}

std::string Family(const std::string& t) {
  if (absl::StrContains(t, "[INST]")) return "Llama-2 / Mistral [INST]";
  if (absl::StrContains(t, "<|start_header_id|>")) return "Llama-3";
  if (absl::StrContains(t, "<start_of_turn>")) return "Gemma";
  if (absl::StrContains(t, "<|user|>")) return "Phi-3 / Zephyr <|user|>";
  if (absl::StrContains(t, "<|im_start|>")) return "a ChatML variant";
  return "an unknown";
}

// The system prompt SmolLM2's template adds when the conversation has none; nullopt for plain
// ChatML; an error naming the family of an unrecognised template.
absl::StatusOr<std::optional<std::string>> DefaultSystemPrompt(const std::string& chat_template) {
  if (chat_template.empty()) {
    return absl::InvalidArgumentError("the model has no chat template");
  }
  if (chat_template == absl::StrCat(kForMessages, kChatMlBody)) return std::nullopt;
  const std::string open = absl::StrCat(kForMessages, kSystemOpen);
  const std::string close = absl::StrCat(kSystemClose, kChatMlBody);
  if (absl::StartsWith(chat_template, open) && absl::EndsWith(chat_template, close) &&
      chat_template.size() >= open.size() + close.size()) {
    std::string system =
        chat_template.substr(open.size(), chat_template.size() - open.size() - close.size());
    if (!absl::StrContains(system, "'") && !absl::StrContains(system, "{")) return system;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "the model's chat template is ", Family(chat_template),
      " template, which is not supported (only ChatML as SmolLM2-Instruct writes it, with or "
      "without its default system prompt)"));
}

bool IsChatRole(const std::string& role) {
  return role == "system" || role == "user" || role == "assistant" || role == "developer" ||
         role == "tool";
}

}  // namespace

absl::StatusOr<std::string> FormatChatMessages(const std::string& chat_template,
                                               std::span<const ChatMessage> messages) {
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<std::string> system, DefaultSystemPrompt(chat_template));
  if (messages.empty()) {
    return absl::InvalidArgumentError("a chat needs at least one message");
  }
  std::string out;
  if (system.has_value() && messages[0].role != "system") out = Turn("system", *system);
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!IsChatRole(messages[i].role)) {
      return absl::InvalidArgumentError(
          absl::StrCat("message ", i, " has role '", messages[i].role,
                       "'; expected system, user, assistant, developer or tool"));
    }
    absl::StrAppend(&out, Turn(messages[i].role, messages[i].content));
  }
  return out + "<|im_start|>assistant\n";
}

absl::StatusOr<std::string> FormatChatPrompt(const std::string& chat_template,
                                             const std::string& user_message) {
  const ChatMessage message = {.role = "user", .content = user_message};
  absl::StatusOr<std::string> prompt =
      FormatChatMessages(chat_template, std::span<const ChatMessage>(&message, 1));
  if (!prompt.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--chat: ", prompt.status().message(),
                     absl::StrContains(prompt.status().message(), "not supported")
                         ? "; wrap the prompt yourself and drop --chat"
                         : ""));
  }
  return prompt;
}

absl::StatusOr<std::string> ReadChatTemplate(const std::string& model_path) {
  std::error_code ec;
  if (!std::filesystem::exists(model_path, ec)) {
    return absl::NotFoundError(absl::StrCat("model '", model_path, "' does not exist"));
  }
  if (!std::filesystem::is_regular_file(model_path, ec) ||
      !model_internal::GgufFile::HasMagic(model_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", model_path, "' is not a GGUF file; chat templates are read from GGUF only"));
  }
  PAGEDKV_ASSIGN_OR_RETURN(model_internal::GgufFile f, model_internal::GgufFile::Open(model_path));
  if (f.Find("tokenizer.chat_template") == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", model_path, "' has no tokenizer.chat_template"));
  }
  return f.GetString("tokenizer.chat_template");
}

}  // namespace pagedkv
