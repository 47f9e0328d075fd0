#include "server/store/local_postgres.h"

#include <arpa/inet.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/hex.h"
#include "common/testing/temp_folder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::store {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

struct ConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using Conn = std::unique_ptr<PGconn, ConnDeleter>;

// A connection as a client makes one: url() and a password. The error
// message when it fails.
absl::StatusOr<Conn> ConnectTo(const std::string& url,
                               const std::string& password) {
  const char* keys[] = {"dbname", "password", "connect_timeout", nullptr};
  const char* values[] = {url.c_str(), password.c_str(), "10", nullptr};
  Conn c(PQconnectdbParams(keys, values, /*expand_dbname=*/1));
  if (PQstatus(c.get()) != CONNECTION_OK) {
    return absl::UnavailableError(PQerrorMessage(c.get()));
  }
  return c;
}

absl::StatusOr<Conn> ConnectAsRole(const LocalPostgres& pg) {
  absl::StatusOr<std::string> pw = ReadFileToString(pg.password_file());
  if (!pw.ok()) return pw.status();
  if (!pw->empty() && pw->back() == '\n') pw->pop_back();
  return ConnectTo(pg.url(), *pw);
}

// Runs sql; the first column of its rows (none for a command).
absl::StatusOr<std::vector<std::string>> Query(PGconn* c,
                                               const std::string& sql) {
  PGresult* r = PQexec(c, sql.c_str());
  const ExecStatusType st = PQresultStatus(r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    const std::string message = PQerrorMessage(c);
    PQclear(r);
    return absl::InternalError(message);
  }
  std::vector<std::string> rows;
  for (int i = 0; i < PQntuples(r); ++i) rows.emplace_back(PQgetvalue(r, i, 0));
  PQclear(r);
  return rows;
}

bool ProcessExists(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

// --- Options rejected before anything runs ----------------------------------

TEST(LocalPostgresOptionsTest, RejectsAnEmptyDir) {
  LocalPostgres::Options o;
  absl::StatusOr<std::unique_ptr<LocalPostgres>> pg = LocalPostgres::Start(o);
  ASSERT_EQ(pg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pg.status().message(), HasSubstr("Options::dir is empty"));
}

TEST(LocalPostgresOptionsTest, RejectsAUserThatIsNotAPlainIdentifier) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  LocalPostgres::Options o;
  o.dir = tmp.path();
  o.user = "Robert'); DROP";
  absl::StatusOr<std::unique_ptr<LocalPostgres>> pg = LocalPostgres::Start(o);
  ASSERT_EQ(pg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pg.status().message(), HasSubstr("Options::user"));
  EXPECT_FALSE(std::filesystem::exists(tmp.path()));
}

TEST(LocalPostgresOptionsTest, RejectsTheSuperuserAsTheRole) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  LocalPostgres::Options o;
  o.dir = tmp.path();
  o.user = "postgres";
  absl::StatusOr<std::unique_ptr<LocalPostgres>> pg = LocalPostgres::Start(o);
  ASSERT_EQ(pg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pg.status().message(), HasSubstr("not be the superuser"));
}

TEST(LocalPostgresOptionsTest, RejectsADatabaseThatIsNotAPlainIdentifier) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  LocalPostgres::Options o;
  o.dir = tmp.path();
  o.database = "";
  absl::StatusOr<std::unique_ptr<LocalPostgres>> pg = LocalPostgres::Start(o);
  ASSERT_EQ(pg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pg.status().message(), HasSubstr("Options::database"));
}

TEST(LocalPostgresOptionsTest, RejectsAPortOutOfRange) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  LocalPostgres::Options o;
  o.dir = tmp.path();
  o.port = 65536;
  absl::StatusOr<std::unique_ptr<LocalPostgres>> pg = LocalPostgres::Start(o);
  ASSERT_EQ(pg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pg.status().message(), HasSubstr("65536 is outside 0..65535"));
}

