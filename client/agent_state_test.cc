// Tests for the agent host's durable memo (agent.db): round trips, the
// one-answer-per-question invariant, atomic commits and the failures a
// state directory can hit.
#include "client/agent_state.h"

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/temp_folder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::agent {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

MemoRow Row(uint32_t node, const std::string& attribute, double eps,
            std::string answer, const std::string& params = "d=4,sampled=1") {
  return MemoRow{node, QueryKey{attribute, "hds", params, eps},
                 std::move(answer)};
}

std::vector<MemoRow> ReadAll(const AgentStateStore& store) {
  std::vector<MemoRow> rows;
  absl::Status s = store.ForEach([&](const MemoRow& r) {
    rows.push_back(r);
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
  return rows;
}

// Runs sql on the database file through a separate connection.
void SqlOn(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

TEST(AgentStateStoreTest, OpenCreatesTheDirectoryAndAnEmptyMemo) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  const std::string dir = tmp.path() + "/nested/state";
  auto store = AgentStateStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE(fs::is_regular_file(dir + "/agent.db"));
  EXPECT_EQ((*store)->path(), dir + "/agent.db");
  EXPECT_EQ(*(*store)->Count(), 0);
  EXPECT_TRUE(ReadAll(**store).empty());
}

TEST(AgentStateStoreTest, ReadOnlyReadsBesideTheWriterAndChangesNothing) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  AgentStateStore::Options ro;
  ro.read_only = true;
  // No state yet: NOT_FOUND naming the file, and nothing is created.
  auto missing = AgentStateStore::Open(tmp.path(), ro);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("agent.db"));
  EXPECT_FALSE(fs::exists(tmp.path()));

  auto writer = AgentStateStore::Open(tmp.path());
  ASSERT_TRUE(writer.ok()) << writer.status();
  const MemoRow a = Row(1, "features", 0.5, "A");
  ASSERT_TRUE((*writer)->Commit({a}).ok());
  auto reader = AgentStateStore::Open(tmp.path(), ro);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(ReadAll(**reader), std::vector<MemoRow>{a});
  // It sees what the writer commits later.
  const MemoRow b = Row(2, "label", 1, "B", "k=3");
  ASSERT_TRUE((*writer)->Commit({b}).ok());
  EXPECT_EQ(ReadAll(**reader), (std::vector<MemoRow>{a, b}));
  const absl::Status s = (*reader)->Commit({Row(3, "label", 1, "C", "k=3")});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("read-only"));
  EXPECT_EQ((*reader)->StoreKeys({{3, std::string(32, 'k')}}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*(*writer)->Count(), 2);
}

TEST(AgentStateStoreTest, DatabaseIsInWalMode) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  auto store = AgentStateStore::Open(tmp.path());
  ASSERT_TRUE(store.ok()) << store.status();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(tmp.File("agent.db").c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)),
               "wal");
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

TEST(AgentStateStoreTest, CommittedRowsSurviveReopeningInKeyOrder) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  const std::string binary("\0\x01\xff body", 8);
  {
    auto store = AgentStateStore::Open(tmp.path());
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)
                    ->Commit({Row(7, "label", 0.1, "l7", "classes=3"),
                              Row(2, "features", 1.0 / 3.0, binary),
                              Row(2, "edges", 2.5, "e2", "n=10")})
                    .ok());
  }
  auto store = AgentStateStore::Open(tmp.path());
  ASSERT_TRUE(store.ok()) << store.status();
  const std::vector<MemoRow> rows = ReadAll(**store);
  ASSERT_EQ(rows.size(), 3u);
  // Ordered by (node, canonical key).
  EXPECT_EQ(rows[0], Row(2, "edges", 2.5, "e2", "n=10"));
  EXPECT_EQ(rows[1], Row(2, "features", 1.0 / 3.0, binary));
  EXPECT_EQ(rows[2], Row(7, "label", 0.1, "l7", "classes=3"));
  // Every field of the key comes back exactly, epsilon included.
  EXPECT_EQ(rows[1].key.attribute, "features");
  EXPECT_EQ(rows[1].key.mechanism, "hds");
  EXPECT_EQ(rows[1].key.parameters, "d=4,sampled=1");
  EXPECT_EQ(rows[1].key.epsilon, 1.0 / 3.0);
  EXPECT_EQ(rows[1].answer, binary);
}

TEST(AgentStateStoreTest, CommittingAnIdenticalRowAgainChangesNothing) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  auto store = AgentStateStore::Open(tmp.path());
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Commit({Row(1, "features", 1.0, "a")}).ok());
  absl::Status again = (*store)->Commit(
      {Row(1, "features", 1.0, "a"), Row(1, "features", 1.0, "a"),
       Row(2, "features", 1.0, "b")});
  EXPECT_TRUE(again.ok()) << again;
  EXPECT_EQ(*(*store)->Count(), 2);
}

