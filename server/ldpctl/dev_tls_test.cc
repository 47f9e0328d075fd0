#include "server/ldpctl/dev_tls.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "common/testing/temp_folder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::ldpctl {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

template <auto Free>
struct Deleter {
  template <typename T>
  void operator()(T* p) const {
    Free(p);
  }
};
using X509Ptr = std::unique_ptr<X509, Deleter<X509_free>>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using StorePtr = std::unique_ptr<X509_STORE, Deleter<X509_STORE_free>>;
using StoreCtxPtr =
    std::unique_ptr<X509_STORE_CTX, Deleter<X509_STORE_CTX_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO_free_all>>;
using BnPtr = std::unique_ptr<BIGNUM, Deleter<BN_free>>;
using SslCtxPtr = std::unique_ptr<SSL_CTX, Deleter<SSL_CTX_free>>;
using SslPtr = std::unique_ptr<SSL, Deleter<SSL_free>>;

const std::vector<std::string> kHosts = {"localhost", "127.0.0.1", "::1"};

X509Ptr ParseCert(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

PkeyPtr ParseKey(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return PkeyPtr(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
}

// X509_verify_cert of leaf against ca as the only trust anchor, for the
// TLS-server purpose: X509_V_OK or the error.
int Verify(X509* ca, X509* leaf) {
  StorePtr store(X509_STORE_new());
  X509_STORE_add_cert(store.get(), ca);
  StoreCtxPtr ctx(X509_STORE_CTX_new());
  X509_STORE_CTX_init(ctx.get(), store.get(), leaf, nullptr);
  X509_STORE_CTX_set_purpose(ctx.get(), X509_PURPOSE_SSL_SERVER);
  const int ok = X509_verify_cert(ctx.get());
  const int error = X509_STORE_CTX_get_error(ctx.get());
  return ok == 1 ? X509_V_OK : (error == X509_V_OK ? -1 : error);
}

std::string Serial(X509* cert) {
  BnPtr bn(ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr));
  char* hex = BN_bn2hex(bn.get());
  std::string s(hex);
  OPENSSL_free(hex);
  return s;
}

std::string CommonName(X509* cert) {
  char buf[256] = "";
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, buf,
                            sizeof(buf));
  return buf;
}