TEST(LocalPostgresOptionsTest, NamesThePackageWhenTheBinariesAreMissing) {
  TempFolder tmp;
  LocalPostgres::Options o;
  o.dir = tmp.File("cluster");
  o.bin_dir = tmp.path();  // no initdb in it
  absl::StatusOr<std::unique_ptr<LocalPostgres>> pg = LocalPostgres::Start(o);
  ASSERT_EQ(pg.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(pg.status().message(), HasSubstr(tmp.path()));
  EXPECT_THAT(pg.status().message(),
              HasSubstr("apt-get install postgresql-15"));
}

TEST(LocalPostgresOptionsTest, RefusesADataFolderThatIsNotACluster) {
  TempFolder tmp;
  ASSERT_TRUE(MakeDirs(tmp.File("data")).ok());
  ASSERT_TRUE(WriteFileAtomically(tmp.File("data/notes.txt"), "mine\n").ok());
  LocalPostgres::Options o;
  o.dir = tmp.path();
  absl::StatusOr<std::unique_ptr<LocalPostgres>> pg = LocalPostgres::Start(o);
  ASSERT_EQ(pg.status().code(), absl::StatusCode::kFailedPrecondition)
      << pg.status();
  EXPECT_THAT(pg.status().message(), HasSubstr("no PG_VERSION"));
  EXPECT_TRUE(std::filesystem::exists(tmp.File("data/notes.txt")));
}

TEST(LocalPostgresOptionsTest, AsRootNamesTheFolderItsUserCannotEnter) {
  if (::geteuid() != 0) GTEST_SKIP() << "only root switches users";
  TempFolder tmp;
  const std::string private_dir = tmp.File("private");
  ASSERT_TRUE(MakeDirs(private_dir, 0700).ok());
  ASSERT_EQ(::chmod(private_dir.c_str(), 0700), 0);
  LocalPostgres::Options o;
  o.dir = private_dir + "/cluster";
  absl::StatusOr<std::unique_ptr<LocalPostgres>> pg = LocalPostgres::Start(o);
  ASSERT_EQ(pg.status().code(), absl::StatusCode::kFailedPrecondition)
      << pg.status();
  EXPECT_THAT(pg.status().message(),
              HasSubstr(private_dir + " (mode 0700, owner uid 0) is not "
                                      "searchable by it"));
  EXPECT_THAT(pg.status().message(), HasSubstr("initdb"));
}

// --- Real servers
// --------------------------------------------------------------
//
// Two servers for the whole suite (an initdb each): `a_` with fsync, in a
// short folder (its socket beside the cluster), and `b_` without fsync, in a
// folder whose path is too long for a socket. Tests that stop or crash one
// leave it running again.

class LocalPostgresTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string tmpl =
        absl::StrCat(::testing::TempDir(), "/ldpgraph_pg_XXXXXX");
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    // mkdtemp's 0700 would keep the server's user out when we are root.
    ASSERT_EQ(::chmod(tmpl.c_str(), 0755), 0);
    root_ = new std::string(tmpl);

    LocalPostgres::Options a;
    a.dir = *root_ + "/a";
    absl::StatusOr<std::unique_ptr<LocalPostgres>> started =
        LocalPostgres::Start(a);
    ASSERT_TRUE(started.ok()) << started.status();
    a_ = started->release();

    LocalPostgres::Options b;
    b.dir = LongDir();
    b.fsync = false;
    started = LocalPostgres::Start(b);
    ASSERT_TRUE(started.ok()) << started.status();
    b_ = started->release();
  }

  static void TearDownTestSuite() {
    delete a_;
    delete b_;
    a_ = b_ = nullptr;
    if (root_ != nullptr) {
      std::error_code ec;
      std::filesystem::remove_all(*root_, ec);
      delete root_;
      root_ = nullptr;
    }
  }

  static std::string LongDir() {
    return absl::StrCat(*root_, "/", std::string(100, 'l'), "/b");
  }

  void SetUp() override {
    ASSERT_NE(a_, nullptr) << "the suite's servers did not start";
    ASSERT_NE(b_, nullptr) << "the suite's servers did not start";
    for (LocalPostgres* pg : {a_, b_}) {
      if (!pg->running()) {
        ASSERT_TRUE(pg->Restart().ok());
      }
    }
  }

  static std::string* root_;
  static LocalPostgres* a_;
  static LocalPostgres* b_;
};

