// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/workload/mooncake_trace.h"

#include <zlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "pagedkv/status_macros.h"
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

// Which of the required fields a line had.
struct FieldsSeen {
  bool timestamp = false, input_length = false, output_length = false, hash_ids = false;
};

absl::Status ParseTimestamp(od::value& value, ParsedLine* out) {
  double ts = 0;
  if (auto err = value.get_double().get(ts)) {
    return absl::InvalidArgumentError("\"timestamp\" must be a number: " + JsonError(err));
  }
  if (!std::isfinite(ts) || ts < 0) {
    return absl::InvalidArgumentError(absl::StrFormat("\"timestamp\" must be >= 0 (got %g)", ts));
  }
  out->timestamp = ts;
  return absl::OkStatus();
}

// input_length in [1, 2^31] or output_length >= 0.
absl::Status ParseLength(std::string_view key, od::value& value, ParsedLine* out) {
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
  return absl::OkStatus();
}

absl::Status ParseHashIds(od::value& value, ParsedLine* out) {
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
  return absl::OkStatus();
}

// One field of the line's object; fields other than the four are ignored.
absl::Status ParseField(od::field& field, ParsedLine* out, FieldsSeen* seen) {
  std::string_view key;
  if (auto err = field.unescaped_key().get(key)) {
    return absl::InvalidArgumentError("malformed key: " + JsonError(err));
  }
  od::value& value = field.value();
  if (key == "timestamp") {
    seen->timestamp = true;
    return ParseTimestamp(value, out);
  }
  if (key == "input_length" || key == "output_length") {
    (key == "input_length" ? seen->input_length : seen->output_length) = true;
    return ParseLength(key, value, out);
  }
  if (key == "hash_ids") {
    seen->hash_ids = true;
    return ParseHashIds(value, out);
  }
  return absl::OkStatus();
}

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
  FieldsSeen seen;
  out->hash_ids.clear();
  for (auto field : obj) {
    od::field parsed;
    if (auto err = std::move(field).get(parsed)) {
      return absl::InvalidArgumentError("malformed field: " + JsonError(err));
    }
    PAGEDKV_RETURN_IF_ERROR(ParseField(parsed, out, &seen));
  }
  const char* trailing = nullptr;
  if (doc.current_location().get(trailing) == simdjson::SUCCESS) {
    return absl::InvalidArgumentError("unexpected content after the JSON object");
  }
  for (auto [present, name] :
       {std::pair{seen.timestamp, "timestamp"}, std::pair{seen.input_length, "input_length"},
        std::pair{seen.output_length, "output_length"}, std::pair{seen.hash_ids, "hash_ids"}}) {
    if (!present) {
      return absl::InvalidArgumentError(absl::StrFormat("missing field \"%s\"", name));
    }
  }
  return absl::OkStatus();
}

// Parses trace lines one at a time into a workload, charging the requests to the memory limit.
class TraceParser {
 public:
  TraceParser(const TraceOptions& options, std::string_view name) : options_(options) {
    workload_.name = std::string(name);
    workload_.trace_block_size = options.trace_block_size;
  }

  // Adds line `line_no` (1-based; blank lines are skipped). InvalidArgument "name: line N: ..."
  // for a malformed line unless skip_bad_lines; ResourceExhausted past the memory limit.
  absl::Status AddLine(std::string_view raw, int64_t line_no) {
    if (raw.find_first_not_of(" \t\r") == std::string_view::npos) return absl::OkStatus();
    padded_.assign(raw);
    const size_t len = padded_.size();
    padded_.resize(len + simdjson::SIMDJSON_PADDING, ' ');
    absl::Status status = ParseLine(parser_, padded_, len, &line_);
    if (status.ok()) status = CheckLine();
    if (!status.ok()) {
      if (options_.skip_bad_lines) {
        ++workload_.skipped_lines;
        return absl::OkStatus();
      }
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: line %d: %s", workload_.name, line_no, status.message()));
    }
    last_ts_ = line_.timestamp;
    AppendRequest(line_no);
    if (options_.memory_limit_bytes > 0 && bytes_ > options_.memory_limit_bytes) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "%s: line %d: the %d requests read so far need about %.3g GiB of memory, more than "
          "the limit of %.3g GiB (--max-memory-gib); replay a part of the trace or raise the "
          "limit",
          workload_.name, line_no, workload_.requests.size(),
          static_cast<double>(bytes_) / (1 << 30),
          static_cast<double>(options_.memory_limit_bytes) / (1 << 30)));
    }
    return absl::OkStatus();
  }

  Workload Take() { return std::move(workload_); }

 private:
  absl::Status CheckLine() const {
    const int64_t tbs = options_.trace_block_size;
    const int64_t want = (line_.input_length + tbs - 1) / tbs;
    if (static_cast<int64_t>(line_.hash_ids.size()) != want) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%d hash_ids but input_length %d at trace block size %d needs %d (check "
                          "--trace-block-size)",
                          line_.hash_ids.size(), line_.input_length, tbs, want));
    }
    if (line_.timestamp < last_ts_) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "timestamp %g is before the previous line's %g (traces must be in time order)",
          line_.timestamp, last_ts_));
    }
    return absl::OkStatus();
  }

  void AppendRequest(int64_t line_no) {
    const int64_t tbs = options_.trace_block_size;
    ReplayRequest r;
    r.arrival_ms = line_.timestamp;
    r.input_length = line_.input_length;
    r.output_length = line_.output_length;
    r.source_line = line_no;
    r.segments.reserve(line_.hash_ids.size());
    for (size_t i = 0; i < line_.hash_ids.size(); ++i) {
      const int64_t len =
          i + 1 < line_.hash_ids.size() ? tbs : line_.input_length - static_cast<int64_t>(i) * tbs;
      r.segments.push_back({.content_id = line_.hash_ids[i], .length = static_cast<int32_t>(len)});
    }
    // The request, its segments, and the request vector's growth (up to twice its size).
    bytes_ += static_cast<int64_t>(2 * sizeof(ReplayRequest) + r.segments.size() * sizeof(Segment));
    workload_.requests.push_back(std::move(r));
  }

  const TraceOptions& options_;
  Workload workload_;
  od::parser parser_;
  std::string padded_;
  ParsedLine line_;
  double last_ts_ = 0;
  int64_t bytes_ = 0;  // estimated bytes of workload_
};

