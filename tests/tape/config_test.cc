// tapeflow::Config (tape/core/config.h): the Keras config value every get_config() returns — set /
// get of each type, the errors that name the key, parsing and its depth limit, value semantics —
// and the opt-in bridge <tapeflow/json.h>.
#include "tape/core/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "json.h"

namespace tf = tapeflow;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

namespace {

TEST(Config, SetAndGetEachType) {
  tf::Config inner;
  inner.set("l2", 0.01);
  tf::Config c;
  EXPECT_TRUE(c.is_object());
  EXPECT_EQ(c.to_json_string(), "{}");
  c.set("units", 64)
      .set("big", std::int64_t{1} << 40)
      .set("seed", std::uint64_t{18446744073709551615ull})
      .set("rate", 0.5)
      .set("use_bias", true)
      .set("activation", "relu")
      .set("name", std::string("dense_1"))
      .set("regularizer", inner)
      .set("constraint", nullptr)
      .set("kernel_size", std::vector<std::int64_t>{3, 3})
      .set("values", std::vector<double>{0.1, 0.2})
      .set("names", std::vector<std::string>{"a", "b"})
      .set("layers", std::vector<tf::Config>{inner, tf::Config().set("l2", 0.5)});
  EXPECT_EQ(c.get<int>("units"), 64);
  EXPECT_EQ(c.get<std::int64_t>("big"), std::int64_t{1} << 40);
  EXPECT_EQ(c.get<std::uint64_t>("seed"), 18446744073709551615ull);
  EXPECT_EQ(c.get<double>("rate"), 0.5);
  EXPECT_EQ(c.get<double>("units"), 64.0);  // an integer reads as a number
  EXPECT_TRUE(c.get<bool>("use_bias"));
  EXPECT_EQ(c.get<std::string>("activation"), "relu");  // a const char* is a string, not a bool
  EXPECT_EQ(c.get<std::string>("name"), "dense_1");
  EXPECT_EQ(c.get<tf::Config>("regularizer").get<double>("l2"), 0.01);
  EXPECT_TRUE(c.get<tf::Config>("constraint").is_null());
  EXPECT_EQ(c.get<std::vector<std::int64_t>>("kernel_size"), (std::vector<std::int64_t>{3, 3}));
  EXPECT_EQ(c.get<std::vector<double>>("values"), (std::vector<double>{0.1, 0.2}));
  EXPECT_EQ(c.get<std::vector<std::string>>("names"), (std::vector<std::string>{"a", "b"}));
  const std::vector<tf::Config> layers = c.get<std::vector<tf::Config>>("layers");
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(layers[0], inner);
  EXPECT_EQ(layers[1].get<double>("l2"), 0.5);
  // Keys sorted, presence with and without null.
  EXPECT_EQ(c.keys().front(), "activation");
  EXPECT_EQ(c.keys().size(), 13u);
  EXPECT_TRUE(c.contains("constraint"));
  EXPECT_FALSE(c.has("constraint"));
  EXPECT_TRUE(c.has("units"));
  EXPECT_FALSE(c.contains("nope"));
  c.set("units", 32);  // replaces
  EXPECT_EQ(c.get<int>("units"), 32);
  c.erase("units").erase("absent");
  EXPECT_FALSE(c.contains("units"));
}

TEST(Config, IntegralDoublesReadAsIntegersInRangeOnly) {
  tf::Config c = tf::Config::parse(R"({"a": 3.0, "b": 3.5, "c": -1, "d": 1e300, "e": 4294967296})");
  EXPECT_EQ(c.get<std::int64_t>("a"), 3);
  EXPECT_THAT([&] { c.get<std::int64_t>("b"); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("key 'b' is not an integer in range")));
  EXPECT_THAT([&] { c.get<std::uint64_t>("c"); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("key 'c' is not a non-negative integer")));
  EXPECT_THAT([&] { c.get<std::int64_t>("d"); }, ThrowsMessage<std::invalid_argument>(HasSubstr("key 'd'")));
  EXPECT_THAT([&] { c.get<int>("e"); },  // 2^32 does not fit an int: refused, not truncated
              ThrowsMessage<std::invalid_argument>(HasSubstr("(it is number 4294967296)")));
  EXPECT_EQ(c.get<std::int64_t>("e"), 4294967296);
}

TEST(Config, GetErrorsNameTheKeyAndWhatWasFound) {
  const tf::Config c = tf::Config::parse(R"({"units": "64", "n": null, "list": [1, "x"]})");
  EXPECT_THAT([&] { c.get<int>("missing"); }, ThrowsMessage<std::invalid_argument>(HasSubstr("no key 'missing'")));
  EXPECT_THAT([&] { c.get<int>("n"); }, ThrowsMessage<std::invalid_argument>(HasSubstr("key 'n' is null")));
  EXPECT_THAT([&] { c.get<int>("units"); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("key 'units' is not an integer in range (it is string \"64\")")));
  EXPECT_THAT([&] { c.get<bool>("units"); }, ThrowsMessage<std::invalid_argument>(HasSubstr("not a boolean")));
  EXPECT_THAT([&] { c.get<std::vector<std::int64_t>>("list"); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("key 'list' is not an integer")));
  EXPECT_THAT([&] { c.get<std::vector<std::int64_t>>("units"); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("key 'units' is not a list")));
  EXPECT_THAT([&] { c.get<std::vector<tf::Config>>("units"); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("key 'units' is not a list")));
  const tf::Config text = tf::Config::parse(R"("mse")");
  EXPECT_FALSE(text.is_object());
  EXPECT_TRUE(text.keys().empty());
  EXPECT_THAT([&] { text.get<int>("x"); }, ThrowsMessage<std::invalid_argument>(HasSubstr("the config is a string")));
  tf::Config copy = text;
  EXPECT_THAT([&] { copy.set("x", 1); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("Config::set: the config is a string, not an object")));
}

TEST(Config, NonFiniteNumbersAreRefused) {
  tf::Config c;
  EXPECT_THAT([&] { c.set("rate", std::nan("")); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("key 'rate'")));
  EXPECT_THAT([&] { c.set("v", std::vector<double>{1.0, std::numeric_limits<double>::infinity()}); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("not finite")));
  EXPECT_FALSE(c.contains("rate"));
  EXPECT_FALSE(c.contains("v"));
}

TEST(Config, ParseAndPrint) {
  const tf::Config c = tf::Config::parse(R"({"b": [1, 2], "a": {"x": true}})");
  EXPECT_EQ(c.to_json_string(), R"({"a":{"x":true},"b":[1,2]})");
  EXPECT_EQ(c.to_json_string(1), "{\n \"a\": {\n  \"x\": true\n },\n \"b\": [\n  1,\n  2\n ]\n}");
  EXPECT_EQ(tf::Config::parse(c.to_json_string(2)), c);
  EXPECT_THAT([] { tf::Config::parse(R"({"a": )"); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("Config::parse: [json.exception.parse_error.101]")));
  // Deeper than kMaxConfigDepth is refused before anything recurses over it.
  const std::string deep = std::string(tf::kMaxConfigDepth + 1, '[') + std::string(tf::kMaxConfigDepth + 1, ']');
  EXPECT_THAT([&] { tf::Config::parse(deep); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("nested 513 levels deep; tapeflow reads at most 512")));
  const std::string ok = std::string(tf::kMaxConfigDepth, '[') + std::string(tf::kMaxConfigDepth, ']');
  EXPECT_FALSE(tf::Config::parse(ok).is_object());
}

TEST(Config, IsAValue) {
  tf::Config a;
  a.set("units", 1);
  tf::Config b = a;  // a copy, not a second handle
  b.set("units", 2);
  EXPECT_EQ(a.get<int>("units"), 1);
  EXPECT_FALSE(a == b);
  b = a;
  EXPECT_TRUE(a == b);
  tf::Config moved = std::move(a);
  EXPECT_EQ(moved.get<int>("units"), 1);
  a = tf::Config();  // a moved-from Config can be assigned and used again
  EXPECT_TRUE(a.keys().empty());
  a.set("x", true);
  EXPECT_TRUE(a.get<bool>("x"));
}

TEST(ConfigJsonBridge, RoundTripsThroughNlohmannJson) {
  tf::Config c;
  c.set("units", 3).set("kernel_size", std::vector<std::int64_t>{3, 3});
  nlohmann::json j = tf::to_json(c);
  EXPECT_EQ(j["units"], 3);
  j["units"] = 5;
  j["extra"] = {{"nested", nullptr}};
  const tf::Config back = tf::from_json(j);
  EXPECT_EQ(back.get<int>("units"), 5);
  EXPECT_TRUE(back.get<tf::Config>("extra").contains("nested"));
  EXPECT_EQ(tf::to_json(back), j);
}

}  // namespace
