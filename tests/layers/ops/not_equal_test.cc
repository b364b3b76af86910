// NotEqual (layers/ops/not_equal.h): Keras 3's not_equal(x, c) op layer: values, dtype, config and errors.
#include "layers/internal/serialization_json.h"
#include "layers/ops/not_equal.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "tape/tapeflow.h"

namespace tapeflow::layers {
namespace {
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(NotEqualLayer, ComparesWithItsConstantAndGivesBool) {
  NotEqual ne({.x2 = 2, .name = "ne"});
  const Tensor out = ne(constant<float>({2, 0, 3, 2}, Shape{2, 2}));
  EXPECT_EQ(out.dtype(), DType::kBool);
  EXPECT_EQ(out.shape(), (Shape{2, 2}));
  const std::vector<bool> want = {false, true, true, false};
  for (std::int64_t i = 0; i < 4; ++i) EXPECT_EQ(out.data<bool>()[i], want[static_cast<std::size_t>(i)]) << i;
  EXPECT_EQ(json_of(ne.get_config()), nlohmann::json::parse(R"({"name": "ne"})"));
}

TEST(NotEqualLayer, TheConstantComesOnceAndMustBeKnown) {
  auto ne = NotEqual::from_config(to_config(nlohmann::json::parse(R"({"name": "from_file"})")));
  EXPECT_FALSE(ne->x2().has_value());
  EXPECT_THAT([&] { (*ne)(constant<float>({1}, Shape{1})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("NotEqual 'from_file': x2 (the constant compared with) is not known")));
  ne->set_x2(0);
  ne->set_x2(0);  // the same constant again (a second node of one op): fine
  EXPECT_THAT([&] { ne->set_x2(1); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("called with x2 1.000000 after x2 0.000000")));
  EXPECT_THAT([&] { NotEqual({.x2 = std::nan("")}); }, ThrowsMessage<std::invalid_argument>(HasSubstr("x2 must be finite")));
}

}  // namespace
}  // namespace tapeflow::layers