absl::Status CheckTraceOptions(const TraceOptions& options) {
  if (options.trace_block_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--trace-block-size must be > 0 (got %d)", options.trace_block_size));
  }
  if (options.max_line_bytes <= 0) {
    return absl::InvalidArgumentError("TraceOptions.max_line_bytes must be > 0");
  }
  return absl::OkStatus();
}

// Reads a file line by line, decompressing gzip on the fly (plain files pass through), with
// lines and the total decompressed size bounded.
class TraceLineReader {
 public:
  ~TraceLineReader() {
    if (file_ != nullptr) gzclose(file_);
  }

  absl::Status Open(const std::string& path) {
    path_ = path;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      return absl::NotFoundError(absl::StrFormat("trace file %s not found (or not a file)", path));
    }
    file_ = gzopen(path.c_str(), "rb");  // reads plain files transparently too
    if (file_ == nullptr) {
      return absl::NotFoundError(absl::StrFormat("cannot open trace file %s", path));
    }
    gzbuffer(file_, 1 << 17);
    return absl::OkStatus();
  }

  // The next line (without '\n') in `line`; false at the end of the file.
  absl::StatusOr<bool> Next(const TraceOptions& options, std::string* line) {
    line->clear();
    while (true) {
      if (pos_ == end_) {
        PAGEDKV_RETURN_IF_ERROR(Fill(options));
        if (pos_ == end_) return !line->empty();
      }
      const char* start = buffer_.data() + pos_;
      const void* newline = std::memchr(start, '\n', end_ - pos_);
      const size_t take =
          newline == nullptr ? end_ - pos_ : static_cast<const char*>(newline) - start;
      if (static_cast<int64_t>(line->size() + take) > options.max_line_bytes) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: line %d is longer than %d bytes; is this a Mooncake trace?", path_,
                            lines_ + 1, options.max_line_bytes));
      }
      line->append(start, take);
      pos_ += take;
      if (newline != nullptr) {
        ++pos_;
        ++lines_;
        return true;
      }
    }
  }

 private:
  absl::Status Fill(const TraceOptions& options) {
    pos_ = end_ = 0;
    const int n = gzread(file_, buffer_.data(), static_cast<unsigned>(buffer_.size()));
    int errnum = 0;
    if (n < 0) {
      return absl::DataLossError(
          absl::StrFormat("%s: corrupt gzip data: %s", path_, gzerror(file_, &errnum)));
    }
    if (n == 0) {
      const std::string message = gzerror(file_, &errnum);
      if (errnum != Z_OK) {
        return absl::DataLossError(
            absl::StrFormat("%s: truncated or corrupt gzip data: %s", path_, message));
      }
      return absl::OkStatus();
    }
    end_ = static_cast<size_t>(n);
    total_ += n;
    if (options.max_decompressed_bytes > 0 && total_ > options.max_decompressed_bytes) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "%s decompresses to more than %d bytes (TraceOptions.max_decompressed_bytes); is it a "
          "gzip bomb?",
          path_, options.max_decompressed_bytes));
    }
    return absl::OkStatus();
  }

  std::string path_;
  gzFile file_ = nullptr;
  std::vector<char> buffer_ = std::vector<char>(1 << 20);
  size_t pos_ = 0, end_ = 0;  // unread bytes of buffer_
  int64_t total_ = 0;         // decompressed bytes read
  int64_t lines_ = 0;         // complete lines returned
};

}  // namespace

absl::StatusOr<Workload> ParseMooncakeTrace(std::string_view text, const TraceOptions& options,
                                            std::string_view name) {
  PAGEDKV_RETURN_IF_ERROR(CheckTraceOptions(options));
  TraceParser parser(options, name);
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    PAGEDKV_RETURN_IF_ERROR(parser.AddLine(text.substr(pos, end - pos), ++line_no));
    pos = end + 1;
  }
  return parser.Take();
}

absl::StatusOr<Workload> LoadMooncakeTrace(const std::string& path, const TraceOptions& options) {
  PAGEDKV_RETURN_IF_ERROR(CheckTraceOptions(options));
  TraceLineReader reader;
  PAGEDKV_RETURN_IF_ERROR(reader.Open(path));
  TraceParser parser(options, std::filesystem::path(path).filename().string());
  std::string line;
  for (int64_t line_no = 1;; ++line_no) {
    PAGEDKV_ASSIGN_OR_RETURN(const bool more, reader.Next(options, &line));
    if (!more) break;
    PAGEDKV_RETURN_IF_ERROR(parser.AddLine(line, line_no));
  }
  return parser.Take();
}

absl::StatusOr<std::string> ReadMaybeGzippedFile(const std::string& path,
                                                 const TraceOptions& options) {
  TraceLineReader reader;
  PAGEDKV_RETURN_IF_ERROR(reader.Open(path));
  std::string data, line;
  while (true) {
    PAGEDKV_ASSIGN_OR_RETURN(const bool more, reader.Next(options, &line));
    if (!more) break;
    data += line;
    data += '\n';
  }
  return data;
}

}  // namespace pagedkv::replay