std::string* LocalPostgresTest::root_ = nullptr;
LocalPostgres* LocalPostgresTest::a_ = nullptr;
LocalPostgres* LocalPostgresTest::b_ = nullptr;

TEST_F(LocalPostgresTest, ServesTheRoleWithThePasswordOfItsFile) {
  EXPECT_EQ(
      a_->url(),
      absl::StrCat("postgres://ldpgraph@127.0.0.1:", a_->port(), "/ldpgraph"));
  EXPECT_GT(a_->port(), 0);
  EXPECT_GT(a_->pid(), 0);
  EXPECT_TRUE(a_->running());

  struct stat st;
  ASSERT_EQ(::stat(a_->password_file().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  absl::StatusOr<std::string> text = ReadFileToString(a_->password_file());
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, a_->password() + "\n");
  EXPECT_EQ(a_->password().size(), 32u);
  EXPECT_TRUE(FromHex(a_->password()).ok());
  EXPECT_FALSE(absl::StrContains(a_->url(), a_->password()));

  absl::StatusOr<Conn> c = ConnectAsRole(*a_);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(Query(c->get(),
                    "CREATE TABLE notes (id int PRIMARY KEY, "
                    "body text NOT NULL)")
                  .ok());
  ASSERT_TRUE(
      Query(c->get(), "INSERT INTO notes VALUES (1, 'one'), (2, 'two')").ok());
  absl::StatusOr<std::vector<std::string>> rows =
      Query(c->get(), "SELECT body FROM notes ORDER BY id");
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(*rows, ElementsAre("one", "two"));
  rows = Query(c->get(), "SELECT current_user || ' ' || current_database()");
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(*rows, ElementsAre("ldpgraph ldpgraph"));
}

TEST_F(LocalPostgresTest, RefusesAWrongPassword) {
  std::string wrong = a_->password();
  wrong[0] = wrong[0] == '0' ? '1' : '0';
  absl::StatusOr<Conn> c = ConnectTo(a_->url(), wrong);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(
      c.status().message(),
      HasSubstr("password authentication failed for user \"ldpgraph\""));
  // Nor is the superuser let in with the role's password.
  c = ConnectTo(
      absl::StrCat("postgres://postgres@127.0.0.1:", a_->port(), "/postgres"),
      a_->password());
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(),
              HasSubstr("password authentication failed"));
}

TEST_F(LocalPostgresTest, RunsAsAnUnprivilegedUserWithTheSettingsAsked) {
  struct stat st;
  ASSERT_EQ(::stat((a_->dir() + "/data").c_str(), &st), 0);
  if (::geteuid() == 0) {
    EXPECT_TRUE(a_->os_user() == "postgres" || a_->os_user() == "nobody")
        << a_->os_user();
    const passwd* pw = ::getpwnam(a_->os_user().c_str());
    ASSERT_NE(pw, nullptr);
    EXPECT_EQ(st.st_uid, pw->pw_uid);
    EXPECT_NE(st.st_uid, 0u);
  } else {
    EXPECT_EQ(st.st_uid, ::geteuid());
  }
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  absl::StatusOr<Conn> c = ConnectAsRole(*a_);
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<std::vector<std::string>> rows =
      Query(c->get(),
            "SELECT current_setting('fsync') || ' ' || "
            "current_setting('max_connections') || ' ' || "
            "current_setting('shared_buffers') || ' ' || "
            "current_setting('server_encoding') || ' ' || "
            "current_setting('lc_collate') || ' ' || "
            "current_setting('password_encryption')");
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(*rows, ElementsAre("on 200 128MB UTF8 C scram-sha-256"));
  // The role's password is stored as a SCRAM verifier (only the superuser
  // may read pg_authid; the role may see its own rolcanlogin).
  rows = Query(c->get(),
               "SELECT rolcanlogin::text || ' ' || rolcreatedb::text || ' ' "
               "|| rolsuper::text FROM pg_roles WHERE rolname = current_user");
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(*rows, ElementsAre("true true false"));
}

