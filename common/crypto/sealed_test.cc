#include "common/crypto/sealed.h"

#include <set>
#include <string>

#include "common/hex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::crypto {
namespace {

using ::testing::HasSubstr;

KeyPair NewKeys() {
  auto k = KeyPair::Generate();
  EXPECT_TRUE(k.ok()) << k.status();
  return *k;
}

std::string Unhex(absl::string_view hex) {
  auto raw = FromHex(hex);
  EXPECT_TRUE(raw.ok()) << raw.status();
  return raw.ok() ? *raw : std::string();
}

// RFC 7748, section 6.1: the public keys of Alice's and Bob's private keys.
TEST(KeyPairTest, PublicKeysMatchRfc7748) {
  auto alice = KeyPair::FromPrivate(
      Unhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"));
  ASSERT_TRUE(alice.ok()) << alice.status();
  EXPECT_EQ(ToHex(alice->public_key()),
            "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a");
  auto bob = KeyPair::FromPrivate(
      Unhex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"));
  ASSERT_TRUE(bob.ok()) << bob.status();
  EXPECT_EQ(ToHex(bob->public_key()),
            "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f");
}

TEST(KeyPairTest, GeneratedKeysDifferAndReloadFromThePrivateHalf) {
  KeyPair a = NewKeys(), b = NewKeys();
  EXPECT_NE(a.private_key(), b.private_key());
  EXPECT_EQ(a.public_key().size(), kKeyBytes);
  auto again = KeyPair::FromPrivate(a.private_key());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->public_key(), a.public_key());
  EXPECT_EQ(KeyPair::FromPrivate("short").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SealedTest, OnlyTheRecipientOpensWhatTheSenderSealed) {
  KeyPair a = NewKeys(), b = NewKeys(), eve = NewKeys();
  const std::string context = "c7/substitution/from 3 to 9";
  for (const std::string& plain :
       {std::string(), std::string("x"), std::string(70000, '\x5a')}) {
    auto box = Seal(a, b.public_key(), context, plain);
    ASSERT_TRUE(box.ok()) << box.status();
    EXPECT_EQ(box->size(), plain.size() + kSealOverhead);
    auto opened = Open(b, a.public_key(), context, *box);
    ASSERT_TRUE(opened.ok()) << opened.status();
    EXPECT_EQ(*opened, plain);
    // A third node, even knowing both public keys, cannot open it.
    EXPECT_EQ(Open(eve, a.public_key(), context, *box).status().code(),
              absl::StatusCode::kUnauthenticated);
    // The sender's own incoming key is the other direction: no.
    EXPECT_EQ(Open(a, b.public_key(), context, *box).status().code(),
              absl::StatusCode::kUnauthenticated);
  }
}

TEST(SealedTest, EveryChangeToABoxOrItsContextIsDetected) {
  KeyPair a = NewKeys(), b = NewKeys();
  auto box = Seal(a, b.public_key(), "step 1", "the retained set: 4 17 23");
  ASSERT_TRUE(box.ok());
  // Every single bit of nonce, ciphertext and tag.
  for (size_t i = 1; i < box->size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = *box;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      EXPECT_EQ(Open(b, a.public_key(), "step 1", bad).status().code(),
                absl::StatusCode::kUnauthenticated)
          << "byte " << i << " bit " << bit;
    }
  }
  EXPECT_EQ(Open(b, a.public_key(), "step 2", *box).status().code(),
            absl::StatusCode::kUnauthenticated);
  // Truncated, extended, another version.
  EXPECT_EQ(Open(b, a.public_key(), "step 1", box->substr(0, box->size() - 1))
                .status()
                .code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Open(b, a.public_key(), "step 1", *box + "!").status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Open(b, a.public_key(), "step 1", box->substr(0, 10)).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::string v2 = *box;
  v2[0] = 2;
  auto s = Open(b, a.public_key(), "step 1", v2).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("version 2"));
}

TEST(SealedTest, FreshNonceEveryTimeAndOneDerivedKeyForManyBoxes) {
  KeyPair a = NewKeys(), b = NewKeys();
  auto out = SealingKey::Outgoing(a, b.public_key());
  auto in = SealingKey::Incoming(b, a.public_key());
  ASSERT_TRUE(out.ok() && in.ok());
  std::set<std::string> nonces, boxes;
  for (int i = 0; i < 200; ++i) {
    auto box = out->Seal("ctx", "same plaintext");
    ASSERT_TRUE(box.ok());
    boxes.insert(*box);
    nonces.insert(box->substr(1, kNonceBytes));
    auto opened = in->Open("ctx", *box);
    ASSERT_TRUE(opened.ok()) << opened.status();
    EXPECT_EQ(*opened, "same plaintext");
  }
  EXPECT_EQ(nonces.size(), 200u);
  EXPECT_EQ(boxes.size(), 200u);
}

TEST(SealedTest, RejectsBadPublicKeys) {
  KeyPair a = NewKeys();
  EXPECT_EQ(Seal(a, "too short", "c", "p").status().code(),
            absl::StatusCode::kInvalidArgument);
  // The all-zero point has low order: the agreement would be all zeros.
  auto s = Seal(a, std::string(kKeyBytes, '\0'), "c", "p").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("low-order"));
}

// A box sealed from Alice to Bob (RFC 7748's key pairs) under context
// "known-answer": the key derivation and the box format never change, so
// boxes sealed by one build open in the next.
TEST(SealedTest, OpensAKnownBox) {
  auto alice = KeyPair::FromPrivate(
      Unhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"));
  auto bob = KeyPair::FromPrivate(
      Unhex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"));
  ASSERT_TRUE(alice.ok() && bob.ok());
  const std::string box = Unhex(
      "010087cf818507633a667b417b95c3392615e428efc3a070957c12acd5808fde6c79c7"
      "192ecda3a83d2371b773b0e0c28f698e36");
  auto plain = Open(*bob, alice->public_key(), "known-answer", box);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(*plain, "ldpgraph sealed message");
  // The same box does not open as one from Bob to Alice.
  EXPECT_EQ(
      Open(*alice, bob->public_key(), "known-answer", box).status().code(),
      absl::StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace ldpgraph::crypto
