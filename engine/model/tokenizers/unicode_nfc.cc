// Copyright 2026 The pagedkv Authors.
#include "engine/model/tokenizers/unicode_nfc.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/tokenizers/unicode_categories.h"

namespace pagedkv::model_internal {
namespace {

struct CombiningClass {
  char32_t cp;
  uint8_t ccc;
};
struct Decomposition {
  char32_t cp;
  char32_t to[4];  // zero-padded
};
struct Composition {
  char32_t first, second, composite;
};
struct CompatDecomposition {
  char32_t cp;
  uint32_t offset, length;  // into kCompatData
};

#include "engine/model/tokenizers/unicode_nfc_table.inc"

constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount;
constexpr char32_t kSCount = kLCount * kNCount;

uint8_t Ccc(char32_t cp) {
  if (cp < 0x300) return 0;
  const auto* it = std::lower_bound(std::begin(kCombiningClasses), std::end(kCombiningClasses), cp,
                                    [](const CombiningClass& c, char32_t x) { return c.cp < x; });
  return it != std::end(kCombiningClasses) && it->cp == cp ? it->ccc : 0;
}

// Appends the full compatibility decomposition of cp when it differs from the canonical one.
bool DecomposeCompat(char32_t cp, std::vector<char32_t>* out) {
  const auto* it =
      std::lower_bound(std::begin(kCompatDecompositions), std::end(kCompatDecompositions), cp,
                       [](const CompatDecomposition& d, char32_t x) { return d.cp < x; });
  if (cp < 0xA0 || it == std::end(kCompatDecompositions) || it->cp != cp) return false;
  out->insert(out->end(), kCompatData + it->offset, kCompatData + it->offset + it->length);
  return true;
}

void Decompose(char32_t cp, std::vector<char32_t>* out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  const auto* it = std::lower_bound(std::begin(kDecompositions), std::end(kDecompositions), cp,
                                    [](const Decomposition& d, char32_t x) { return d.cp < x; });
  if (cp < 0xC0 || it == std::end(kDecompositions) || it->cp != cp) {
    out->push_back(cp);
    return;
  }
  for (char32_t c : it->to) {
    if (c != 0) out->push_back(c);
  }
}

// The primary composite of (a, b), or 0.
char32_t Compose(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  }
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount) {
    return a + (b - kTBase);
  }
  const auto* it =
      std::lower_bound(std::begin(kCompositions), std::end(kCompositions), std::make_pair(a, b),
                       [](const Composition& c, std::pair<char32_t, char32_t> x) {
                         return c.first != x.first ? c.first < x.first : c.second < x.second;
                       });
  return it != std::end(kCompositions) && it->first == a && it->second == b ? it->composite : 0;
}

// Stable-sorts every run of non-starters by combining class.
void CanonicalOrder(std::vector<char32_t>* cps) {
  std::vector<char32_t>& c = *cps;
  for (size_t i = 0; i < c.size();) {
    if (Ccc(c[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < c.size() && Ccc(c[j]) != 0) ++j;
    std::stable_sort(c.begin() + static_cast<long>(i), c.begin() + static_cast<long>(j),
                     [](char32_t x, char32_t y) { return Ccc(x) < Ccc(y); });
    i = j;
  }
}

// UAX #15's canonical composition over decomposed, ordered code points.
void ComposeAll(std::vector<char32_t>* cps) {
  std::vector<char32_t>& c = *cps;
  if (c.empty()) return;
  size_t starter = 0, out = 1;
  int last_class = Ccc(c[0]) == 0 ? 0 : 256;
  for (size_t i = 1; i < c.size(); ++i) {
    const char32_t ch = c[i];
    const int ch_class = Ccc(ch);
    const char32_t composite = last_class == 256 ? 0 : Compose(c[starter], ch);
    if (composite != 0 && (last_class < ch_class || last_class == 0)) {
      c[starter] = composite;
      continue;
    }
    if (ch_class == 0) starter = out;
    last_class = ch_class;
    c[out++] = ch;
  }
  c.resize(out);
}

}  // namespace

std::string UnicodeNormalize(std::string_view text, NormalForm form) {
  bool ascii = true;
  for (char ch : text) ascii = ascii && static_cast<unsigned char>(ch) < 0x80;
  if (ascii) return std::string(text);
  const bool compat = form == NormalForm::kNfkc || form == NormalForm::kNfkd;
  std::vector<char32_t> cps;
  cps.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const char32_t cp = NextCodePoint(text, &i);
    if (!compat || !DecomposeCompat(cp, &cps)) Decompose(cp, &cps);
  }
  CanonicalOrder(&cps);
  if (form == NormalForm::kNfc || form == NormalForm::kNfkc) ComposeAll(&cps);
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : cps) AppendUtf8(cp, &out);
  return out;
}

std::string NfcNormalize(std::string_view text) { return UnicodeNormalize(text, NormalForm::kNfc); }

}  // namespace pagedkv::model_internal