TEST_F(LocalPostgresTest, AcceptsConnectionsOnItsUnixSocket) {
  EXPECT_EQ(a_->socket_dir(), a_->dir());
  const std::string conninfo =
      absl::StrCat("host=", a_->socket_dir(), " port=", a_->port(),
                   " user=ldpgraph dbname=ldpgraph password=", a_->password());
  Conn c(PQconnectdb(conninfo.c_str()));
  ASSERT_EQ(PQstatus(c.get()), CONNECTION_OK) << PQerrorMessage(c.get());
  absl::StatusOr<std::vector<std::string>> rows =
      Query(c.get(), "SELECT inet_server_addr() IS NULL");  // NULL: a socket
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(*rows, ElementsAre("t"));
}

TEST_F(LocalPostgresTest, KillThenRestartKeepsCommittedRowsOnly) {
  absl::StatusOr<Conn> writer = ConnectAsRole(*a_);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE(
      Query(writer->get(), "CREATE TABLE crash (id int PRIMARY KEY)").ok());
  ASSERT_TRUE(Query(writer->get(), "INSERT INTO crash VALUES (1)").ok());
  absl::StatusOr<Conn> open_txn = ConnectAsRole(*a_);
  ASSERT_TRUE(open_txn.ok()) << open_txn.status();
  ASSERT_TRUE(Query(open_txn->get(), "BEGIN").ok());
  ASSERT_TRUE(Query(open_txn->get(), "INSERT INTO crash VALUES (2)").ok());

  const pid_t old_pid = a_->pid();
  const int port = a_->port();
  ASSERT_TRUE(a_->Kill().ok());
  EXPECT_EQ(a_->pid(), -1);
  EXPECT_FALSE(a_->running());
  EXPECT_FALSE(ProcessExists(old_pid));
  EXPECT_FALSE(Query(writer->get(), "SELECT 1").ok());  // its backend died
  EXPECT_EQ(PQping(absl::StrCat("host=127.0.0.1 port=", port).c_str()),
            PQPING_NO_RESPONSE);
  EXPECT_TRUE(a_->Kill().ok());  // again: nothing to do
  EXPECT_TRUE(a_->Stop().ok());  // down already

  ASSERT_TRUE(a_->Restart().ok());
  EXPECT_EQ(a_->port(), port);
  EXPECT_GT(a_->pid(), 0);
  EXPECT_TRUE(a_->running());
  absl::StatusOr<Conn> reader = ConnectAsRole(*a_);
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<std::vector<std::string>> rows =
      Query(reader->get(), "SELECT id::text FROM crash ORDER BY id");
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(*rows, ElementsAre("1"));
  EXPECT_THAT(a_->LogTail(), HasSubstr("database system is ready"));
}

TEST_F(LocalPostgresTest, TwoAtOnceHaveTheirOwnPortsAndData) {
  EXPECT_TRUE(a_->running());
  EXPECT_TRUE(b_->running());
  EXPECT_NE(a_->port(), b_->port());
  EXPECT_NE(a_->dir(), b_->dir());
  EXPECT_NE(a_->password(), b_->password());

  absl::StatusOr<Conn> on_a = ConnectAsRole(*a_);
  absl::StatusOr<Conn> on_b = ConnectAsRole(*b_);
  ASSERT_TRUE(on_a.ok()) << on_a.status();
  ASSERT_TRUE(on_b.ok()) << on_b.status();
  ASSERT_TRUE(Query(on_b->get(), "CREATE TABLE only_b (x int)").ok());
  absl::StatusOr<std::vector<std::string>> rows =
      Query(on_a->get(), "SELECT count(*) FROM only_b");
  ASSERT_FALSE(rows.ok());
  EXPECT_THAT(rows.status().message(), HasSubstr("does not exist"));
  // Each password opens its own server only.
  EXPECT_FALSE(ConnectTo(b_->url(), a_->password()).ok());
  rows = Query(on_b->get(), "SELECT current_setting('fsync')");
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(*rows, ElementsAre("off"));
}

