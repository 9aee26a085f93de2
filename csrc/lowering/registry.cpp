#include "lowering/registry.h"

#include <algorithm>
#include <map>

namespace torch_tpu::lowering {

namespace {
// Function-local so registrars in other translation units can run first.
std::map<std::string, Lowering>& table() {
  static auto& t = *new std::map<std::string, Lowering>;  // never destroyed: used during exit
  return t;
}
}  // namespace

void register_lowering(Lowering lowering) {
  auto [it, inserted] = table().emplace(lowering.name, lowering);
  if (!inserted) fail(ErrorKind::Runtime, "lowering registered twice: ", lowering.name);
}

const Lowering* find_lowering(const std::string& name) {
  auto it = table().find(name);
  return it == table().end() ? nullptr : &it->second;
}

std::vector<std::string> registered_names() {
  std::vector<std::string> names;
  for (const auto& [name, _] : table()) names.push_back(name);
  return names;
}

const hlo::Value& Arg::as_tensor() const {
  TPU_CHECK(kind == Kind::Tensor, ErrorKind::Type, "argument ", index, " must be a tensor");
  return tensor;
}
namespace {
void check_not_fed(const Arg& a) {
  TPU_CHECK(!a.fed, ErrorKind::Runtime, "a lowering read the value of Scalar argument ", a.index,
            ", which is fed as a parameter (each call's value reaches the program, not the lowering): "
            "use ctx.number, or register the lowering with kStaticNumbers");
}
}  // namespace

int64_t Arg::as_int() const {
  if (kind == Kind::Number) check_not_fed(*this);
  if (kind == Kind::Number && number.kind == Number::Kind::Int) return number.i;
  TPU_CHECK(kind == Kind::Int, ErrorKind::Type, "argument ", index, " must be an int");
  return i;
}
double Arg::as_float() const {
  if (kind == Kind::Int) return double(i);
  if (kind == Kind::Number) {
    check_not_fed(*this);
    return number.as_double();
  }
  TPU_CHECK(kind == Kind::Float, ErrorKind::Type, "argument ", index, " must be a float");
  return f;
}
bool Arg::as_bool() const {
  TPU_CHECK(kind == Kind::Bool, ErrorKind::Type, "argument ", index, " must be a bool");
  return b;
}
const std::vector<int64_t>& Arg::as_ints() const {
  TPU_CHECK(kind == Kind::IntList, ErrorKind::Type, "argument ", index, " must be a list of ints");
  return ints;
}
hlo::ElementType Arg::as_dtype() const {
  TPU_CHECK(kind == Kind::DType, ErrorKind::Type, "argument ", index, " must be a dtype");
  return dtype;
}
std::optional<hlo::Value> Arg::opt_tensor() const {
  if (kind == Kind::None) return std::nullopt;
  return as_tensor();
}
std::optional<int64_t> Arg::opt_int() const {
  if (kind == Kind::None) return std::nullopt;
  return as_int();
}
std::optional<hlo::ElementType> Arg::opt_dtype() const {
  if (kind == Kind::None) return std::nullopt;
  return as_dtype();
}

}  // namespace torch_tpu::lowering
