#include "common/names.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph {
namespace {

enum class Fruit { kApple, kPear, kPlum, kQuince };

constexpr auto kFruitNames = MakeNameTable<Fruit>(
    "fruit",
    {{Fruit::kApple, "apple"}, {Fruit::kPear, "pear"}, {Fruit::kPlum, "plum"}});

TEST(NameTableTest, ParsesEveryName) {
  for (const auto& v : kFruitNames.values()) {
    auto parsed = kFruitNames.Parse(v.name);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, v.value);
  }
}

TEST(NameTableTest, NamesEveryValue) {
  EXPECT_EQ(kFruitNames.Name(Fruit::kApple), "apple");
  EXPECT_EQ(kFruitNames.Name(Fruit::kPear), "pear");
  EXPECT_EQ(kFruitNames.Name(Fruit::kPlum), "plum");
  static_assert(kFruitNames.Name(Fruit::kPlum) == "plum");
}

TEST(NameTableTest, UnlistedValueIsUnknown) {
  EXPECT_EQ(kFruitNames.Name(Fruit::kQuince), "unknown");
  EXPECT_FALSE(kFruitNames.Contains(Fruit::kQuince));
  EXPECT_TRUE(kFruitNames.Contains(Fruit::kPear));
}

TEST(NameTableTest, ChoicesInTableOrder) {
  EXPECT_EQ(kFruitNames.Choices(), "apple, pear, plum");
  EXPECT_EQ(kFruitNames.subject(), "fruit");
}

TEST(NameTableTest, RejectsUnknownNameListingTheChoices) {
  auto parsed = kFruitNames.Parse("kiwi");
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message(),
            "fruit must be one of apple, pear, plum, got 'kiwi'");
}

TEST(NameTableTest, RejectsEmptyAndCaseVariants) {
  EXPECT_EQ(kFruitNames.Parse("").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kFruitNames.Parse("Apple").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(NameTableTest, SubjectOverrideNamesTheFlag) {
  auto parsed = kFruitNames.Parse("fig", "--fruit");
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message(),
            "--fruit must be one of apple, pear, plum, got 'fig'");
}

TEST(NameTableTest, ParsesAmongSomeValuesOnly) {
  auto parsed =
      kFruitNames.Parse("plum", "--fruit", {Fruit::kPlum, Fruit::kApple});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, Fruit::kPlum);
  EXPECT_EQ(kFruitNames.Choices({Fruit::kPlum, Fruit::kApple}), "plum, apple");
  auto pear =
      kFruitNames.Parse("pear", "--fruit", {Fruit::kPlum, Fruit::kApple});
  EXPECT_EQ(pear.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pear.status().message(),
            "--fruit must be one of plum, apple, got 'pear'");
}

TEST(NameTableTest, ChoicesOrJoinsTheLastTwoWithOr) {
  EXPECT_EQ(kFruitNames.ChoicesOr(), "apple, pear or plum");
  EXPECT_EQ(kFruitNames.ChoicesOr({Fruit::kPlum, Fruit::kApple}),
            "plum or apple");
  EXPECT_EQ(kFruitNames.ChoicesOr({Fruit::kPear}), "pear");
  constexpr auto kOne = MakeNameTable<Fruit>("fruit", {{Fruit::kPlum, "plum"}});
  EXPECT_EQ(kOne.ChoicesOr(), "plum");
}

}  // namespace
}  // namespace ldpgraph
