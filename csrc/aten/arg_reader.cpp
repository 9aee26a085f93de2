// Reading an op's arguments: each schema argument's IValue becomes a
// lowering argument (runtime::OpCall::args), and its tensors the call's
// inputs, read through their views. Every tpu tensor must be on one device;
// CPU 0-dim tensors (Python numbers) are uploaded as shared constants; lazy
// conjugate and negative bits are resolved first; a Generator (or the
// device's default one, for random ops that take none) reserves values for
// the op's size.
#include "aten/arg_reader.h"

#include "aten/tensor_bridge.h"

namespace torch_tpu::aten {

using lowering::Arg;

void ArgReader::read(const std::vector<std::pair<const c10::Argument*, c10::IValue>>& args,
                     bool implicit_generator) {
  // Arg is large: growing the vectors one element at a time costs more
  // than the rest of recording a small op. Sized exactly: a request of
  // 1 KiB or more (four Args) makes glibc consolidate its free lists first.
  size_t count = args.size() + (implicit_generator ? 1 : 0);
  call_.args.reserve(count);
  call_.inputs.reserve(count);
  for (const auto& [schema_arg, value] : args) {
    Arg a;
    a.index = static_cast<int>(call_.args.size());
    std::vector<std::optional<runtime::TensorInput>> ins;
    convert(*schema_arg, value, a, ins);
    call_.args.push_back(std::move(a));
    call_.inputs.push_back(std::move(ins));
  }
  if (implicit_generator) {
    // Random ops without a Generator argument (native_dropout) draw from
    // the device's default generator, passed as a last argument.
    Arg a;
    a.index = static_cast<int>(call_.args.size());
    rng(std::nullopt, a);
    call_.args.push_back(std::move(a));
    call_.inputs.emplace_back();
  }
  // Generators reserve values for the op's size: the first tensor's numel.
  for (auto& a : call_.args)
    if (a.kind == Arg::Kind::Rng) {
      auto [seed, offset] = generator_->take(static_cast<uint64_t>(first_numel_));
      a.rng_seed = seed;
      a.rng_offset = offset;
    }
}

// index_fill's index may live on the CPU: PyTorch's device-generic tests
// fill at CPU indices on every device but CUDA (its sort tests against
// numpy), and the CPU kernel reads it there.
namespace {
bool host_tensor_allowed(const std::string& op, const std::string& arg) {
  return arg == "index" && (op == "aten::index_fill" || op == "aten::index_fill_");
}
}  // namespace

// `name`: the schema argument, named when devices disagree.
std::optional<runtime::TensorInput> ArgReader::tensor_input(const at::Tensor& given, Arg* a,
                                                            const std::string& name) {
  if (!given.defined()) return std::nullopt;
  // Lazy conjugate/negative views hold the original values: lowerings read
  // storage, so the bits are applied first (a copy on the device).
  at::Tensor t = given;
  if (t.is_conj() || t.is_neg()) {
    t = t.resolve_conj().resolve_neg();
    resolved.push_back(t);
  }
  if (t.device().type() == c10::DeviceType::PrivateUse1) {
    note_device(t.device().index(), t, name);
    if (first_numel_ < 0) first_numel_ = t.numel();
    return input_of(t);
  }
  // CPU 0-dim tensors (Python numbers and scalars) are allowed beside
  // device tensors, as on CUDA, and so are the host index vectors that
  // host_tensor_allowed names; anything else is a device mix-up.
  TORCH_CHECK(t.device().is_cpu() && (t.dim() == 0 || host_tensor_allowed(schema_.name(), name)),
              "Expected all tensors to be on the same device, but found at least two devices, ",
              c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device())),
              " and ", t.device(), "! (when checking argument for argument ", name, " in method ",
              schema_.name(), ")");
  if (a) a->wrapped_number = t.unsafeGetTensorImpl()->is_wrapped_number();
  at::Tensor host = t.contiguous();
  hlo::TensorType type{to_hlo(host.scalar_type()), host.sizes().vec()};
  auto s = std::make_unique<runtime::Storage>(type.nbytes(), device());
  s->base = translate_errors([&] { return runtime::constant(host.const_data_ptr(), type, device()); });
  runtime::TensorInput in{s.get(), {type.shape, host.strides().vec(), 0, type.dtype}};
  staged.push_back(std::move(s));
  return in;
}

void ArgReader::note_device(int index, const at::Tensor& t, const std::string& name) {
  if (device_ < 0) {
    device_ = index;
    return;
  }
  TORCH_CHECK(device_ == index,
              "Expected all tensors to be on the same device, but found at least two devices, tpu:",
              device_, " and ", t.device(), "! (when checking argument for argument ", name,
              " in method ", schema_.name(), ")");
}

