#pragma once

#include "aten/generator.h"
#include "aten/pch.h"
#include "aten/tensor_bridge.h"

namespace torch_tpu::aten {

// Turns the schema's IValues into lowering arguments and tensor inputs
// (see arg_reader.cpp).
class ArgReader {
 public:
  ArgReader(const c10::FunctionSchema& schema, runtime::OpCall& call)
      : schema_(schema), call_(call) {}

  // `args`: (schema argument, value) of each argument the lowering takes;
  // `implicit_generator`: a Generator argument follows them.
  void read(const std::vector<std::pair<const c10::Argument*, c10::IValue>>& args,
            bool implicit_generator);

  int device() const { return device_ < 0 ? current_device() : device_; }
  // Keeps uploaded CPU scalars and resolved conjugates alive for the op.
  std::vector<std::unique_ptr<runtime::Storage>> staged;
  std::vector<at::Tensor> resolved;

 private:
  std::optional<runtime::TensorInput> tensor_input(const at::Tensor& given, lowering::Arg* a,
                                                   const std::string& name);
  void note_device(int index, const at::Tensor& t, const std::string& name);
  void convert(const c10::Argument& arg, const c10::IValue& v, lowering::Arg& a,
               std::vector<std::optional<runtime::TensorInput>>& ins);
  bool convert_typed_list(const c10::Argument& arg, const c10::IValue& v, lowering::Arg& a,
                          std::vector<std::optional<runtime::TensorInput>>& ins);
  bool convert_by_type(const c10::TypePtr& type, const c10::IValue& v, lowering::Arg& a);
  void fill_list(const c10::IValue& v, lowering::Arg& a,
                 std::vector<std::optional<runtime::TensorInput>>& ins);
  void number(const c10::Scalar& s, lowering::Arg& a);
  void rng(std::optional<at::Generator> g, lowering::Arg& a);

  const c10::FunctionSchema& schema_;
  runtime::OpCall& call_;
  int device_ = -1;
  int64_t first_numel_ = -1;
  TpuGenerator* generator_ = nullptr;
  at::Generator generator_holder_;
};

}  // namespace torch_tpu::aten
