// Tests for the answer log's blob format: the encoder's exact bytes, round
// trips, and DATA_LOSS for every malformed blob, never a read outside it.
#include "server/store/answer_log.h"

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::store {
namespace {

using ::testing::HasSubstr;

struct Answer {
  uint32_t node;
  bool refusal;
  std::string payload;
  int64_t unix_ms;
};

std::string Encode(const std::vector<Answer>& answers,
                   std::vector<size_t>* offsets = nullptr) {
  std::string blob;
  StartLogBlob(blob);
  int64_t previous = 0;
  for (const Answer& a : answers) {
    const size_t offset =
        EncodeEntry(blob, a.node, a.refusal, a.payload, a.unix_ms, previous);
    if (offsets != nullptr) offsets->push_back(offset);
    previous = a.unix_ms;
  }
  FinishLogBlob(blob, static_cast<uint32_t>(answers.size()));
  return blob;
}

absl::StatusOr<std::vector<Answer>> Decode(const std::string& blob) {
  std::vector<Answer> out;
  const absl::Status status = LogReader(blob).Read([&](const LogEntry& e) {
    out.push_back(Answer{e.node, e.refusal, blob.substr(e.offset, e.length),
                         e.unix_ms});
  });
  if (!status.ok()) return status;
  return out;
}

// The bytes of format 1 are what stores written by earlier builds hold.
TEST(AnswerLogTest, EncodesFormatOneExactly) {
  const std::string blob =
      Encode({{1, false, "aa", 1001}, {2, true, "bbb", 1002}});
  EXPECT_EQ(absl::BytesToHexString(blob),
            "01"        // the format
            "02000000"  // two entries
            "02"        // node 1 << 1
            "d20f"      // zigzag(1001) = 2002
            "02" "6161"
            "05"        // node 2 << 1 | refusal
            "02"        // zigzag(1)
            "03" "626262");
}

TEST(AnswerLogTest, RoundTripsEveryField) {
  std::mt19937_64 rng(3);
  std::vector<Answer> answers;
  const std::vector<int64_t> stamps = {
      0, 1, -1, std::numeric_limits<int64_t>::max(),
      std::numeric_limits<int64_t>::min(), 1700000000000, 5};
  for (size_t i = 0; i < 200; ++i) {
    Answer a;
    a.node = i < 4 ? std::vector<uint32_t>{0, 127, 128, UINT32_MAX}[i]
                   : static_cast<uint32_t>(rng());
    a.refusal = rng() % 3 == 0;
    a.payload = std::string(rng() % 300, static_cast<char>(rng()));
    a.unix_ms = i < stamps.size() ? stamps[i]
                                  : static_cast<int64_t>(rng() % 4000000000000);
    answers.push_back(std::move(a));
  }
  std::vector<size_t> offsets;
  const std::string blob = Encode(answers, &offsets);
  auto decoded = Decode(blob);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->size(), answers.size());
  for (size_t i = 0; i < answers.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ((*decoded)[i].node, answers[i].node);
    EXPECT_EQ((*decoded)[i].refusal, answers[i].refusal);
    EXPECT_EQ((*decoded)[i].payload, answers[i].payload);
    EXPECT_EQ((*decoded)[i].unix_ms, answers[i].unix_ms);
    EXPECT_EQ(blob.substr(offsets[i], answers[i].payload.size()),
              answers[i].payload);
  }
}

TEST(AnswerLogTest, AnEntryNeverExceedsItsOverhead) {
  const std::string blob =
      Encode({{UINT32_MAX, true, "", std::numeric_limits<int64_t>::min()}});
  EXPECT_LE(blob.size(), kLogHeaderBytes + kMaxEntryOverhead);
  EXPECT_TRUE(Decode(blob).ok());
}

// Every fault of a blob is DATA_LOSS with a description, found before any
// read outside the blob.
TEST(AnswerLogTest, MalformedBlobsAreDataLoss) {
  const std::vector<std::pair<std::string, std::string>> faults = {
      {"", "shorter than the header"},
      {"01020000", "shorter than the header"},
      {"02010000000200", "unknown format 2"},
      {"0100000000", "no entries"},
      {"010100000082", "bad varint"},                  // truncated varint
      {"0101000000020005616161", "runs past the end"},
      {"01010000000200016100", "1 bytes after the last"},
      {"010200000002000161", "entry 1 of 2: bad varint"},  // count too high
      {"0101000000808080808020000161", "out of range"},  // node past 2^32
      // Eleven bytes, or a tenth byte past 64 bits: overlong.
      {"01010000008280808080808080808001000161", "bad varint"},
      {"01010000008280808080808080800200000161", "bad varint"},
  };
  for (const auto& [hex, what] : faults) {
    SCOPED_TRACE(hex);
    const std::string blob = absl::HexStringToBytes(hex);
    // Copied into a buffer of exactly its size, so that a sanitizer sees
    // any read past it.
    auto status = Decode(std::string(blob.data(), blob.size())).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_THAT(status.message(), HasSubstr(what));
  }
}

TEST(AnswerLogTest, EveryTruncationOfAGoodBlobIsDataLoss) {
  const std::string blob =
      Encode({{7, false, "payload", 123456789}, {8, true, "", 123456790},
              {300, false, std::string(200, 'z'), 1}});
  ASSERT_TRUE(Decode(blob).ok());
  for (size_t n = 0; n < blob.size(); ++n) {
    SCOPED_TRACE(n);
    EXPECT_EQ(Decode(blob.substr(0, n)).status().code(),
              absl::StatusCode::kDataLoss);
  }
}

TEST(AnswerLogTest, ACountBelowTheEntriesLeavesBytesAfterTheLast) {
  std::string blob = Encode({{1, false, "a", 1}, {2, false, "b", 2}});
  FinishLogBlob(blob, 1);
  const absl::Status status = Decode(blob).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("after the last of 1 entries"));
}

}  // namespace
}  // namespace ldpgraph::store
