#include "lowering/custom_call.h"

#include <deque>
#include <map>
#include <mutex>

#include "common/error.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Value;

std::mutex mu;
// A deque: references handed out stay valid as modules are added.
std::deque<CustomModule>& modules() {
  static auto& m = *new std::deque<CustomModule>;  // never destroyed: used during exit
  return m;
}
std::map<std::pair<std::string, std::string>, int>& ids() {
  // never destroyed: used during exit
  static auto& m = *new std::map<std::pair<std::string, std::string>, int>;
  return m;
}

std::vector<Value> lower_custom_call(Context& ctx, const Args& args) {
  const CustomModule& m = custom_module(static_cast<int>(args.at(0).as_int()));
  const auto& given = args.at(1).tensors;
  const auto& want = m.embedded.inputs;
  TPU_CHECK(given.size() == want.size(), ErrorKind::Type, m.op_name, ": expected ", want.size(),
            " tensor arguments, got ", given.size());
  std::vector<Value> ins;
  for (size_t i = 0; i < given.size(); ++i) {
    TPU_CHECK(given[i].has_value(), ErrorKind::Type, m.op_name, ": argument ", i, " is None");
    TPU_CHECK(given[i]->type == want[i], ErrorKind::Type, m.op_name, ": argument ", i, " is ",
              given[i]->type.str(), " but the kernel takes ", want[i].str());
    ins.push_back(*given[i]);
  }
  ctx.b.add_functions(m.embedded.entry, m.embedded.functions);
  return ctx.b.op_multi("func.call", ins, m.embedded.outputs, "callee = @" + m.embedded.entry, {});
}

}  // namespace

int register_custom_module(const std::string& op_name, const std::string& text) {
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_pair(op_name, text);
  if (auto it = ids().find(key); it != ids().end()) return it->second;
  CustomModule m;
  m.id = static_cast<int>(modules().size());
  m.op_name = op_name;
  m.text = text;
  try {
    m.embedded = hlo::embed_module(text, "tpu_k" + std::to_string(m.id) + "_");
  } catch (const Error& e) {
    fail(ErrorKind::Value, op_name, ": ", e.what());
  }
  modules().push_back(std::move(m));
  ids()[key] = modules().back().id;
  return modules().back().id;
}

const CustomModule& custom_module(int id) {
  std::lock_guard<std::mutex> lock(mu);
  TPU_CHECK(id >= 0 && id < static_cast<int>(modules().size()), ErrorKind::Value,
            "no custom kernel module with id ", id);
  return modules()[static_cast<size_t>(id)];
}

const Lowering& custom_call_lowering() {
  static const Lowering l{"torch_tpu::custom_call", &lower_custom_call};
  return l;
}

}  // namespace torch_tpu::lowering