TEST_F(LocalPostgresTest, ALongFolderGetsAShortSocketFolder) {
  EXPECT_GT(b_->dir().size(), 92u);
  EXPECT_THAT(b_->socket_dir(), StartsWith("/tmp/ldpgraph-pg-"));
  EXPECT_TRUE(std::filesystem::exists(
      absl::StrCat(b_->socket_dir(), "/.s.PGSQL.", b_->port())));
  const std::string conninfo =
      absl::StrCat("host=", b_->socket_dir(), " port=", b_->port(),
                   " user=ldpgraph dbname=ldpgraph password=", b_->password());
  Conn c(PQconnectdb(conninfo.c_str()));
  EXPECT_EQ(PQstatus(c.get()), CONNECTION_OK) << PQerrorMessage(c.get());
}

TEST_F(LocalPostgresTest, RestartOnATakenPortFailsNamingTheLog) {
  ASSERT_TRUE(b_->Stop().ok());
  // Another process takes the port while the server is down.
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  // The server's closed connections leave the port in TIME_WAIT, which only
  // SO_REUSEADDR binds past (as postgres does).
  const int one = 1;
  ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(b_->port());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0)
      << std::strerror(errno);
  ASSERT_EQ(::listen(fd, 1), 0);
  const absl::Status taken = b_->Restart();
  ::close(fd);
  EXPECT_EQ(taken.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(taken.message(), HasSubstr("Address already in use"));
  EXPECT_THAT(taken.message(), HasSubstr("postgres.log"));
  EXPECT_THAT(taken.message(), HasSubstr(absl::StrCat("-p ", b_->port())));
  EXPECT_EQ(b_->pid(), -1);

  ASSERT_TRUE(b_->Restart().ok());
  absl::StatusOr<Conn> c = ConnectAsRole(*b_);
  EXPECT_TRUE(c.ok()) << c.status();
}

TEST_F(LocalPostgresTest, StopIsIdempotentAndReuseStartsTheSameCluster) {
  absl::StatusOr<Conn> c = ConnectAsRole(*b_);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(Query(c->get(), "CREATE TABLE kept (x text)").ok());
  ASSERT_TRUE(Query(c->get(), "INSERT INTO kept VALUES ('still here')").ok());
  c->reset();

  const pid_t pid = b_->pid();
  const int port = b_->port();
  const std::string password = b_->password();
  const std::string socket_dir = b_->socket_dir();
  ASSERT_TRUE(b_->Stop().ok());
  EXPECT_TRUE(b_->Stop().ok());
  EXPECT_EQ(b_->pid(), -1);
  EXPECT_FALSE(ProcessExists(pid));
  EXPECT_THAT(b_->LogTail(), HasSubstr("database system is shut down"));

  // The destructor stops a running server, removes the socket folder it made
  // under /tmp, and keeps the cluster.
  ASSERT_TRUE(b_->Restart().ok());
  const pid_t restarted = b_->pid();
  delete b_;
  b_ = nullptr;
  EXPECT_FALSE(ProcessExists(restarted));
  EXPECT_EQ(PQping(absl::StrCat("host=127.0.0.1 port=", port).c_str()),
            PQPING_NO_RESPONSE);
  EXPECT_FALSE(std::filesystem::exists(socket_dir));
  EXPECT_TRUE(std::filesystem::exists(LongDir() + "/data/PG_VERSION"));

  LocalPostgres::Options o;
  o.dir = LongDir();
  o.fsync = false;
  absl::StatusOr<std::unique_ptr<LocalPostgres>> again =
      LocalPostgres::Start(o);
  ASSERT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr("Options::reuse"));

  o.reuse = true;
  o.port = port;
  again = LocalPostgres::Start(o);
  ASSERT_TRUE(again.ok()) << again.status();
  b_ = again->release();
  EXPECT_EQ(b_->password(), password);
  EXPECT_EQ(b_->port(), port);
  c = ConnectAsRole(*b_);
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<std::vector<std::string>> rows =
      Query(c->get(), "SELECT x FROM kept");
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(*rows, ElementsAre("still here"));
}

}  // namespace
}  // namespace ldpgraph::store