void ArgReader::convert(const c10::Argument& arg, const c10::IValue& v, Arg& a,
                        std::vector<std::optional<runtime::TensorInput>>& ins) {
  const c10::TypePtr& type = arg.real_type();
  if (v.isNone()) {
    if (type->kind() == c10::TypeKind::OptionalType &&
        type->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::GeneratorType)
      return rng(std::nullopt, a);
    a.kind = Arg::Kind::None;
    return;
  }
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) {
      a.kind = Arg::Kind::None;
      return;
    }
    a.kind = Arg::Kind::Tensor;
    ins.push_back(tensor_input(t, &a, arg.name()));
    return;
  }
  if (v.isTensorList()) {
    // Read in place and sized once: _foreach_ lists are long, and copying
    // their tensors or growing the inputs one by one showed in profiles of
    // optimizer steps.
    a.kind = Arg::Kind::TensorList;
    const auto& list = v.toListRef();
    ins.reserve(list.size());
    for (const c10::IValue& e : list) ins.push_back(tensor_input(e.toTensor(), nullptr, arg.name()));
    return;
  }
  if (v.isList() && type->kind() == c10::TypeKind::ListType && convert_typed_list(arg, v, a, ins)) return;
  if (convert_by_type(type, v, a)) return;
  if (v.isInt() || v.isSymInt()) {
    a.kind = Arg::Kind::Int;
    a.i = v.isInt() ? v.toInt() : v.toSymInt().expect_int();
  } else if (v.isDouble() && call_.lowering->float_params) {
    number(v.toScalar(), a);
  } else if (v.isDouble()) {
    a.kind = Arg::Kind::Float;
    a.f = v.toDouble();
  } else if (v.isBool()) {
    a.kind = Arg::Kind::Bool;
    a.b = v.toBool();
  } else if (v.isString()) {
    a.kind = Arg::Kind::String;
    a.s = v.toStringRef();
  } else if (v.isScalar()) {
    number(v.toScalar(), a);
  } else if (v.isList()) {
    fill_list(v, a, ins);
  } else {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "tpu: argument '", arg.name(), "' of ", schema_.name(),
                                " has a type the tpu backend does not handle: ", type->str());
  }
}

// Lists whose schema type says more than their IValue: Tensor?[] (indices)
// and Scalar[]. False when `v` is some other list.
bool ArgReader::convert_typed_list(const c10::Argument& arg, const c10::IValue& v, Arg& a,
                                   std::vector<std::optional<runtime::TensorInput>>& ins) {
  const c10::TypePtr& elem = arg.real_type()->castRaw<c10::ListType>()->getElementType();
  bool optional_tensors = elem->kind() == c10::TypeKind::OptionalType &&
      elem->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::TensorType;
  if (optional_tensors) {  // Tensor?[] (indices)
    a.kind = Arg::Kind::TensorList;
    const auto& list = v.toListRef();
    ins.reserve(list.size());
    for (const c10::IValue& e : list)
      ins.push_back(e.isTensor() ? tensor_input(e.toTensor(), nullptr, arg.name()) : std::nullopt);
    return true;
  }
  if (elem->kind() == c10::TypeKind::NumberType) {  // Scalar[]
    Arg n;
    for (const c10::IValue& e : v.toListRef()) {
      number(e.toScalar(), n);
      a.numbers.push_back(n.number);
    }
    a.kind = Arg::Kind::NumberList;
    return true;
  }
  return false;
}

// Arguments read by their (optional) schema type: dtypes, layouts and
// memory formats, devices, generators, Scalars. False for any other type.
bool ArgReader::convert_by_type(const c10::TypePtr& type, const c10::IValue& v, Arg& a) {
  c10::TypeKind kind = type->kind();
  if (kind == c10::TypeKind::OptionalType) kind = type->castRaw<c10::OptionalType>()->getElementType()->kind();
  switch (kind) {
    case c10::TypeKind::ScalarTypeType:
      a.kind = Arg::Kind::DType;
      a.dtype = to_hlo(v.toScalarType());
      return true;
    case c10::TypeKind::LayoutType:
    case c10::TypeKind::MemoryFormatType:
      a.kind = Arg::Kind::None;
      return true;
    case c10::TypeKind::DeviceObjType: {
      c10::Device d = v.toDevice();
      if (d.type() == c10::DeviceType::PrivateUse1 && d.has_index()) device_ = d.index();
      a.kind = Arg::Kind::None;
      return true;
    }
    case c10::TypeKind::GeneratorType:
      rng(v.toGenerator(), a);
      return true;
    case c10::TypeKind::NumberType:
      number(v.toScalar(), a);
      return true;
    default: return false;
  }
}

void ArgReader::fill_list(const c10::IValue& v, Arg& a,
                          std::vector<std::optional<runtime::TensorInput>>& ins) {
  ins.clear();
  if (v.isIntList()) {
    a.kind = Arg::Kind::IntList;
    a.ints = v.toIntVector();
  } else if (v.isDoubleList()) {
    a.kind = Arg::Kind::FloatList;
    a.floats = v.toDoubleVector();
  } else if (v.isBoolList()) {
    a.kind = Arg::Kind::BoolList;
    for (bool b : v.toBoolList()) a.bools.push_back(b);
  } else {
    a.kind = Arg::Kind::IntList;  // SymInt[] arrives as a generic list
    for (const c10::IValue& e : v.toListRef())
      a.ints.push_back(e.isSymInt() ? e.toSymInt().expect_int() : e.toInt());
  }
}

void ArgReader::number(const c10::Scalar& s, Arg& a) {
  a.kind = Arg::Kind::Number;
  if (s.isBoolean()) {
    a.number.kind = lowering::Number::Kind::Bool;
    a.number.i = s.toBool();
  } else if (s.isIntegral(false)) {
    a.number.kind = lowering::Number::Kind::Int;
    a.number.i = s.toLong();
  } else if (s.isComplex()) {
    a.number.kind = lowering::Number::Kind::Complex;
    auto c = s.toComplexDouble();
    a.number.f = c.real();
    a.number.im = c.imag();
  } else {
    a.number.kind = lowering::Number::Kind::Float;
    a.number.f = s.toDouble();
  }
}

void ArgReader::rng(std::optional<at::Generator> g, Arg& a) {
  a.kind = Arg::Kind::Rng;
  at::Generator gen = g && g->defined() ? *g : default_generator(static_cast<c10::DeviceIndex>(device()));
  generator_ = gen.get<TpuGenerator>();
  generator_holder_ = gen;
}

}  // namespace torch_tpu::aten
