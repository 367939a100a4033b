//===- JsonLocationTest.cpp - finding JSON values in their text -----------===//
#include "planner/Import/JsonLocation.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

using namespace fsdp;

namespace {

// Line numbers in the comments are 1-based, as lineCol reports them.
const std::string kDoc = "{\n"                                             // 1
                         "  \"name\": \"mini\",\n"                         // 2
                         "  \"tricky\": \"a, b} ] \\\" {\",\n"             // 3
                         "  \"esc\\\"key\": 7,\n"                          // 4
                         "  \"nested\": {\"a\": {\"b\": [10, 20, 30]}},\n" // 5
                         "  \"list\": [\n"                                 // 6
                         "    {\"x\": 1},\n"                               // 7
                         "    \"two, three\",\n"                           // 8
                         "    [4, [5]],\n"                                 // 9
                         "    true,\n"                                     // 10
                         "    -1.5e3\n"                                    // 11
                         "  ],\n"                                          // 12
                         "  \"empty\": [],\n"                              // 13
                         "  \"last\": null\n"                              // 14
                         "}\n";

using LineCol = std::pair<unsigned, unsigned>;

LineCol at(const JsonLocator &loc, const std::vector<std::string> &path) {
  return loc.lineCol(loc.find(path));
}

TEST(JsonLocation, RootSkipsLeadingWhitespace) {
  JsonLocator loc("\n\n   {\"a\": 1}");
  EXPECT_EQ(loc.find({}), 5u);
  EXPECT_EQ(at(loc, {}), LineCol(3, 4));
}

TEST(JsonLocation, TopLevelKeys) {
  JsonLocator loc(kDoc);
  EXPECT_EQ(at(loc, {"name"}), LineCol(2, 11));
  EXPECT_EQ(kDoc.substr(loc.find({"name"}), 6), "\"mini\"");
  EXPECT_EQ(at(loc, {"last"}), LineCol(14, 11));
  EXPECT_EQ(kDoc.substr(loc.find({"last"}), 4), "null");
}

TEST(JsonLocation, SkipsStringsWithBracketsAndEscapes) {
  JsonLocator loc(kDoc);
  // "tricky" holds , } ] \" { in a string; the keys after it are still found.
  EXPECT_EQ(at(loc, {"tricky"}), LineCol(3, 13));
  EXPECT_EQ(at(loc, {"nested"}), LineCol(5, 13));
  EXPECT_EQ(at(loc, {"empty"}), LineCol(13, 12));
}

TEST(JsonLocation, KeyWithEscapedQuote) {
  JsonLocator loc(kDoc);
  EXPECT_EQ(at(loc, {"esc\"key"}), LineCol(4, 15));
  EXPECT_EQ(kDoc.substr(loc.find({"esc\"key"}), 1), "7");
}

TEST(JsonLocation, NestedKeysAndIndices) {
  JsonLocator loc(kDoc);
  EXPECT_EQ(at(loc, {"nested", "a"}), LineCol(5, 19));
  EXPECT_EQ(at(loc, {"nested", "a", "b"}), LineCol(5, 25));
  EXPECT_EQ(at(loc, {"nested", "a", "b", "0"}), LineCol(5, 26));
  EXPECT_EQ(at(loc, {"nested", "a", "b", "2"}), LineCol(5, 34));
  EXPECT_EQ(kDoc.substr(loc.find({"nested", "a", "b", "2"}), 2), "30");

  EXPECT_EQ(at(loc, {"list", "0"}), LineCol(7, 5));
  EXPECT_EQ(at(loc, {"list", "0", "x"}), LineCol(7, 11));
  EXPECT_EQ(at(loc, {"list", "1"}), LineCol(8, 5));
  EXPECT_EQ(at(loc, {"list", "2", "1"}), LineCol(9, 9));
  EXPECT_EQ(at(loc, {"list", "2", "1", "0"}), LineCol(9, 10));
  EXPECT_EQ(at(loc, {"list", "3"}), LineCol(10, 5));
  EXPECT_EQ(at(loc, {"list", "4"}), LineCol(11, 5));
  EXPECT_EQ(kDoc.substr(loc.find({"list", "4"}), 6), "-1.5e3");
}

TEST(JsonLocation, MissingPartsGiveTheDeepestEnclosingValue) {
  JsonLocator loc(kDoc);
  // No such key: the object that should hold it.
  EXPECT_EQ(at(loc, {"nope"}), LineCol(1, 1));
  EXPECT_EQ(at(loc, {"nested", "a", "nope"}), LineCol(5, 19));
  // An index past the end: the array.
  EXPECT_EQ(at(loc, {"list", "5"}), LineCol(6, 11));
  EXPECT_EQ(at(loc, {"empty", "0"}), LineCol(13, 12));
  // A path through a scalar stops at the scalar.
  EXPECT_EQ(at(loc, {"name", "x"}), LineCol(2, 11));
  EXPECT_EQ(at(loc, {"list", "3", "x", "y"}), LineCol(10, 5));
}

TEST(JsonLocation, Elements) {
  JsonLocator loc(kDoc);
  std::vector<size_t> list = loc.elements({"list"});
  ASSERT_EQ(list.size(), 5u);
  std::vector<LineCol> got;
  for (size_t off : list)
    got.push_back(loc.lineCol(off));
  EXPECT_EQ(got, (std::vector<LineCol>{{7, 5}, {8, 5}, {9, 5}, {10, 5}, {11, 5}}));
  // Each element's offset agrees with find.
  for (size_t i = 0; i < list.size(); ++i)
    EXPECT_EQ(list[i], loc.find({"list", std::to_string(i)}));

  std::vector<size_t> b = loc.elements({"nested", "a", "b"});
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(kDoc.substr(b[1], 2), "20");

  EXPECT_TRUE(loc.elements({"empty"}).empty());
  EXPECT_TRUE(loc.elements({"name"}).empty());       // a string
  EXPECT_TRUE(loc.elements({"nested"}).empty());     // an object
  EXPECT_EQ(loc.elements({"list", "2"}).size(), 2u); // [4, [5]]
}

TEST(JsonLocation, ElementsOfTopLevelArray) {
  JsonLocator loc("[ {\"a\": [1, 2]} ,\"s\",3 ]");
  std::vector<size_t> e = loc.elements({});
  EXPECT_EQ(e, (std::vector<size_t>{2, 17, 21}));
}

TEST(JsonLocation, LineCol) {
  JsonLocator loc("ab\ncd\n\nxyz");
  EXPECT_EQ(loc.lineCol(0), LineCol(1, 1));
  EXPECT_EQ(loc.lineCol(1), LineCol(1, 2));
  EXPECT_EQ(loc.lineCol(2), LineCol(1, 3)); // the newline itself ends line 1
  EXPECT_EQ(loc.lineCol(3), LineCol(2, 1));
  EXPECT_EQ(loc.lineCol(6), LineCol(3, 1));
  EXPECT_EQ(loc.lineCol(7), LineCol(4, 1));
  EXPECT_EQ(loc.lineCol(9), LineCol(4, 3));
  // Past the end: the position just after the last character.
  EXPECT_EQ(loc.lineCol(10), LineCol(4, 4));
  EXPECT_EQ(loc.lineCol(1000), LineCol(4, 4));
}

TEST(JsonLocation, EmptyText) {
  JsonLocator loc("");
  EXPECT_EQ(loc.find({"a", "0"}), 0u);
  EXPECT_TRUE(loc.elements({}).empty());
  EXPECT_EQ(loc.lineCol(0), LineCol(1, 1));
}

} // namespace
