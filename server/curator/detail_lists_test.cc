// A stage result's id lists: cut to kDetailIds in the details, wherever
// they sit, with the flag beside them; read back whole from the details
// when they were not cut and from the id-list file when they were.
#include "server/curator/detail_lists.h"

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/testing/temp_folder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::curator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

std::vector<uint32_t> Ids(uint32_t n, uint32_t step = 1) {
  std::vector<uint32_t> ids(n);
  for (uint32_t i = 0; i < n; ++i) ids[i] = i * step;
  return ids;
}

TEST(DetailListsTest, LongListsAreCutWhereverTheySitAndReturnedWhole) {
  json details = {{"flagged", Ids(250, 3)},
                  {"flagged_nodes", 250},
                  {"overreported", Ids(4)},
                  {"robust", {{"dropped", 101}, {"dropped_nodes", Ids(101)}}},
                  {"confusion", {{1, 2}, {3, 4}}},
                  {"tuning", {{"flagged", "not a list"}}}};
  const IdLists whole = TruncateIdLists(&details);
  ASSERT_EQ(whole.size(), 2u);
  EXPECT_EQ(whole.at("flagged"), Ids(250, 3));
  EXPECT_EQ(whole.at("robust.dropped_nodes"), Ids(101));
  EXPECT_EQ(details["flagged"], json(Ids(kDetailIds, 3)));
  EXPECT_EQ(details["flagged_truncated"], true);
  EXPECT_EQ(details["robust"]["dropped_nodes"].size(), kDetailIds);
  EXPECT_EQ(details["robust"]["dropped_nodes_truncated"], true);
  // Short lists and what is not a list of ids stay as they were.
  EXPECT_EQ(details["overreported"], json(Ids(4)));
  EXPECT_FALSE(details.contains("overreported_truncated"));
  EXPECT_EQ(details["tuning"]["flagged"], "not a list");
  EXPECT_EQ(details["confusion"], json({{1, 2}, {3, 4}}));
  EXPECT_THAT(IdListPaths(details),
              ElementsAre("flagged", "overreported", "robust.dropped_nodes"));
  // A details object at most this big, whatever the lists' length.
  EXPECT_LT(details.dump().size(), 2048u);
}

TEST(DetailListsTest, WholeListsComeFromTheDetailsOrTheFile) {
  TempFolder dir;
  const std::string file = dir.File("estimate-1-c1.ids.json");
  json details = {{"flagged", Ids(300)},
                  {"overreported", Ids(5)},
                  {"robust", {{"dropped_nodes", Ids(150, 2)}}}};
  const IdLists whole = TruncateIdLists(&details);
  ASSERT_TRUE(WriteIdLists(file, whole).ok());
  auto flagged = WholeIdList(details, "flagged", file);
  ASSERT_TRUE(flagged.ok()) << flagged.status();
  EXPECT_EQ(*flagged, Ids(300));
  auto dropped = WholeIdList(details, "robust.dropped_nodes", file);
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_EQ(*dropped, Ids(150, 2));
  // Not cut: from the details, the file not needed.
  auto dims = WholeIdList(details, "overreported", dir.File("missing"));
  ASSERT_TRUE(dims.ok()) << dims.status();
  EXPECT_EQ(*dims, Ids(5));
  // No such list: the ones there are.
  auto none = WholeIdList(details, "dropped_nodes", file);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(none.status().message(),
              HasSubstr("its lists: flagged, overreported, robust.dropped_nodes"));
  EXPECT_EQ(WholeIdList(details, "robust", file).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A cut list whose file is gone or damaged: DATA_LOSS naming the file.
  auto gone = WholeIdList(details, "flagged", dir.File("missing"));
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(gone.status().message(), HasSubstr(dir.File("missing")));
  std::ofstream(file, std::ios::trunc) << "{\"flagged\": [1, 2";
  EXPECT_EQ(WholeIdList(details, "flagged", file).status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace ldpgraph::curator