// Seconds from now to t (negative for the past).
long SecondsFromNow(const ASN1_TIME* t) {
  int days = 0, secs = 0;
  EXPECT_EQ(ASN1_TIME_diff(&days, &secs, nullptr, t), 1);
  return days * 86400L + secs;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(DevTlsTest, ServerCertificateVerifiesAgainstTheCaForTheHosts) {
  auto m = MakeDevTlsMaterial(kHosts);
  ASSERT_TRUE(m.ok()) << m.status();
  X509Ptr ca = ParseCert(m->ca_cert_pem);
  X509Ptr server = ParseCert(m->server_cert_pem);
  ASSERT_NE(ca, nullptr);
  ASSERT_NE(server, nullptr);

  EXPECT_EQ(Verify(ca.get(), server.get()), X509_V_OK);
  // From the subjectAltName: without one OpenSSL would fall back to the CN.
  EXPECT_EQ(X509_check_host(server.get(), "localhost", 0,
                            X509_CHECK_FLAG_NEVER_CHECK_SUBJECT, nullptr),
            1);
  EXPECT_EQ(X509_check_ip_asc(server.get(), "127.0.0.1", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(server.get(), "::1", 0), 1);
  EXPECT_EQ(X509_check_host(server.get(), "evil.example", 0, 0, nullptr), 0);
  EXPECT_EQ(X509_check_ip_asc(server.get(), "127.0.0.2", 0), 0);
  // The CA is no server certificate.
  EXPECT_NE(X509_check_host(ca.get(), "localhost", 0, 0, nullptr), 1);
}

TEST(DevTlsTest, ServerCertificateDoesNotVerifyAgainstAnotherCa) {
  auto a = MakeDevTlsMaterial(kHosts);
  auto b = MakeDevTlsMaterial(kHosts);
  ASSERT_TRUE(a.ok() && b.ok());
  X509Ptr other_ca = ParseCert(b->ca_cert_pem);
  X509Ptr server = ParseCert(a->server_cert_pem);
  EXPECT_NE(Verify(other_ca.get(), server.get()), X509_V_OK);
}

TEST(DevTlsTest, Profile) {
  auto m = MakeDevTlsMaterial(kHosts, 30);
  ASSERT_TRUE(m.ok()) << m.status();
  X509Ptr ca = ParseCert(m->ca_cert_pem);
  X509Ptr server = ParseCert(m->server_cert_pem);
  PkeyPtr ca_key = ParseKey(m->ca_key_pem);
  PkeyPtr server_key = ParseKey(m->server_key_pem);
  ASSERT_TRUE(ca && server && ca_key && server_key);

  EXPECT_THAT(m->ca_key_pem, StartsWith("-----BEGIN PRIVATE KEY-----\n"));
  EXPECT_THAT(m->server_key_pem, StartsWith("-----BEGIN PRIVATE KEY-----\n"));
  EXPECT_EQ(X509_check_private_key(ca.get(), ca_key.get()), 1);
  EXPECT_EQ(X509_check_private_key(server.get(), server_key.get()), 1);
  EXPECT_NE(X509_check_private_key(server.get(), ca_key.get()), 1);
  ERR_clear_error();

  for (EVP_PKEY* key : {ca_key.get(), server_key.get()}) {
    EXPECT_TRUE(EVP_PKEY_is_a(key, "EC"));
    char group[64] = "";
    size_t len = 0;
    ASSERT_EQ(EVP_PKEY_get_group_name(key, group, sizeof(group), &len), 1);
    EXPECT_STREQ(group, "prime256v1");
  }

  for (X509* cert : {ca.get(), server.get()}) {
    EXPECT_EQ(X509_get_version(cert), X509_VERSION_3);
    EXPECT_EQ(X509_get_signature_nid(cert), NID_ecdsa_with_SHA256);
    const ASN1_INTEGER* serial = X509_get0_serialNumber(cert);
    BnPtr bn(ASN1_INTEGER_to_BN(serial, nullptr));
    EXPECT_FALSE(BN_is_negative(bn.get()));
    EXPECT_FALSE(BN_is_zero(bn.get()));
    EXPECT_LE(BN_num_bits(bn.get()), 128);
    EXPECT_GE(BN_num_bits(bn.get()), 64);
    const long not_before = SecondsFromNow(X509_get0_notBefore(cert));
    const long not_after = SecondsFromNow(X509_get0_notAfter(cert));
    EXPECT_GE(not_before, -70);
    EXPECT_LE(not_before, -50);
    EXPECT_NEAR(not_after, 30 * 86400L, 10);
    EXPECT_NE(X509_get0_subject_key_id(cert), nullptr);
    EXPECT_NE(X509_get0_authority_key_id(cert), nullptr);
  }

  EXPECT_EQ(CommonName(ca.get()), "ldpgraph development CA");
  EXPECT_EQ(X509_check_issued(ca.get(), ca.get()), X509_V_OK);
  EXPECT_GE(X509_check_ca(ca.get()), 1);
  EXPECT_EQ(X509_get_pathlen(ca.get()), 0);
  EXPECT_EQ(X509_get_key_usage(ca.get()), KU_KEY_CERT_SIGN | KU_CRL_SIGN);

  EXPECT_EQ(CommonName(server.get()), "localhost");
  EXPECT_EQ(X509_check_issued(ca.get(), server.get()), X509_V_OK);
  EXPECT_EQ(X509_check_ca(server.get()), 0);
  EXPECT_EQ(X509_get_key_usage(server.get()), KU_DIGITAL_SIGNATURE);
  EXPECT_EQ(X509_get_extended_key_usage(server.get()), XKU_SSL_SERVER);
  EXPECT_EQ(ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(server.get()),
                                  X509_get0_subject_key_id(ca.get())),
            0);
  int critical = -1;
  BASIC_CONSTRAINTS* bc = static_cast<BASIC_CONSTRAINTS*>(X509_get_ext_d2i(
      ca.get(), NID_basic_constraints, &critical, nullptr));
  ASSERT_NE(bc, nullptr);
  EXPECT_EQ(critical, 1);
  BASIC_CONSTRAINTS_free(bc);
  ASN1_BIT_STRING* ku = static_cast<ASN1_BIT_STRING*>(
      X509_get_ext_d2i(server.get(), NID_key_usage, &critical, nullptr));
  ASSERT_NE(ku, nullptr);
  EXPECT_EQ(critical, 1);
  ASN1_BIT_STRING_free(ku);
}

TEST(DevTlsTest, LongFirstHostFallsBackToAFixedCommonName) {
  const std::string label(40, 'a');
  const std::string long_name = label + "." + label + ".example";
  auto m = MakeDevTlsMaterial({long_name, "127.0.0.1"});
  ASSERT_TRUE(m.ok()) << m.status();
  X509Ptr server = ParseCert(m->server_cert_pem);
  EXPECT_EQ(CommonName(server.get()), "ldpgraph curator");
  EXPECT_EQ(X509_check_host(server.get(), long_name.c_str(), 0, 0, nullptr),
            1);
  EXPECT_EQ(X509_check_ip_asc(server.get(), "::1", 0), 0);
}

TEST(DevTlsTest, TwoCallsGiveDifferentSerialsAndKeys) {
  auto a = MakeDevTlsMaterial({"localhost"});
  auto b = MakeDevTlsMaterial({"localhost"});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->ca_key_pem, b->ca_key_pem);
  EXPECT_NE(a->server_key_pem, b->server_key_pem);
  X509Ptr a_ca = ParseCert(a->ca_cert_pem), b_ca = ParseCert(b->ca_cert_pem);
  X509Ptr a_server = ParseCert(a->server_cert_pem),
          b_server = ParseCert(b->server_cert_pem);
  EXPECT_NE(Serial(a_ca.get()), Serial(b_ca.get()));
  EXPECT_NE(Serial(a_server.get()), Serial(b_server.get()));
  EXPECT_NE(Serial(a_ca.get()), Serial(a_server.get()));
}

