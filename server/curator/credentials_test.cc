#include "server/curator/credentials.h"

#include <fstream>
#include <string>

#include "common/testing/temp_folder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::curator {
namespace {

using ::testing::HasSubstr;

const std::string kKey(32, 'k');

TEST(CredentialsTest, VerifyOnlyForTheirNode) {
  EXPECT_TRUE(VerifyNodeCredential(kKey, 3, NodeCredential(kKey, 3)));
  EXPECT_FALSE(VerifyNodeCredential(kKey, 4, NodeCredential(kKey, 3)));
  EXPECT_FALSE(VerifyNodeCredential(std::string(32, 'x'), 3,
                                    NodeCredential(kKey, 3)));
  EXPECT_EQ(*FromHex(ToHex("\x01\xab\xff")), "\x01\xab\xff");
  EXPECT_FALSE(FromHex("abc").ok());
  EXPECT_FALSE(FromHex("zz").ok());
}

// HMAC-SHA256(node key, "ldpgraph-node-v1:3"), computed independently:
// issued credentials must keep verifying after an upgrade.
TEST(CredentialsTest, IsTheHmacOfTheNodeLabel) {
  EXPECT_EQ(ToHex(NodeCredential(kKey, 3)),
            "785adffc39b7dd43b286efea8b0d1d14563aa808a58c57bd438e167ac9d6cb68");
  EXPECT_NE(NodeCredential(kKey, 3), NodeCredential(kKey, 30));
}

TEST(CredentialsTest, FileTextListsEachNodeOfTheRange) {
  const std::string text = CredentialsFileText(kKey, 2, 4);
  EXPECT_THAT(text, HasSubstr("2\t" + ToHex(NodeCredential(kKey, 2)) + "\n"));
  EXPECT_THAT(text, HasSubstr("3\t" + ToHex(NodeCredential(kKey, 3)) + "\n"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("\n4\t")));
  EXPECT_EQ(text[0], '#');
}

TEST(CredentialsTest, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("token", "token"));
  EXPECT_FALSE(ConstantTimeEquals("token", "tokem"));
  EXPECT_FALSE(ConstantTimeEquals("token", "token2"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

TEST(CredentialsTest, SecretFiles) {
  TempFolder dir;
  const std::string path = dir.File("secret");
  EXPECT_EQ(ReadHexSecretFile(path).status().code(),
            absl::StatusCode::kNotFound);
  std::ofstream(path) << "00112233\n";
  EXPECT_THAT(ReadHexSecretFile(path).status().message(),
              HasSubstr("at least 16 bytes"));
  std::ofstream(path) << std::string(64, 'a') << "\n";
  EXPECT_EQ(ReadHexSecretFile(path)->size(), 32u);
}

}  // namespace
}  // namespace ldpgraph::curator
