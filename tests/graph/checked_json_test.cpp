// CheckedJson (graph/checked_json.h): numbers from untrusted JSON convert only where the C++ type
// holds them exactly; nlohmann's own get<T>() casts (undefined behaviour for 3.3e126 as uint64_t,
// found by tests/fuzz/package_fuzzer).
#include <aotpipe/graph/checked_json.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

using aotpipe::CheckedJson;
using ::testing::HasSubstr;

namespace {

template <class T>
std::string refusal(const std::string& text) {
  try {
    (void)CheckedJson::parse(text).get<T>();
  } catch (const nlohmann::json::exception& e) { return e.what(); }
  return "converted";
}

}  // namespace

TEST(CheckedJson, IntegersConvertWithinTheirTypesRange) {
  EXPECT_EQ(CheckedJson::parse("42").get<int>(), 42);
  EXPECT_EQ(CheckedJson::parse("-7").get<int64_t>(), -7);
  EXPECT_EQ(CheckedJson::parse("18446744073709551615").get<uint64_t>(), UINT64_MAX);
  EXPECT_EQ(CheckedJson::parse("2147483647").get<int32_t>(), INT32_MAX);
  EXPECT_THAT(refusal<int32_t>("2147483648"), HasSubstr("2147483648 is out of this field's range"));
  EXPECT_THAT(refusal<std::size_t>("-1"), HasSubstr("-1 is out of this field's range"));
  EXPECT_THAT(refusal<uint8_t>("256"), HasSubstr("out of this field's range"));
}

TEST(CheckedJson, AFloatIsNeverAnInteger) {
  EXPECT_THAT(refusal<uint64_t>("3.33333e126"), HasSubstr("expected an integer, found 3.33333e+126"));
  EXPECT_THAT(refusal<int>("2.5"), HasSubstr("expected an integer"));
  EXPECT_THAT(refusal<int>("2.0"), HasSubstr("expected an integer"));
  EXPECT_THAT(refusal<int>("\"2\""), HasSubstr("expected an integer, found string"));
}

TEST(CheckedJson, FloatsTakeAnyNumberTheirTypeRepresents) {
  EXPECT_DOUBLE_EQ(CheckedJson::parse("2.5").get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(CheckedJson::parse("3").get<double>(), 3.0);
  EXPECT_FLOAT_EQ(CheckedJson::parse("1e30").get<float>(), 1e30f);
  EXPECT_THAT(refusal<float>("1e300"), HasSubstr("out of this field's range"));
  EXPECT_THAT(refusal<double>("null"), HasSubstr("expected a number, found null"));
}

TEST(CheckedJson, ContainersConvertEachElementChecked) {
  EXPECT_EQ(CheckedJson::parse("[1, 2, 3]").get<std::vector<int64_t>>(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_THAT(refusal<std::vector<int64_t>>("[1, 2.5e300]"), HasSubstr("expected an integer"));
  EXPECT_THAT((refusal<std::map<std::string, std::size_t>>(R"({"a": 1, "b": -2})")),
              HasSubstr("out of this field's range"));
  EXPECT_TRUE(CheckedJson::parse("true").get<bool>());  // bool is not a number here
}

TEST(CheckedJson, WritesAsNlohmannJsonDoes) {
  const CheckedJson j = {{"n", 3}, {"x", 2.5}, {"list", {1, 2}}};
  EXPECT_EQ(j.dump(), nlohmann::json::parse(R"({"list":[1,2],"n":3,"x":2.5})").dump());
  EXPECT_EQ(CheckedJson::from_cbor(CheckedJson::to_cbor(j)), j);
}
