// Copyright 2026 The pagedkv Authors.
//
// Tokenizer: llama2.c tokenizer files, run.c's BPE encode and decode.
#include "pagedkv/model/tokenizer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "engine/model/formats/file_bytes.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

// Reads little-endian scalars from a byte buffer, never past its end.
class ByteReader {
 public:
  explicit ByteReader(std::string_view bytes) : bytes_(bytes) {}
  size_t offset() const { return offset_; }
  size_t remaining() const { return bytes_.size() - offset_; }

  template <typename T>
  std::optional<T> Read() {
    if (remaining() < sizeof(T)) return std::nullopt;
    T value;
    std::memcpy(&value, bytes_.data() + offset_, sizeof(T));
    offset_ += sizeof(T);
    return value;
  }
  std::optional<std::string_view> ReadBytes(size_t n) {
    if (remaining() < n) return std::nullopt;
    std::string_view out = bytes_.substr(offset_, n);
    offset_ += n;
    return out;
  }

 private:
  std::string_view bytes_;
  size_t offset_ = 0;
};

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The byte of a "<0xNN>" piece, or -1.
int ByteOfPiece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  const int hi = HexValue(piece[3]);
  const int lo = HexValue(piece[4]);
  if (hi < 0 || lo < 0) return -1;
  return hi * 16 + lo;
}

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

namespace {

// The pieces and scores of a llama2.c tokenizer file.
struct PieceTable {
  int32_t max_token_length = 0;
  std::vector<std::string> pieces;
  std::vector<float> scores;
};

absl::StatusOr<int32_t> ReadMaxTokenLength(ByteReader& reader, size_t size, std::string_view name) {
  std::optional<int32_t> max_len = reader.Read<int32_t>();
  if (!max_len) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tokenizer '%s' is truncated: %d bytes, too short for the max_token_length header", name,
        size));
  }
  if (*max_len <= 0 || *max_len > (1 << 20)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tokenizer '%s' is corrupt: max_token_length is %d (expected 1 .. 2^20)", name, *max_len));
  }
  return *max_len;
}

// Entry `id`: score, length, bytes.
absl::Status ReadPiece(ByteReader& reader, int32_t id, int32_t vocab_size, std::string_view name,
                       PieceTable& table) {
  const size_t entry_offset = reader.offset();
  std::optional<float> score = reader.Read<float>();
  std::optional<int32_t> len = reader.Read<int32_t>();
  if (!score || !len) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tokenizer '%s' is truncated: it ends inside token %d (byte offset %d) of the %d the "
        "model needs",
        name, id, entry_offset, vocab_size));
  }
  if (!std::isfinite(*score)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tokenizer '%s' is corrupt: token %d has a non-finite score %f", name, id, *score));
  }
  if (*len < 0 || *len > table.max_token_length) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tokenizer '%s' is corrupt: token %d (byte offset %d) has length %d, outside 0 .. "
        "max_token_length %d",
        name, id, entry_offset, *len, table.max_token_length));
  }
  std::optional<std::string_view> piece = reader.ReadBytes(static_cast<size_t>(*len));
  if (!piece) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tokenizer '%s' is truncated: token %d needs %d bytes at offset %d, the file has %d left",
        name, id, *len, reader.offset(), reader.remaining()));
  }
  table.pieces.emplace_back(*piece);
  table.scores.push_back(*score);
  return absl::OkStatus();
}

absl::StatusOr<PieceTable> ReadPieceTable(std::string_view bytes, int32_t vocab_size,
                                          std::string_view name) {
  ByteReader reader(bytes);
  PieceTable table;
  PAGEDKV_ASSIGN_OR_RETURN(table.max_token_length, ReadMaxTokenLength(reader, bytes.size(), name));
  // Every entry takes at least 8 bytes, so a vocab_size the file cannot hold reserves no more
  // than the file could.
  const size_t most = std::min<size_t>(static_cast<size_t>(vocab_size), bytes.size() / 8 + 1);
  table.pieces.reserve(most);
  table.scores.reserve(most);
  for (int32_t id = 0; id < vocab_size; ++id) {
    PAGEDKV_RETURN_IF_ERROR(ReadPiece(reader, id, vocab_size, name, table));
  }
  if (reader.remaining() != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tokenizer '%s' has %d bytes after its first %d tokens: it holds more tokens than the "
        "model's vocab_size %d (is it this model's tokenizer?)",
        name, reader.remaining(), vocab_size, vocab_size));
  }
  return table;
}

}  // namespace

void Tokenizer::IndexPieces() {
  byte_to_id_.fill(-1);
  piece_byte_.assign(pieces_.size(), -1);
  piece_to_id_.reserve(pieces_.size());
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const TokenId id = static_cast<TokenId>(i);
    piece_to_id_.try_emplace(pieces_[i], id);
    const int byte = ByteOfPiece(pieces_[i]);
    if (byte < 0) continue;
    piece_byte_[i] = static_cast<int16_t>(byte);
    if (byte_to_id_[static_cast<size_t>(byte)] < 0) byte_to_id_[static_cast<size_t>(byte)] = id;
  }
}

absl::StatusOr<Tokenizer> Tokenizer::Parse(std::string_view bytes, int32_t vocab_size,
                                           std::string_view name) {
  if (vocab_size < 3) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tokenizer '%s': vocab_size must be at least 3 (<unk>, BOS, EOS), got %d",
                        name, vocab_size));
  }
  PAGEDKV_ASSIGN_OR_RETURN(PieceTable table, ReadPieceTable(bytes, vocab_size, name));
  Tokenizer tok;
  tok.max_token_length_ = table.max_token_length;
  tok.pieces_ = std::move(table.pieces);
  tok.scores_ = std::move(table.scores);
  tok.IndexPieces();
  return tok;
}