TEST(AgentStateStoreTest, ADifferentAnswerToAStoredQuestionIsInternal) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  auto store = AgentStateStore::Open(tmp.path());
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Commit({Row(1, "features", 1.0, "a")}).ok());
  absl::Status s = (*store)->Commit(
      {Row(2, "features", 1.0, "new"), Row(1, "features", 1.0, "other")});
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("memo invariant violated: node 1"));
  EXPECT_THAT(s.message(), HasSubstr("features|hds|d=4,sampled=1|1"));
  EXPECT_THAT(s.message(), HasSubstr(tmp.File("agent.db")));
  // The whole transaction was rolled back: node 2's row is not stored.
  const std::vector<MemoRow> rows = ReadAll(**store);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].answer, "a");
}

TEST(AgentStateStoreTest, ConflictingRowsWithinOneCommitAreInternal) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  auto store = AgentStateStore::Open(tmp.path());
  ASSERT_TRUE(store.ok()) << store.status();
  absl::Status s = (*store)->Commit(
      {Row(1, "label", 1.0, "x", "classes=3"),
       Row(1, "label", 1.0, "y", "classes=3")});
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(*(*store)->Count(), 0);
}

TEST(AgentStateStoreTest, CommitRejectsANonPositiveEpsilon) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  auto store = AgentStateStore::Open(tmp.path());
  ASSERT_TRUE(store.ok()) << store.status();
  absl::Status s = (*store)->Commit(
      {Row(1, "features", 1.0, "a"), Row(3, "features", 0.0, "b")});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("memo row 1 (node 3)"));
  EXPECT_EQ(*(*store)->Count(), 0);
}

TEST(AgentStateStoreTest, EmptyCommitIsOk) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  auto store = AgentStateStore::Open(tmp.path());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE((*store)->Commit({}).ok());
}

TEST(AgentStateStoreTest, OpenFailsOnAFileThatIsNotADatabase) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  fs::create_directories(tmp.path());
  {
    std::ofstream out(tmp.File("agent.db"), std::ios::binary);
    out << std::string(8192, 'x');
  }
  auto store = AgentStateStore::Open(tmp.path());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(store.status().message(), HasSubstr(tmp.File("agent.db")));
  EXPECT_THAT(store.status().message(), HasSubstr("not a database"));
}

TEST(AgentStateStoreTest, OpenFailsWhenTheDirectoryIsAFile) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  fs::create_directories(tmp.path());
  const std::string file = tmp.path() + "/state";
  { std::ofstream out(file); out << "x"; }
  auto store = AgentStateStore::Open(file);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(store.status().message(), HasSubstr(file));
}

TEST(AgentStateStoreTest, OpenFailsWhenAgentDbIsADirectory) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  fs::create_directories(tmp.File("agent.db"));
  auto store = AgentStateStore::Open(tmp.path());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(store.status().message(), HasSubstr(tmp.File("agent.db")));
}

TEST(AgentStateStoreTest, OpenRefusesAnotherSchemaVersion) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  ASSERT_TRUE(AgentStateStore::Open(tmp.path()).ok());
  SqlOn(tmp.File("agent.db"), "PRAGMA user_version = 7");
  auto store = AgentStateStore::Open(tmp.path());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr("schema version 7"));
}

TEST(AgentStateStoreTest, OpenRejectsBadOptions) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  AgentStateStore::Options options;
  options.busy_timeout_ms = -1;
  EXPECT_EQ(AgentStateStore::Open(tmp.path(), options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options = {};
  options.max_bytes = -5;
  EXPECT_EQ(AgentStateStore::Open(tmp.path(), options).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AgentStateStore::Open("").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AgentStateStoreTest, AFullDiskIsResourceExhaustedAndStoresNothing) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  AgentStateStore::Options options;
  options.max_bytes = 16 * 4096;
  auto store = AgentStateStore::Open(tmp.path(), options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Commit({Row(1, "features", 1.0, "small")}).ok());
  absl::Status s = (*store)->Commit(
      {Row(2, "features", 1.0, "fits"),
       Row(3, "features", 1.0, std::string(200000, 'z'))});
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr(tmp.File("agent.db")));
  EXPECT_EQ(*(*store)->Count(), 1);
  // The store is still usable.
  EXPECT_TRUE((*store)->Commit({Row(2, "features", 1.0, "fits")}).ok());
  EXPECT_EQ(*(*store)->Count(), 2);
}

TEST(AgentStateStoreTest, AWriteLockHeldElsewhereIsUnavailableThenClears) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  AgentStateStore::Options options;
  options.busy_timeout_ms = 20;
  auto store = AgentStateStore::Open(tmp.path(), options);
  ASSERT_TRUE(store.ok()) << store.status();
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(tmp.File("agent.db").c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr),
            SQLITE_OK);
  absl::Status s = (*store)->Commit({Row(1, "features", 1.0, "a")});
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr(tmp.File("agent.db")));
  ASSERT_EQ(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(other);
  EXPECT_TRUE((*store)->Commit({Row(1, "features", 1.0, "a")}).ok());
  EXPECT_EQ(*(*store)->Count(), 1);
}