TEST(DevTlsTest, InvalidArguments) {
  for (const auto& [hosts, days] :
       std::vector<std::pair<std::vector<std::string>, int>>{
           {{}, 825},
           {{""}, 825},
           {{"localhost", ""}, 825},
           {{"localhost"}, 0},
           {{"localhost"}, -1},
           {{"localhost"}, 826},
           {{"localhost,IP:10.0.0.1"}, 825},
           {{"bad host"}, 825},
           {{"-leading.example"}, 825},
           {{"[::1]"}, 825},
           {{"a..b"}, 825},
       }) {
    auto m = MakeDevTlsMaterial(hosts, days);
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument)
        << (hosts.empty() ? "(none)" : hosts.back()) << " " << days << ": "
        << m.status();
  }
  EXPECT_TRUE(MakeDevTlsMaterial({"*.example.com"}, 1).ok());
  EXPECT_TRUE(MakeDevTlsMaterial({"10.1.2.3", "fe80::1", "curator"}).ok());
}

TEST(DevTlsTest, WritesTheFourFilesWithPrivateKeys) {
  TempFolder dir;
  auto m = MakeDevTlsMaterial(kHosts);
  ASSERT_TRUE(m.ok()) << m.status();
  // A world-readable leftover key is replaced by a private one.
  { std::ofstream(dir.File("ca.key")) << "old"; }
  chmod(dir.File("ca.key").c_str(), 0644);
  ASSERT_TRUE(WriteDevTlsMaterial(*m, dir.path()).ok());

  const struct {
    const char* name;
    const std::string& contents;
    mode_t mode;
  } files[] = {{"ca.pem", m->ca_cert_pem, 0644},
               {"ca.key", m->ca_key_pem, 0600},
               {"curator.pem", m->server_cert_pem, 0644},
               {"curator.key", m->server_key_pem, 0600}};
  const mode_t umask_now = umask(022);
  umask(umask_now);
  for (const auto& f : files) {
    SCOPED_TRACE(f.name);
    struct stat st;
    ASSERT_EQ(stat(dir.File(f.name).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, f.mode & ~umask_now);
    if (f.mode == 0600) {
      EXPECT_EQ(st.st_mode & 0077, 0u);
    }
    EXPECT_EQ(ReadFile(dir.File(f.name)), f.contents);
  }
}

TEST(DevTlsTest, WritingIntoAMissingFolderNamesThePath) {
  TempFolder dir(TempFolder::kLeaveMissing);
  auto m = MakeDevTlsMaterial(kHosts);
  ASSERT_TRUE(m.ok()) << m.status();
  absl::Status s = WriteDevTlsMaterial(*m, dir.path());
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr(dir.path()));
}

