// Copyright 2026 The pagedkv Authors.
#include "engine/replay/mooncake_trace.h"

#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "simdjson.h"

namespace pagedkv::replay {
namespace {

namespace od = simdjson::ondemand;

// Largest input_length accepted: segment lengths are int32 and a prompt beyond this is a typo.
constexpr int64_t kMaxInputLength = int64_t{1} << 31;

struct ParsedLine {
  double timestamp = 0;
  int64_t input_length = 0;
  int64_t output_length = 0;
  std::vector<uint64_t> hash_ids;
};

std::string JsonError(simdjson::error_code err) { return simdjson::error_message(err); }

// Parses one non-blank line held in `padded` (len bytes of JSON followed by padding).
absl::Status ParseLine(od::parser& parser, const std::string& padded, size_t len, ParsedLine* out) {
  od::document doc;
  if (auto err = parser.iterate(padded.data(), len, padded.size()).get(doc)) {
    return absl::InvalidArgumentError("not valid JSON: " + JsonError(err));
  }
  od::object obj;
  if (auto err = doc.get_object().get(obj)) {
    return absl::InvalidArgumentError(
        (err == simdjson::INCORRECT_TYPE ? "expected a JSON object: " : "not valid JSON: ") +
        JsonError(err));
  }
  bool has_ts = false, has_in = false, has_out = false, has_ids = false;
  out->hash_ids.clear();
  for (auto field : obj) {
    std::string_view key;
    if (auto err = field.unescaped_key().get(key)) {
      return absl::InvalidArgumentError("malformed key: " + JsonError(err));
    }
    od::value value;
    if (auto err = field.value().get(value)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("malformed value of \"%s\": %s", key, JsonError(err)));
    }
    if (key == "timestamp") {
      double ts = 0;
      if (auto err = value.get_double().get(ts)) {
        return absl::InvalidArgumentError("\"timestamp\" must be a number: " + JsonError(err));
      }
      if (!std::isfinite(ts) || ts < 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("\"timestamp\" must be >= 0 (got %g)", ts));
      }
      out->timestamp = ts;
      has_ts = true;
    } else if (key == "input_length" || key == "output_length") {
      int64_t v = 0;
      if (auto err = value.get_int64().get(v)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("\"%s\" must be an integer: %s", key, JsonError(err)));
      }
      const bool input = key == "input_length";
      if (input ? (v <= 0 || v > kMaxInputLength) : v < 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("\"%s\" must be %s (got %d)", key, input ? "in [1, 2^31]" : ">= 0", v));
      }
      (input ? out->input_length : out->output_length) = v;
      (input ? has_in : has_out) = true;
    } else if (key == "hash_ids") {
      od::array arr;
      if (auto err = value.get_array().get(arr)) {
        return absl::InvalidArgumentError("\"hash_ids\" must be an array: " + JsonError(err));
      }
      for (auto element : arr) {
        uint64_t id = 0;
        if (auto err = element.get_uint64().get(id)) {
          return absl::InvalidArgumentError(
              absl::StrFormat("\"hash_ids\"[%d] must be a non-negative integer: %s",
                              out->hash_ids.size(), JsonError(err)));
        }
        out->hash_ids.push_back(id);
      }
      has_ids = true;
    }
  }
  const char* trailing = nullptr;
  if (doc.current_location().get(trailing) == simdjson::SUCCESS) {
    return absl::InvalidArgumentError("unexpected content after the JSON object");
  }
  for (auto [present, name] :
       {std::pair{has_ts, "timestamp"}, std::pair{has_in, "input_length"},
        std::pair{has_out, "output_length"}, std::pair{has_ids, "hash_ids"}}) {
    if (!present) {
      return absl::InvalidArgumentError(absl::StrFormat("missing field \"%s\"", name));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Workload> ParseMooncakeTrace(std::string_view text, const TraceOptions& options,
                                            std::string_view name) {
  if (options.trace_block_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--trace-block-size must be > 0 (got %d)", options.trace_block_size));
  }
  const int64_t tbs = options.trace_block_size;
  Workload workload;
  workload.name = std::string(name);
  workload.trace_block_size = options.trace_block_size;
  od::parser parser;
  std::string padded;
  ParsedLine line;
  double last_ts = 0;
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view raw = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (raw.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    padded.assign(raw);
    const size_t len = padded.size();
    padded.resize(len + simdjson::SIMDJSON_PADDING, ' ');
    absl::Status status = ParseLine(parser, padded, len, &line);
    if (status.ok()) {
      const int64_t want = (line.input_length + tbs - 1) / tbs;
      if (static_cast<int64_t>(line.hash_ids.size()) != want) {
        status = absl::InvalidArgumentError(absl::StrFormat(
            "%d hash_ids but input_length %d at trace block size %d needs %d (check "
            "--trace-block-size)",
            line.hash_ids.size(), line.input_length, tbs, want));
      } else if (line.timestamp < last_ts) {
        status = absl::InvalidArgumentError(absl::StrFormat(
            "timestamp %g is before the previous line's %g (traces must be in time order)",
            line.timestamp, last_ts));
      }
    }
    if (!status.ok()) {
      if (options.skip_bad_lines) {
        ++workload.skipped_lines;
        continue;
      }
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: line %d: %s", name, line_no, status.message()));
    }
    last_ts = line.timestamp;
    ReplayRequest r;
    r.arrival_ms = line.timestamp;
    r.input_length = line.input_length;
    r.output_length = line.output_length;
    r.segments.reserve(line.hash_ids.size());
    for (size_t i = 0; i < line.hash_ids.size(); ++i) {
      const int64_t len = i + 1 < line.hash_ids.size() ? tbs : line.input_length - i * tbs;
      r.segments.push_back({.content_id = line.hash_ids[i], .length = static_cast<int32_t>(len)});
    }
    workload.requests.push_back(std::move(r));
  }
  return workload;
}

absl::StatusOr<std::string> ReadMaybeGzippedFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::NotFoundError(absl::StrFormat("trace file %s not found (or not a file)", path));
  }
  gzFile file = gzopen(path.c_str(), "rb");  // reads plain files transparently too
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrFormat("cannot open trace file %s", path));
  }
  gzbuffer(file, 1 << 17);
  std::string data;
  std::vector<char> buf(1 << 20);
  while (true) {
    const int n = gzread(file, buf.data(), static_cast<unsigned>(buf.size()));
    if (n < 0) {
      int errnum = 0;
      std::string msg = gzerror(file, &errnum);
      gzclose(file);
      return absl::DataLossError(absl::StrFormat("%s: corrupt gzip data: %s", path, msg));
    }
    if (n == 0) break;
    data.append(buf.data(), static_cast<size_t>(n));
  }
  int errnum = 0;
  std::string msg = gzerror(file, &errnum);
  gzclose(file);
  if (errnum != Z_OK) {
    return absl::DataLossError(
        absl::StrFormat("%s: truncated or corrupt gzip data: %s", path, msg));
  }
  return data;
}

absl::StatusOr<Workload> LoadMooncakeTrace(const std::string& path, const TraceOptions& options) {
  auto text = ReadMaybeGzippedFile(path);
  if (!text.ok()) return text.status();
  return ParseMooncakeTrace(*text, options, std::filesystem::path(path).filename().string());
}

}  // namespace pagedkv::replay
