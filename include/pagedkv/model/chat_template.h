// Copyright 2026 The pagedkv Authors.
//
// Chat prompts for instruction-tuned models: the ChatML turns of SmolLM2-Instruct (and plain
// ChatML), recognised from the model's Jinja chat template by its exact text, not by running
// Jinja. Any other template is refused, naming its family when it is a known one (Llama-2
// [INST], Llama-3 headers, Gemma turns, Phi-3 / Zephyr <|user|>).
//
// Recognised templates and their output for one user message M:
//   SmolLM2 (default system prompt S when the conversation has none):
//     "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nM<|im_end|>\n<|im_start|>assistant\n"
//   plain ChatML: the same without the system turn.
// Generation then stops at <|im_end|> (the GGUF loader makes it a stop token).
//
// A conversation (FormatChatMessages) renders each message as "<|im_start|>ROLE\nTEXT<|im_end|>\n"
// in order, after SmolLM2's default system turn when the first message is not a system one.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(std::string tmpl, pagedkv::ReadChatTemplate("smollm2.gguf"));
//   PAGEDKV_ASSIGN_OR_RETURN(std::string prompt, pagedkv::FormatChatPrompt(tmpl, "Hi!"));
//
// Thread-safe: pure functions.
#ifndef PAGEDKV_MODEL_CHAT_TEMPLATE_H_
#define PAGEDKV_MODEL_CHAT_TEMPLATE_H_

#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "pagedkv/export.h"

namespace pagedkv {

// One message of a conversation. role: system, user, assistant, developer or tool.
struct PAGEDKV_EXPORT ChatMessage {
  std::string role;
  std::string content;
};

// `messages` in `chat_template`, ending with the assistant's turn opened (the generation
// prompt). InvalidArgument naming the template's family when it is not a recognised one, for no
// message, or for a role outside the five above.
PAGEDKV_EXPORT absl::StatusOr<std::string> FormatChatMessages(
    const std::string& chat_template, std::span<const ChatMessage> messages);

// `user_message` as one user turn of `chat_template`, ending with the assistant's turn opened.
// InvalidArgument naming the template's family when it is not one of the recognised ones (or
// when it is empty: the model has no chat template).
PAGEDKV_EXPORT absl::StatusOr<std::string> FormatChatPrompt(const std::string& chat_template,
                                                            const std::string& user_message);

// The chat template stored with the model at `model_path`: a GGUF file's
// tokenizer.chat_template. InvalidArgument when the model is not a GGUF file or has none;
// NotFound when the file does not exist.
PAGEDKV_EXPORT absl::StatusOr<std::string> ReadChatTemplate(const std::string& model_path);

}  // namespace pagedkv

#endif  // PAGEDKV_MODEL_CHAT_TEMPLATE_H_