absl::StatusOr<Tokenizer> Tokenizer::Load(const std::string& path, int32_t vocab_size) {
  PAGEDKV_ASSIGN_OR_RETURN(std::string bytes, model_internal::ReadFileBytes(path, "tokenizer"));
  return Parse(bytes, vocab_size, path);
}

// Merges the adjacent pair whose merged piece scores best (leftmost on ties) until none merges,
// as run.c does, in O(n log n): the pieces form a linked list and the candidate merges a heap,
// whose entries are checked against the pieces' versions when popped (a stale one is skipped).
void Tokenizer::MergeByScore(std::vector<TokenId>& tokens) const {
  const size_t n = tokens.size();
  if (n < 2) return;
  struct Candidate {
    float score;
    size_t left, right;  // piece indices (left < right: original order)
    uint32_t left_version, right_version;
    TokenId merged;
  };
  // Best score first; among equal scores the leftmost pair.
  auto worse = [](const Candidate& a, const Candidate& b) {
    return a.score != b.score ? a.score < b.score : a.left > b.left;
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(worse)> heap(worse);
  std::vector<size_t> next(n), prev(n);
  std::vector<uint32_t> version(n, 0);
  std::vector<char> alive(n, 1);
  for (size_t i = 0; i < n; ++i) {
    next[i] = i + 1;  // n: none
    prev[i] = i - 1;  // SIZE_MAX for the first: none
  }
  std::string joined;
  auto push = [&](size_t left, size_t right) {
    if (left >= n || right >= n) return;
    joined = pieces_[static_cast<size_t>(tokens[left])];
    joined += pieces_[static_cast<size_t>(tokens[right])];
    auto it = piece_to_id_.find(joined);
    if (it == piece_to_id_.end()) return;
    heap.push({scores_[static_cast<size_t>(it->second)], left, right, version[left], version[right],
               it->second});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(i, i + 1);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    if (!alive[c.left] || !alive[c.right] || next[c.left] != c.right ||
        version[c.left] != c.left_version || version[c.right] != c.right_version) {
      continue;  // one of its pieces changed since it was pushed
    }
    tokens[c.left] = c.merged;
    ++version[c.left];
    alive[c.right] = 0;
    next[c.left] = next[c.right];
    if (next[c.right] < n) prev[next[c.right]] = c.left;
    push(prev[c.left], c.left);
    push(c.left, next[c.left]);
  }
  size_t out = 0;
  for (size_t i = 0; i < n; ++i) {
    if (alive[i]) tokens[out++] = tokens[i];
  }
  tokens.resize(out);
}

absl::StatusOr<std::vector<TokenId>> Tokenizer::Encode(std::string_view text,
                                                       const EncodeOptions& options) const {
  if (bpe_ != nullptr) return EncodeBpe(text, options);
  std::vector<TokenId> tokens;
  tokens.reserve(text.size() + 3);
  if (options.add_bos) tokens.push_back(kBosId);
  if (!text.empty()) {
    auto space = piece_to_id_.find(" ");
    if (space == piece_to_id_.end()) {
      return absl::InvalidArgumentError(
          "tokenizer has no \" \" piece, needed for the dummy prefix of non-empty text");
    }
    tokens.push_back(space->second);
  }
  // One piece per UTF-8 code point (at most 4 bytes), else its bytes as "<0xNN>" pieces.
  std::string code_point;
  for (size_t i = 0; i < text.size(); ++i) {
    if (!IsContinuationByte(text[i])) code_point.clear();
    code_point.push_back(text[i]);
    if (i + 1 < text.size() && IsContinuationByte(text[i + 1]) && code_point.size() < 4) {
      continue;
    }
    if (auto it = piece_to_id_.find(code_point); it != piece_to_id_.end()) {
      tokens.push_back(it->second);
    } else {
      for (char c : code_point) {
        const auto byte = static_cast<unsigned char>(c);
        const TokenId id = byte_to_id_[byte];
        if (id < 0) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "cannot encode byte 0x%02X at text offset %d: not in the vocabulary and the "
              "tokenizer has no byte-fallback piece <0x%02X>",
              byte, i, byte));
        }
        tokens.push_back(id);
      }
    }
    code_point.clear();
  }
  MergeByScore(tokens);
  if (options.add_eos) tokens.push_back(kEosId);
  return tokens;
}

absl::StatusOr<std::string> Tokenizer::DecodeToken(TokenId prev, TokenId token) const {
  if (token < 0 || token >= vocab_size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cannot decode token %d: outside the vocabulary [0, %d)", token, vocab_size()));
  }
  if (bpe_ != nullptr) {
    return bpe_->Decode({token}, prev == bos_id_, /*replace_invalid_utf8=*/false);
  }
  if (token == kBosId || token == kEosId) return std::string();
  const auto index = static_cast<size_t>(token);
  if (piece_byte_[index] >= 0) return std::string(1, static_cast<char>(piece_byte_[index]));
  std::string_view piece = pieces_[index];
  if (prev == kBosId && !piece.empty() && piece[0] == ' ') piece.remove_prefix(1);
  return std::string(piece);
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const TokenId> tokens,
                                              TokenId prev) const {
  if (bpe_ != nullptr) return bpe_->Decode(tokens, prev == bos_id_, /*replace_invalid_utf8=*/true);
  std::string text;
  for (TokenId token : tokens) {
    PAGEDKV_ASSIGN_OR_RETURN(std::string piece, DecodeToken(prev, token));
    text += piece;
    prev = token;
  }
  return text;
}

}  // namespace pagedkv
