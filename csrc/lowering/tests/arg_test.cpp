// A Scalar argument of a lowering without kStaticNumbers is fed to the
// program as a parameter: one executable serves every value. Reading its
// value in the lowering would bake in the first call's, so it is refused.
#include <gtest/gtest.h>

#include "common/error.h"
#include "lowering/arg.h"

namespace torch_tpu::lowering {
namespace {

Arg number_arg(Number n, bool fed) {
  Arg a;
  a.kind = Arg::Kind::Number;
  a.index = 2;
  a.number = n;
  a.fed = fed;
  return a;
}

TEST(Arg, StaticNumbersAreRead) {
  Number f;
  f.kind = Number::Kind::Float;
  f.f = 0.25;
  EXPECT_EQ(number_arg(f, false).as_float(), 0.25);
  Number i;
  i.kind = Number::Kind::Int;
  i.i = 7;
  EXPECT_EQ(number_arg(i, false).as_int(), 7);
  EXPECT_EQ(number_arg(i, false).as_float(), 7.0);
}

TEST(Arg, FedNumbersRefuseToBeRead) {
  Number f;
  f.kind = Number::Kind::Float;
  f.f = 0.25;
  EXPECT_THROW(number_arg(f, true).as_float(), Error);
  Number i;
  i.kind = Number::Kind::Int;
  i.i = 7;
  EXPECT_THROW(number_arg(i, true).as_int(), Error);
  try {
    number_arg(i, true).as_float();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Scalar argument 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace torch_tpu::lowering
