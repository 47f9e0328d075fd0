#include "common/crypto/openssl.h"

#include <openssl/err.h>

#include <string>
#include <vector>

#include "common/hex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::crypto {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Unhex(absl::string_view hex) {
  auto raw = FromHex(hex);
  EXPECT_TRUE(raw.ok()) << raw.status();
  return raw.ok() ? *raw : std::string();
}

std::string AsString(const std::vector<uint8_t>& v) {
  return std::string(v.begin(), v.end());
}

// RFC 5869, appendix A.1 (basic test case with SHA-256).
TEST(HkdfSha256Test, MatchesRfc5869TestCase1) {
  const std::string ikm(22, '\x0b');
  const std::string salt = Unhex("000102030405060708090a0b0c");
  const std::string info = Unhex("f0f1f2f3f4f5f6f7f8f9");
  std::vector<uint8_t> okm(42);
  ASSERT_TRUE(HkdfSha256(ikm, salt, info, absl::MakeSpan(okm)).ok());
  EXPECT_EQ(ToHex(AsString(okm)),
            "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf"
            "34007208d5b887185865");
}

// RFC 5869, appendix A.3 (zero-length salt and info).
TEST(HkdfSha256Test, MatchesRfc5869TestCase3) {
  const std::string ikm(22, '\x0b');
  std::vector<uint8_t> okm(42);
  ASSERT_TRUE(HkdfSha256(ikm, "", "", absl::MakeSpan(okm)).ok());
  EXPECT_EQ(ToHex(AsString(okm)),
            "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d"
            "9d201395faa4b61a96c8");
}

TEST(HkdfSha256Test, RefusesAnEmptyOutput) {
  std::vector<uint8_t> none;
  const absl::Status s =
      HkdfSha256("key", "salt", "info", absl::MakeSpan(none));
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("HKDF: "));
}

TEST(OpenSslErrorTest, TextNamesTheFailureAndClearsTheQueue) {
  ERR_clear_error();
  EXPECT_EQ(OpenSslErrorText(), "no OpenSSL error queued");
  // A failing call queues an error.
  EXPECT_EQ(EVP_CIPHER_fetch(nullptr, "no-such-cipher", nullptr), nullptr);
  const std::string text = OpenSslErrorText();
  EXPECT_FALSE(text.empty());
  EXPECT_NE(text, "no OpenSSL error queued");
  EXPECT_EQ(ERR_peek_error(), 0u);
  EXPECT_EQ(OpenSslErrorText(), "no OpenSSL error queued");
}

TEST(OpenSslErrorTest, StatusIsInternalNamingTheStep) {
  EXPECT_EQ(EVP_CIPHER_fetch(nullptr, "no-such-cipher", nullptr), nullptr);
  const absl::Status s = OpenSslError("test: fetching a cipher");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("test: fetching a cipher: "));
  EXPECT_THAT(s.message(), Not(HasSubstr("no OpenSSL error queued")));
}

}  // namespace
}  // namespace ldpgraph::crypto
