// Copyright 2026 The pagedkv Authors.
//
// GGUF files from Python: the tensor directory and pagedkv's own dequantization of each tensor
// (so tests can compare it with llama.cpp's `gguf` package), and the GGUF tokenizer.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common.h"
#include "engine/model/formats/gguf_file.h"
#include "engine/model/tokenizers/gguf_tokenizer.h"
#include "pagedkv/model/chat_template.h"
#include "pybind11/numpy.h"
#include "pybind11/stl.h"

namespace pagedkv::python {
namespace {

using model_internal::GgufFile;
using model_internal::GgufTensorInfo;
namespace py = pybind11;
using py::arg;

const GgufTensorInfo& FindTensor(const GgufFile& f, const std::string& name) {
  const GgufTensorInfo* t = f.FindTensor(name);
  if (t == nullptr) {
    CheckStatus(absl::NotFoundError("GGUF file '" + f.path() + "' has no tensor '" + name + "'"));
  }
  return *t;
}

// The tensor as float32, shaped [ne[n-1], ..., ne[0]] (numpy order, as the gguf package).
py::array_t<float> ReadTensor(const GgufFile& f, const std::string& name) {
  const GgufTensorInfo& t = FindTensor(f, name);
  std::vector<py::ssize_t> shape(t.ne.rbegin(), t.ne.rend());
  py::array_t<float> out(shape);
  CheckStatus(f.ReadF32(t, out.mutable_data()));
  return out;
}

}  // namespace

void BindGguf(py::module_& m) {
  py::class_<GgufFile, std::shared_ptr<GgufFile>> g(
      m, "GgufFile", "A memory-mapped GGUF file: its tensors, dequantized by pagedkv.");
  g.def(py::init([](const std::string& path) {
          return std::make_shared<GgufFile>(Unwrap(GgufFile::Open(path)));
        }),
        arg("path"))
      .def(
          "tensor_names",
          [](const GgufFile& f) {
            std::vector<std::string> names;
            for (const GgufTensorInfo& t : f.tensors()) names.push_back(t.name);
            return names;
          },
          "Tensor names in file order.")
      .def(
          "tensor_type",
          [](const GgufFile& f, const std::string& name) { return FindTensor(f, name).type; },
          arg("name"), "The ggml type id of the tensor.")
      .def("read_tensor", &ReadTensor, arg("name"),
           "The tensor dequantized to float32, shaped as numpy (reversed ne).")
      .def(
          "tokenizer",
          [](const GgufFile& f) {
            return std::make_shared<Tokenizer>(Unwrap(model_internal::LoadGgufTokenizer(f)));
          },
          "The tokenizer of the file's tokenizer.ggml metadata.")
      .def_property_readonly("version", &GgufFile::version, "The GGUF format version.")
      .def_property_readonly("path", &GgufFile::path, "The file's path.");
  m.def(
      "format_chat_prompt",
      [](const std::string& chat_template, const std::string& message) {
        return Unwrap(FormatChatPrompt(chat_template, message));
      },
      arg("chat_template"), arg("user_message"),
      "One user turn in the model's ChatML chat template, the assistant's turn opened.");
  m.def(
      "read_chat_template", [](const std::string& path) { return Unwrap(ReadChatTemplate(path)); },
      arg("model_path"), "The chat template stored in a GGUF file.");
}

}  // namespace pagedkv::python
