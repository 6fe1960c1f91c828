// Copyright 2026 The pagedkv Authors.
//
// NFC (UAX #15) on cases worked out from the standard's rules: composition, canonical reordering,
// singletons, composition exclusions, Hangul, unpaired marks.
#include "engine/model/tokenizers/unicode_nfc.h"

#include "gtest/gtest.h"

namespace pagedkv::model_internal {
namespace {

TEST(UnicodeNfcTest, ComposesAndReorders) {
  EXPECT_EQ(NfcNormalize("plain ascii"), "plain ascii");
  EXPECT_EQ(NfcNormalize("e\xCC\x81"), "\xC3\xA9");  // e + U+0301 -> U+00E9
  // a + U+0302 (ccc 230) + U+0323 (ccc 220): ordered to a U+0323 U+0302, then a+0323 = U+1EA1,
  // U+1EA1 + U+0302 = U+1EAD; either input order gives U+1EAD.
  EXPECT_EQ(NfcNormalize("a\xCC\x82\xCC\xA3"), "\xE1\xBA\xAD");
  EXPECT_EQ(NfcNormalize("a\xCC\xA3\xCC\x82"), "\xE1\xBA\xAD");
  EXPECT_EQ(NfcNormalize("\xE1\xBA\xAD"), "\xE1\xBA\xAD");  // already NFC
}

TEST(UnicodeNfcTest, SingletonsExclusionsHangulAndLoneMarks) {
  EXPECT_EQ(NfcNormalize("\xE2\x84\xAB"), "\xC3\x85");  // ANGSTROM SIGN -> U+00C5
  EXPECT_EQ(NfcNormalize("\xE2\x84\xA6"), "\xCE\xA9");  // OHM SIGN -> U+03A9
  // U+0958 decomposes to U+0915 U+093C and is excluded from composition.
  EXPECT_EQ(NfcNormalize("\xE0\xA5\x98"), "\xE0\xA4\x95\xE0\xA4\xBC");
  // Hangul L V T -> U+AC01; L V -> U+AC00; a syllable is unchanged.
  EXPECT_EQ(NfcNormalize("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");
  EXPECT_EQ(NfcNormalize("\xE1\x84\x80\xE1\x85\xA1"), "\xEA\xB0\x80");
  EXPECT_EQ(NfcNormalize("\xEA\xB0\x81"), "\xEA\xB0\x81");
  // A mark with no starter before it stays; a blocked mark stays after its starter.
  EXPECT_EQ(NfcNormalize("\xCC\x81x"), "\xCC\x81x");
}

TEST(UnicodeNormalizeTest, CompatibilityAndDecomposedForms) {
  // NFKC: ligature U+FB01 -> "fi", full-width U+FF28 -> "H", superscript two -> "2", NBSP -> " ",
  // U+2460 CIRCLED DIGIT ONE -> "1", U+FDFA (18 code points) expands whole.
  EXPECT_EQ(
      UnicodeNormalize("\xEF\xAC\x81\xEF\xBC\xA8\xC2\xB2\xC2\xA0\xE2\x91\xA0", NormalForm::kNfkc),
      "fiH2 1");
  EXPECT_EQ(UnicodeNormalize("\xEF\xB7\xBA", NormalForm::kNfkd).size(), 33u);
  // A compatibility decomposition that then composes canonically: U+1E9B (long s with dot above)
  // is U+017F U+0307 canonically; NFKC makes it U+1E61, NFKD "s" U+0307, NFC keeps it.
  EXPECT_EQ(UnicodeNormalize("\xE1\xBA\x9B", NormalForm::kNfkc), "\xE1\xB9\xA1");
  EXPECT_EQ(UnicodeNormalize("\xE1\xBA\x9B", NormalForm::kNfkd), "s\xCC\x87");
  EXPECT_EQ(UnicodeNormalize("\xE1\xBA\x9B", NormalForm::kNfc), "\xE1\xBA\x9B");
  EXPECT_EQ(UnicodeNormalize("\xE1\xBA\x9B", NormalForm::kNfd), "\xC5\xBF\xCC\x87");
  // Hangul decomposes in NFD / NFKD and recomposes in NFKC.
  EXPECT_EQ(UnicodeNormalize("\xEA\xB0\x81", NormalForm::kNfd),
            "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8");
  EXPECT_EQ(UnicodeNormalize("\xEA\xB0\x81", NormalForm::kNfkc), "\xEA\xB0\x81");
  EXPECT_EQ(UnicodeNormalize("plain", NormalForm::kNfkd), "plain");
}

}  // namespace
}  // namespace pagedkv::model_internal
