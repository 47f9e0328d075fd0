#include "server/curator/relay_mailbox.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/testing/temp_folder.h"

namespace ldpgraph::curator {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kNodes = 10;

Session Of(std::vector<uint32_t> nodes) {
  Session s;
  s.nodes = std::move(nodes);
  s.Index();
  return s;
}

v1::RelayRequest Message(uint32_t from, uint32_t to, std::string text,
                         std::string campaign = "c1") {
  v1::RelayRequest r;
  auto* m = r.add_messages();
  m->set_campaign_id(std::move(campaign));
  m->set_from_node(from);
  m->set_to_node(to);
  m->set_ciphertext(std::move(text));
  return r;
}

class RelayMailboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = store::CuratorStore::Open(dir_.path(), {});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    mailbox_ = std::make_unique<RelayMailbox>(store_.get(), kNodes);
  }
  TempFolder dir_;
  std::unique_ptr<store::CuratorStore> store_;
  std::unique_ptr<RelayMailbox> mailbox_;
  const Session alice_ = Of({0, 1});
  const Session bob_ = Of({5, 7});
};

TEST_F(RelayMailboxTest, DeliversToTheRecipientsSessionsInOrder) {
  auto req = Message(1, 5, "one");
  *req.add_messages() = Message(0, 7, "two").messages(0);
  *req.add_messages() = Message(1, 0, "three").messages(0);  // to itself
  auto sent = mailbox_->Relay(alice_, req);
  ASSERT_TRUE(sent.ok()) << sent.status();
  EXPECT_EQ(*sent, 3);
  auto got = mailbox_->Fetch(bob_, 0, 10);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].ciphertext(), "one");
  EXPECT_EQ((*got)[0].from_node(), 1u);
  EXPECT_EQ((*got)[0].to_node(), 5u);
  EXPECT_EQ((*got)[0].campaign_id(), "c1");
  EXPECT_EQ((*got)[1].ciphertext(), "two");
  EXPECT_LT((*got)[0].sequence(), (*got)[1].sequence());
  // After the last seen: nothing more.
  EXPECT_TRUE(mailbox_->Fetch(bob_, (*got)[1].sequence(), 10)->empty());
  auto own = mailbox_->Fetch(alice_, 0, 10);
  ASSERT_EQ(own->size(), 1u);
  EXPECT_EQ((*own)[0].ciphertext(), "three");
}

TEST_F(RelayMailboxTest, FetchCanReadOneCampaign) {
  for (const char* c : {"c1", "c2", "c1"}) {
    ASSERT_TRUE(mailbox_->Relay(alice_, Message(0, 5, c, c)).ok());
  }
  EXPECT_EQ(mailbox_->Fetch(bob_, 0, 10)->size(), 3u);
  EXPECT_EQ(mailbox_->Fetch(bob_, 0, 10, "c1")->size(), 2u);
  EXPECT_EQ(mailbox_->Fetch(bob_, 0, 10, "c2")->size(), 1u);
  EXPECT_TRUE(mailbox_->Fetch(bob_, 0, 10, "c3")->empty());
}

TEST_F(RelayMailboxTest, FetchReturnsAtMostTheLimit) {
  v1::RelayRequest req;
  for (int i = 0; i < RelayMailbox::kMaxFetch + 5; ++i) {
    *req.add_messages() = Message(0, 5, "m").messages(0);
  }
  ASSERT_TRUE(mailbox_->Relay(alice_, req).ok());
  EXPECT_EQ(mailbox_->Fetch(bob_, 0, 3)->size(), 3u);
  for (int limit : {0, -1, RelayMailbox::kMaxFetch + 1}) {
    EXPECT_EQ(mailbox_->Fetch(bob_, 0, limit)->size(),
              static_cast<size_t>(RelayMailbox::kMaxFetch))
        << limit;
  }
}

TEST_F(RelayMailboxTest, RelayRefusesASenderOutsideTheSession) {
  auto req = Message(0, 5, "ok");
  *req.add_messages() = Message(5, 0, "forged").messages(0);
  auto sent = mailbox_->Relay(alice_, req);
  EXPECT_EQ(sent.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(sent.status().message(), HasSubstr("messages[1]: node 5"));
  EXPECT_TRUE(mailbox_->Fetch(bob_, 0, 10)->empty());  // nothing stored
}

TEST_F(RelayMailboxTest, RelayRefusesARecipientOutsideTheGraph) {
  auto sent = mailbox_->Relay(alice_, Message(0, kNodes, "x"));
  EXPECT_EQ(sent.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(sent.status().message(), HasSubstr("recipient 10 out of range"));
}

TEST_F(RelayMailboxTest, RelayRefusesAnOversizedCiphertext) {
  auto sent = mailbox_->Relay(
      alice_,
      Message(0, 5, std::string(RelayMailbox::kMaxCiphertext + 1, 'x')));
  EXPECT_EQ(sent.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(sent.status().message(), HasSubstr("at most 65536"));
  EXPECT_TRUE(
      mailbox_
          ->Relay(alice_,
                  Message(0, 5, std::string(RelayMailbox::kMaxCiphertext, 'x')))
          .ok());
}

TEST_F(RelayMailboxTest, RelayRefusesTooManyMessages) {
  v1::RelayRequest req;
  for (int i = 0; i <= RelayMailbox::kMaxMessages; ++i) {
    *req.add_messages() = Message(0, 5, "m").messages(0);
  }
  auto sent = mailbox_->Relay(alice_, req);
  EXPECT_EQ(sent.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(sent.status().message(), HasSubstr("at most 4096"));
  EXPECT_TRUE(mailbox_->Fetch(bob_, 0, 10)->empty());
}

}  // namespace
}  // namespace ldpgraph::curator