TEST(AgentStateStoreTest, ForEachDetectsARowWhoseColumnsDisagreeWithItsKey) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  {
    auto store = AgentStateStore::Open(tmp.path());
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->Commit({Row(4, "features", 1.0, "a")}).ok());
  }
  SqlOn(tmp.File("agent.db"), "UPDATE memo SET epsilon = 0.5");
  auto store = AgentStateStore::Open(tmp.path());
  ASSERT_TRUE(store.ok()) << store.status();
  absl::Status s = (*store)->ForEach(
      [](const MemoRow&) { return absl::OkStatus(); });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("memo row (4, features|hds|d=4,sampled=1|1)"));
  EXPECT_THAT(s.message(), HasSubstr("features|hds|d=4,sampled=1|0.5"));
}

TEST(AgentStateStoreTest, ForEachStopsAtTheCallbacksError) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  auto store = AgentStateStore::Open(tmp.path());
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)
                  ->Commit({Row(1, "features", 1.0, "a"),
                            Row(2, "features", 1.0, "b")})
                  .ok());
  int calls = 0;
  absl::Status s = (*store)->ForEach([&](const MemoRow&) {
    ++calls;
    return absl::AbortedError("stop");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(calls, 1);
}

TEST(AgentStateStoreTest, KeysAreStoredOnceAndNeverReplaced) {
  TempFolder tmp;
  auto store = AgentStateStore::Open(tmp.path());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE((*store)->LoadKeys()->empty());
  const std::string a(32, 'a'), b(32, 'b');
  ASSERT_TRUE((*store)->StoreKeys({{3, a}, {1, b}}).ok());
  ASSERT_TRUE((*store)->StoreKeys({{3, a}}).ok());  // identical: fine
  absl::Status s = (*store)->StoreKeys({{5, a}, {3, b}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("never replaced"));
  EXPECT_EQ((*store)->StoreKeys({{6, "short"}}).code(),
            absl::StatusCode::kInvalidArgument);
  store->reset();
  store = AgentStateStore::Open(tmp.path());
  ASSERT_TRUE(store.ok());
  auto keys = (*store)->LoadKeys();
  ASSERT_TRUE(keys.ok());
  ASSERT_EQ(keys->size(), 2u);  // node 5 was rolled back with node 3's
  EXPECT_EQ((*keys)[0], std::make_pair(uint32_t{1}, b));
  EXPECT_EQ((*keys)[1], std::make_pair(uint32_t{3}, a));
}

// A database made before the keys table existed gets it at the next Open.
TEST(AgentStateStoreTest, OpenAddsTheKeysTableToAnOlderDatabase) {
  TempFolder tmp;
  {
    auto store = AgentStateStore::Open(tmp.path());
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Commit({Row(1, "features", 1.0, "x")}).ok());
  }
  SqlOn(tmp.path() + "/agent.db", "DROP TABLE keys");
  auto store = AgentStateStore::Open(tmp.path());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE((*store)->LoadKeys()->empty());
  EXPECT_TRUE((*store)->StoreKeys({{1, std::string(32, 'k')}}).ok());
  EXPECT_EQ(*(*store)->Count(), 1);
}

// Each row keeps the node's stream position (draws) across reopening; a
// database made before the column existed gets it (0 for its rows) at the
// next Open, and takes new rows with their positions.
TEST(AgentStateStoreTest, DrawsSurviveAndAreAddedToAnOlderDatabase) {
  TempFolder tmp;
  MemoRow a = Row(1, "features", 1.0, "x");
  a.draws = 17;
  {
    auto store = AgentStateStore::Open(tmp.path());
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Commit({a}).ok());
  }
  {
    auto store = AgentStateStore::Open(tmp.path());
    ASSERT_TRUE(store.ok());
    const std::vector<MemoRow> rows = ReadAll(**store);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].draws, 17u);
  }
  // The older schema: memo without draws.
  SqlOn(tmp.path() + "/agent.db", "ALTER TABLE memo DROP COLUMN draws");
  auto store = AgentStateStore::Open(tmp.path());
  ASSERT_TRUE(store.ok()) << store.status();
  MemoRow b = Row(2, "label", 0.5, "y");
  b.draws = 3;
  ASSERT_TRUE((*store)->Commit({b}).ok());
  const std::vector<MemoRow> rows = ReadAll(**store);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].draws, 0u);  // stored before the column existed
  EXPECT_EQ(rows[1].draws, 3u);
}

}  // namespace
}  // namespace ldpgraph::agent