// --- a real TLS 1.3 handshake over a socketpair ------------------------------

// Server: the server certificate and key. Client: trusts trusted_ca_pem only
// and checks the name "localhost". True iff the client completed the
// handshake and read the server's byte.
bool Handshake(const DevTlsMaterial& server_material,
               const std::string& trusted_ca_pem) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return false;

  SslCtxPtr server_ctx(SSL_CTX_new(TLS_server_method()));
  X509Ptr server_cert = ParseCert(server_material.server_cert_pem);
  PkeyPtr server_key = ParseKey(server_material.server_key_pem);
  EXPECT_EQ(SSL_CTX_use_certificate(server_ctx.get(), server_cert.get()), 1);
  EXPECT_EQ(SSL_CTX_use_PrivateKey(server_ctx.get(), server_key.get()), 1);

  SslCtxPtr client_ctx(SSL_CTX_new(TLS_client_method()));
  X509Ptr ca = ParseCert(trusted_ca_pem);
  EXPECT_EQ(X509_STORE_add_cert(SSL_CTX_get_cert_store(client_ctx.get()),
                                ca.get()),
            1);
  SSL_CTX_set_verify(client_ctx.get(), SSL_VERIFY_PEER, nullptr);

  bool server_ok = false;
  std::thread server_thread([&] {
    SslPtr ssl(SSL_new(server_ctx.get()));
    SSL_set_fd(ssl.get(), fds[0]);
    if (SSL_accept(ssl.get()) == 1) {
      server_ok = SSL_write(ssl.get(), "x", 1) == 1;
      SSL_shutdown(ssl.get());
    }
    shutdown(fds[0], SHUT_RDWR);
    ERR_clear_error();  // the queue is per thread
  });

  bool client_ok = false;
  {
    SslPtr ssl(SSL_new(client_ctx.get()));
    SSL_set_fd(ssl.get(), fds[1]);
    SSL_set1_host(ssl.get(), "localhost");
    SSL_set_tlsext_host_name(ssl.get(), "localhost");
    if (SSL_connect(ssl.get()) == 1 &&
        SSL_get_verify_result(ssl.get()) == X509_V_OK) {
      char c = 0;
      client_ok = SSL_read(ssl.get(), &c, 1) == 1 && c == 'x';
    }
    shutdown(fds[1], SHUT_RDWR);
    ERR_clear_error();
  }
  server_thread.join();
  close(fds[0]);
  close(fds[1]);
  return client_ok && server_ok;
}

TEST(DevTlsTest, TlsHandshake) {
  signal(SIGPIPE, SIG_IGN);  // a failed handshake may write to a closed peer
  auto m = MakeDevTlsMaterial(kHosts);
  auto other = MakeDevTlsMaterial(kHosts);
  ASSERT_TRUE(m.ok() && other.ok());
  EXPECT_TRUE(Handshake(*m, m->ca_cert_pem));
  EXPECT_FALSE(Handshake(*m, other->ca_cert_pem));
}

}  // namespace
}  // namespace ldpgraph::ldpctl
