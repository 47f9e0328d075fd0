#include "server/curator/key_directory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/testing/temp_folder.h"

namespace ldpgraph::curator {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kNodes = 10;
using Keys = std::vector<std::pair<uint32_t, std::string>>;

class KeyDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }
  void Reopen() {
    keys_.reset();
    store_.reset();
    auto store = store::CuratorStore::Open(dir_.path(), {});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    auto keys = KeyDirectory::Open(store_.get(), kNodes);
    ASSERT_TRUE(keys.ok()) << keys.status();
    keys_ = std::move(*keys);
  }
  // The details of the audited replacements, in order.
  std::vector<std::string> Replacements() {
    std::vector<std::string> out;
    auto rows = store_->ListAudit(0, 1000);
    EXPECT_TRUE(rows.ok()) << rows.status();
    for (const auto& r : *rows) {
      if (r.action == "node.key.replace") {
        EXPECT_EQ(r.actor, "host:h");
        out.push_back(r.details_json);
      }
    }
    return out;
  }
  static std::string K(char c) { return std::string(32, c); }

  TempFolder dir_;
  std::unique_ptr<store::CuratorStore> store_;
  std::unique_ptr<KeyDirectory> keys_;
};

TEST_F(KeyDirectoryTest, ServesKeysInRequestOrderLeavingOutNodesWithout) {
  auto put = keys_->Put(Keys{{1, K('a')}, {4, K('b')}}, "host:h");
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(put->added, 2u);
  EXPECT_TRUE(put->replaced.empty());
  auto got = keys_->Get({6, 4, 1});
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].node_id(), 4u);
  EXPECT_EQ((*got)[0].public_key(), K('b'));
  EXPECT_EQ((*got)[1].node_id(), 1u);
  EXPECT_EQ((*got)[1].public_key(), K('a'));
  EXPECT_TRUE(keys_->Get({})->empty());
}

TEST_F(KeyDirectoryTest, AnotherKeyReplacesTheOldOneAudited) {
  ASSERT_TRUE(keys_->Put(Keys{{1, K('a')}, {2, K('a')}}, "host:h").ok());
  // The same key again changes nothing.
  auto same = keys_->Put(Keys{{1, K('a')}}, "host:h");
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->added, 0u);
  EXPECT_TRUE(same->replaced.empty());
  EXPECT_TRUE(Replacements().empty());
  auto changed =
      keys_->Put(Keys{{2, K('c')}, {1, K('c')}, {3, K('d')}}, "host:h");
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(changed->added, 1u);
  EXPECT_THAT(changed->replaced, ::testing::ElementsAre(1u, 2u));
  EXPECT_THAT(Replacements(),
              ::testing::ElementsAre(R"({"nodes":2,"first_nodes":[1,2]})"));
  EXPECT_EQ(keys_->Get({1})->at(0).public_key(), K('c'));
}

TEST_F(KeyDirectoryTest, KeysSurviveAReopen) {
  ASSERT_TRUE(keys_->Put(Keys{{0, K('a')}, {9, K('z')}}, "host:h").ok());
  ASSERT_TRUE(keys_->Put(Keys{{0, K('b')}}, "host:h").ok());
  Reopen();
  auto got = keys_->Get({0, 9});
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].public_key(), K('b'));
  EXPECT_EQ((*got)[1].public_key(), K('z'));
}

// Two frontends on one shared store: a key enrolled at one is served by
// the other (it reads the asked nodes' keys from the store), the newest
// when it was replaced there. A directory that is not shared serves what
// it loaded.
TEST_F(KeyDirectoryTest, ASharedStoreServesKeysEnrolledElsewhere) {
  auto a = KeyDirectory::Open(store_.get(), kNodes, /*shared=*/true);
  auto b = KeyDirectory::Open(store_.get(), kNodes, /*shared=*/true);
  auto alone = KeyDirectory::Open(store_.get(), kNodes, /*shared=*/false);
  ASSERT_TRUE(a.ok() && b.ok() && alone.ok());
  ASSERT_TRUE((*a)->Put(Keys{{3, std::string(32, 'x')}}, "host:h").ok());
  auto got = (*b)->Get({3, 4});
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].node_id(), 3u);
  EXPECT_EQ((*got)[0].public_key(), std::string(32, 'x'));
  ASSERT_TRUE((*a)->Put(Keys{{3, std::string(32, 'y')}}, "host:h").ok());
  got = (*b)->Get({3});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0].public_key(), std::string(32, 'y'));
  got = (*alone)->Get({3});
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());  // loaded before the key existed
}

TEST_F(KeyDirectoryTest, PutRejectsAKeyOfTheWrongSizeStoringNothing) {
  auto put = keys_->Put(Keys{{1, K('a')}, {2, "short"}}, "host:h");
  EXPECT_EQ(put.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(put.status().message(),
              HasSubstr("node 2: sealing_key must be 32 bytes"));
  EXPECT_TRUE(keys_->Get({1, 2})->empty());
}

TEST_F(KeyDirectoryTest, PutRejectsANodeOutsideTheGraphStoringNothing) {
  auto put = keys_->Put(Keys{{1, K('a')}, {kNodes, K('b')}}, "host:h");
  EXPECT_EQ(put.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(put.status().message(), HasSubstr("out of range"));
  EXPECT_TRUE(keys_->Get({1})->empty());
}

TEST_F(KeyDirectoryTest, ValidateKeyNamesTheNodeAndSize) {
  EXPECT_TRUE(KeyDirectory::ValidateKey(3, K('a')).ok());
  absl::Status s = KeyDirectory::ValidateKey(3, std::string(31, 'a'));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("node 3"));
  EXPECT_THAT(s.message(), HasSubstr("got 31"));
}

TEST_F(KeyDirectoryTest, GetRejectsAnIdOutsideTheGraph) {
  auto got = keys_->Get({1, kNodes});
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(),
              HasSubstr("node_ids[1] = 10 out of range"));
}

TEST_F(KeyDirectoryTest, GetRejectsMoreThanTheLimit) {
  auto got = keys_->Get(std::vector<uint32_t>(KeyDirectory::kMaxGet + 1, 1));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("at most 100000"));
  EXPECT_TRUE(keys_->Get(std::vector<uint32_t>(KeyDirectory::kMaxGet, 1)).ok());
}

}  // namespace
}  // namespace ldpgraph::curator
