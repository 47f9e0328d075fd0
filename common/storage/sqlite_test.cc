// Tests for the SQLite wrapper: the status mapping, binds and column
// readers, and transactions that roll back on failure.
#include "common/storage/sqlite.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/testing/temp_folder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::sqlite {
namespace {

using ::testing::HasSubstr;

TEST(SqliteErrorTest, MapsThePrimaryCode) {
  EXPECT_EQ(SqliteError(SQLITE_FULL, nullptr, "p", "op").code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(SqliteError(SQLITE_BUSY, nullptr, "p", "op").code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(SqliteError(SQLITE_BUSY_SNAPSHOT, nullptr, "p", "op").code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(SqliteError(SQLITE_LOCKED, nullptr, "p", "op").code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(SqliteError(SQLITE_CORRUPT, nullptr, "p", "op").code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(SqliteError(SQLITE_ERROR, nullptr, "p", "op").code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(SqliteError(SQLITE_IOERR_WRITE, nullptr, "p", "op").code(),
            absl::StatusCode::kInternal);
}

TEST(SqliteErrorTest, NamesThePathTheOperationAndSqlitesWords) {
  const absl::Status s =
      SqliteError(SQLITE_FULL, nullptr, "/data/x.db", "storing rows");
  EXPECT_THAT(s.message(), HasSubstr("/data/x.db"));
  EXPECT_THAT(s.message(), HasSubstr("storing rows"));
  EXPECT_THAT(s.message(), HasSubstr(sqlite3_errstr(SQLITE_FULL)));
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("SQLite code ", SQLITE_FULL)));
}

class SqliteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = tmp_.File("t.db");
    auto db = OpenDatabase(path_);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
    ASSERT_TRUE(Exec(db_.get(), path_,
                     "CREATE TABLE t(i INTEGER, d REAL, b BLOB, s TEXT)",
                     "create")
                    .ok());
  }

  int64_t Count() {
    auto n = QueryInt(db_.get(), path_, "SELECT COUNT(*) FROM t", "count");
    EXPECT_TRUE(n.ok()) << n.status();
    return n.value_or(-1);
  }

  TempFolder tmp_{TempFolder::kCreate};
  std::string path_;
  Db db_;
};

TEST_F(SqliteTest, BindsAndReadsEveryType) {
  auto insert =
      Prepare(db_.get(), path_, "INSERT INTO t VALUES(?1, ?2, ?3, ?4)");
  ASSERT_TRUE(insert.ok()) << insert.status();
  const std::string blob("a\0b", 3);
  {
    ScopedReset reset(insert->get());
    ASSERT_TRUE(Bind(db_.get(), path_, "insert", insert->get(), int64_t{-7},
                     2.5, Blob{blob}, Text{"text"})
                    .ok());
    ASSERT_TRUE(StepDone(db_.get(), path_, insert->get(), "insert").ok());
  }
  {
    // Empty views bind empty values, not NULL.
    ScopedReset reset(insert->get());
    ASSERT_TRUE(Bind(db_.get(), path_, "insert", insert->get(), int64_t{0},
                     0.0, Blob{}, Text{})
                    .ok());
    ASSERT_TRUE(StepDone(db_.get(), path_, insert->get(), "insert").ok());
  }
  auto select = Prepare(db_.get(), path_,
                        "SELECT i, d, b, s, b IS NULL FROM t ORDER BY i");
  ASSERT_TRUE(select.ok());
  sqlite3_stmt* s = select->get();
  ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int64(s, 0), -7);
  EXPECT_EQ(ColumnBlob(s, 2), blob);
  EXPECT_EQ(ColumnView(s, 2), blob);
  EXPECT_EQ(ColumnText(s, 3), "text");
  ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
  EXPECT_EQ(ColumnBlob(s, 2), "");
  EXPECT_EQ(ColumnText(s, 3), "");
  EXPECT_EQ(sqlite3_column_int(s, 4), 0);
  EXPECT_EQ(sqlite3_step(s), SQLITE_DONE);
}

TEST_F(SqliteTest, QueriesReadTheFirstColumn) {
  auto mode = QueryText(db_.get(), path_, "PRAGMA journal_mode", "mode");
  ASSERT_TRUE(mode.ok());
  EXPECT_EQ(*mode, "delete");
  auto none = QueryText(db_.get(), path_, "SELECT s FROM t", "none");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, "");
  EXPECT_EQ(QueryInt(db_.get(), path_, "SELECT i FROM t", "none").status().code(),
            absl::StatusCode::kInternal);
}

TEST_F(SqliteTest, BadSqlIsInternalNamingTheStatement) {
  auto stmt = Prepare(db_.get(), path_, "SELECT nope FROM t");
  ASSERT_FALSE(stmt.ok());
  EXPECT_EQ(stmt.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(stmt.status().message(), HasSubstr("SELECT nope FROM t"));
  EXPECT_THAT(stmt.status().message(), HasSubstr("no such column"));
  EXPECT_THAT(stmt.status().message(), HasSubstr(path_));
}

TEST_F(SqliteTest, TransactionCommitsOrRollsBack) {
  EXPECT_TRUE(InTransaction(db_.get(), path_, "one", [&] {
                return Exec(db_.get(), path_, "INSERT INTO t(i) VALUES(1)",
                            "insert");
              }).ok());
  EXPECT_EQ(Count(), 1);
  const absl::Status failed = InTransaction(db_.get(), path_, "two", [&] {
    absl::Status s =
        Exec(db_.get(), path_, "INSERT INTO t(i) VALUES(2)", "insert");
    return s.ok() ? absl::AbortedError("body failed") : s;
  });
  EXPECT_EQ(failed.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(Count(), 1);
  EXPECT_NE(sqlite3_get_autocommit(db_.get()), 0);
}

TEST_F(SqliteTest, TransactionWithPreparedStatements) {
  auto begin = Prepare(db_.get(), path_, "BEGIN IMMEDIATE");
  auto commit = Prepare(db_.get(), path_, "COMMIT");
  auto rollback = Prepare(db_.get(), path_, "ROLLBACK");
  ASSERT_TRUE(begin.ok() && commit.ok() && rollback.ok());
  const TransactionStatements statements{begin->get(), commit->get(),
                                         rollback->get()};
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(InTransaction(db_.get(), path_, "insert", statements, [&] {
                  return Exec(db_.get(), path_, "INSERT INTO t(i) VALUES(1)",
                              "insert");
                }).ok());
  }
  EXPECT_FALSE(InTransaction(db_.get(), path_, "fail", statements, [] {
                 return absl::InternalError("no");
               }).ok());
  EXPECT_EQ(Count(), 3);
  EXPECT_NE(sqlite3_get_autocommit(db_.get()), 0);
}

TEST_F(SqliteTest, ALockHeldElsewhereIsUnavailable) {
  auto other = OpenDatabase(path_);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(Exec(other->get(), path_, "BEGIN EXCLUSIVE", "lock").ok());
  sqlite3_busy_timeout(db_.get(), 10);
  const absl::Status s = InTransaction(db_.get(), path_, "writing", [&] {
    return Exec(db_.get(), path_, "INSERT INTO t(i) VALUES(1)", "insert");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("writing: begin"));
  EXPECT_THAT(s.message(), HasSubstr(path_));
  ASSERT_TRUE(Exec(other->get(), path_, "ROLLBACK", "unlock").ok());
  EXPECT_EQ(Count(), 0);
}

TEST(SqliteOpenTest, AMissingDirectoryIsInternalNamingThePath) {
  const std::string path = "/nonexistent-ldpgraph-dir/x.db";
  auto db = OpenDatabase(path);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(db.status().message(), HasSubstr(path));
}

}  // namespace
}  // namespace ldpgraph::sqlite
