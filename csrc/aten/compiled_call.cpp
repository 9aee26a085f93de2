// How a torch.compile graph's call reaches its captured program: worked out
// once, when the program is captured, and checked on every call.
//
// A graph's inputs (AOTAutograd's flat list: parameters, activations saved
// for the backward, user inputs, plain numbers) reach the program as whole
// contiguous buffers. A tensor that is one passes as it is ("in"); a view of
// part of a storage (a view, or a saved activation AOTAutograd detached from
// its base) passes the storage's buffer, once however many tensors over it
// come in, and the view is taken inside the program ("view"); a tensor whose
// storage holds a buffer of another dtype is copied ("copy") and, if the
// graph writes it, the copy's new value is copied back. A
// CallPlan records per input that choice, the program input it feeds and
// everything the program was specialized on: dtype, geometry, the shape of
// the buffer behind it, the values of plain numbers, the float32 matmul
// precision. dynamo.py keys its programs by the plan and keeps the last one
// it ran as a CompiledCall. A call checks the new inputs against that plan
// without building a key (CallPlan::match) and, when they fit, collects the
// buffers, launches, writes mutated inputs back and builds the outputs in
// this one C++ call: the work is per input, hundreds of them per training
// step, and in Python it cost over a microsecond each. Inputs that do not
// fit (another signature, an input that is no longer a whole buffer) make the
// call answer None, and dynamo.py plans, looks up or captures again.
#include "aten/compiled_call.h"

#include <algorithm>
#include <optional>
#include <set>
#include <unordered_map>

#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include "aten/generator.h"
#include "aten/matmul_precision.h"
#include "aten/tensor_bridge.h"
#include "common/key_text.h"
#include "runtime/dynamic_dims.h"

namespace py = pybind11;

namespace torch_tpu::aten {

bool is_whole_base(const at::TensorBase& t) {
  return t.is_contiguous() && t.storage_offset() == 0 &&
         t.storage().nbytes() == static_cast<size_t>(t.numel()) * t.element_size();
}

namespace {

// whole_base without the error: nullptr for a tensor that does not qualify.
std::shared_ptr<runtime::DeviceBuffer> whole_base_or_null(const at::Tensor& t) {
  runtime::Storage* s = storage_of(t);
  runtime::ViewGeometry g = geometry_of(t);
  // Programs are keyed by their inputs' exact types (runtime/dynamic_dims.h).
  translate_errors([&] { runtime::unpad(*s); });
  // An empty storage keeps the untyped zero-byte buffer it was made with, as
  // nothing ever writes it (a model's zero register tokens): give it one of
  // the tensor's type, which holds the same nothing.
  if (s->nbytes == 0 && s->base->type().dtype != g.dtype)
    s->base = runtime::DeviceBuffer::deferred_zeros({g.dtype, {0}}, s->device);
  if (!runtime::covers_storage(g, s->nbytes) || s->base->type().dtype != g.dtype) return nullptr;
  return s->base;
}

}  // namespace

std::shared_ptr<runtime::DeviceBuffer> whole_base(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.defined() && t.device().type() == c10::DeviceType::PrivateUse1, what,
              " must be a tpu tensor");
  auto base = whole_base_or_null(t);
  TORCH_CHECK_VALUE(base, what, " must be a contiguous tensor covering its whole storage (call .contiguous())");
  return base;
}

namespace {

std::pair<uint64_t, uint64_t> next_rng(int device, uint64_t count) {
  return default_generator(static_cast<c10::DeviceIndex>(device)).get<TpuGenerator>()->take(count);
}

// The buffers behind `inputs`, or nullopt if one is not its storage's whole
// buffer (dynamo.py then copies that input from the next call on).
std::optional<std::vector<std::shared_ptr<runtime::DeviceBuffer>>> bases_of(
    const std::vector<at::Tensor>& inputs) {
  std::vector<std::shared_ptr<runtime::DeviceBuffer>> bases;
  bases.reserve(inputs.size());
  for (const auto& t : inputs) {
    bases.push_back(whole_base_or_null(t));
    if (!bases.back()) return std::nullopt;
  }
  return bases;
}

}  // namespace

std::optional<std::vector<at::Tensor>> CapturedCall::run(const std::vector<at::Tensor>& inputs) const {
  auto bases = bases_of(inputs);
  if (!bases) return std::nullopt;
  // The tensor's storage and `bases` hold the buffer: anyone else (a pending
  // graph, another storage, the same input passed twice) reads it, so the
  // program must not donate it.
  std::vector<bool> exclusive;
  exclusive.reserve(bases->size());
  for (const auto& b : *bases) exclusive.push_back(b.use_count() == 2);
  auto outs = translate_errors([&] {
    py::gil_scoped_release no_gil;
    return program->run(*bases, exclusive, &next_rng);
  });
  size_t n_plain = outs.size() - mutated.size();
  std::vector<at::Tensor> results;
  results.reserve(n_plain);
  for (size_t i = 0; i < n_plain; ++i) results.push_back(wrap_buffer(outs[i], device));
  for (size_t k = 0; k < mutated.size(); ++k) assign_base(inputs[mutated[k]], outs[n_plain + k]);
  return results;
}

namespace {

enum class How : uint8_t { Plain, In, View, Copy };

const char* how_name(How h) {
  switch (h) {
    case How::In: return "in";
    case How::View: return "view";
    case How::Copy: return "copy";
    case How::Plain: break;
  }
  return "plain";
}

// Whether the buffer `a`'s storage holds can be a program input that `a` is
// a view of: a buffer of `a`'s dtype (not a reinterpreting view).
bool storage_buffer_fits(const at::Tensor& a) {
  const runtime::Storage* s = storage_of(a);
  return s->nbytes > 0 && s->nbytes % static_cast<int64_t>(a.element_size()) == 0 &&
         s->base->type().dtype == to_hlo(a.scalar_type());
}

// How tensor input `a` reaches the program.
How how_of(const at::Tensor& a, bool copy_slot) {
  if (copy_slot) return How::Copy;
  if (is_whole_base(a)) return How::In;
  if (storage_buffer_fits(a)) return How::View;
  return How::Copy;
}

// What program inputs are keyed by: tensors over one storage share its buffer.
const c10::StorageImpl* source_of(const at::Tensor& a) { return a.storage().unsafeGetStorageImpl(); }

// The buffer behind it: programs take buffers, whose shapes may differ from
// the tensors' ((3,) over (1, 3)).
const std::shared_ptr<runtime::DeviceBuffer>& source_buffer(const at::Tensor& a) { return storage_of(a)->base; }

// The program input a View input passes: its base when that is the whole
// storage, else (a saved activation AOTAutograd detached from its base) a
// flat tensor over the whole storage. Either way the view is taken inside
// the program, never copied.
at::Tensor whole_storage(const at::Tensor& a) {
  if (a.is_view() && is_whole_base(a._base())) return at::Tensor(a._base());
  int64_t n = storage_of(a)->nbytes / static_cast<int64_t>(a.element_size());
  return a.as_strided({n}, {1}, 0);
}

std::vector<int64_t> buffer_shape(const runtime::DeviceBuffer& b) {
  const auto& shape = b.padded() ? b.logical_type().shape : b.type().shape;
  return {shape.begin(), shape.end()};
}

bool same_buffer_shape(const runtime::DeviceBuffer& b, const std::vector<int64_t>& want) {
  if (b.padded()) return buffer_shape(b) == want;
  const auto& shape = b.type().shape;
  return std::equal(shape.begin(), shape.end(), want.begin(), want.end());
}

// Plain numbers are baked into the program: the same type and value.
bool same_value(PyObject* a, PyObject* b) {
  if (a == b) return true;
  if (Py_TYPE(a) != Py_TYPE(b)) return false;
  int eq = PyObject_RichCompareBool(a, b, Py_EQ);
  if (eq < 0) PyErr_Clear();
  return eq == 1;
}

void append_ints(std::string& key, c10::IntArrayRef v) {
  key += '(';
  for (int64_t x : v) append_int(key, x, ',');
  key += ')';
}

struct ArgPlan {
  How how = How::Plain;
  bool copy_slot = false;  // copied whatever it is (dynamo.py's copy_slots)
  int64_t slot = -1;       // the program input it feeds
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  std::vector<int64_t> sizes, strides, buffer_shape;
  int64_t offset = 0;
};

class CallPlan {
 public:
  CallPlan(const py::list& args, const std::set<int64_t>& copy_slots);

  // Whether `args` are inputs of the same signature (no side effects).
  bool match(const py::list& args) const;
  // The program's inputs for `args`, copying those planned as copies;
  // `copies` gets (program input, the graph's tensor) of each.
  std::vector<at::Tensor> inputs(const py::list& args,
                                 std::vector<std::pair<int64_t, at::Tensor>>* copies) const;

  py::bytes key() const { return py::bytes(key_); }
  std::vector<int64_t> plain() const;
  // Per graph input: None (a plain value) or (how, program input).
  py::list how() const;

 private:
  void plan_tensor(size_t i, PyObject* obj, ArgPlan& e,
                   std::unordered_map<const c10::StorageImpl*, int64_t>& slot_of);

  std::vector<ArgPlan> args_;
  std::vector<py::object> plain_;  // the plain inputs' values, in order
  hlo::DotPrecision precision_;
  int64_t slots_ = 0;
  std::string key_;
};

CallPlan::CallPlan(const py::list& args, const std::set<int64_t>& copy_slots)
    : precision_(matmul_precision()) {
  args_.resize(args.size());
  key_.reserve(64 * args.size());
  // A capture bakes the float32 matmul precision into its program; Dynamo's
  // guards do not see all of PyTorch's switches for it.
  append_int(key_, static_cast<int64_t>(precision_), ';');
  std::unordered_map<const c10::StorageImpl*, int64_t> slot_of;
  for (size_t i = 0; i < args.size(); ++i) {
    PyObject* obj = PyList_GET_ITEM(args.ptr(), i);
    if (!THPVariable_Check(obj)) {
      plain_.push_back(py::reinterpret_borrow<py::object>(obj));
      continue;
    }
    args_[i].copy_slot = copy_slots.count(static_cast<int64_t>(i)) > 0;
    plan_tensor(i, obj, args_[i], slot_of);
  }
}

void CallPlan::plan_tensor(size_t i, PyObject* obj, ArgPlan& e,
                           std::unordered_map<const c10::StorageImpl*, int64_t>& slot_of) {
  const at::Tensor& a = THPVariable_Unpack(obj);
  if (a.device().type() != c10::DeviceType::PrivateUse1)
    throw std::runtime_error("torch.compile(backend='tpu'): graph input " + std::to_string(i) +
                             " is on " + a.device().str() + ", expected tpu");
  e.how = how_of(a, e.copy_slot);
  if (e.how == How::Copy) {
    e.slot = slots_++;
  } else {
    auto [it, fresh] = slot_of.emplace(source_of(a), slots_);
    if (fresh) ++slots_;
    e.slot = it->second;
    e.buffer_shape = buffer_shape(*source_buffer(a));
  }
  e.dtype = a.scalar_type();
  e.sizes = a.sizes().vec();
  e.strides = a.strides().vec();
  e.offset = a.storage_offset();
  key_ += how_name(e.how)[0];
  append_int(key_, e.slot, ':');
  append_int(key_, static_cast<int64_t>(e.dtype), ':');
  append_ints(key_, e.sizes);
  append_ints(key_, e.strides);
  append_int(key_, e.offset, ':');
  if (e.how != How::Copy) append_ints(key_, e.buffer_shape);
  key_ += ';';
}

bool CallPlan::match(const py::list& args) const {
  if (args.size() != args_.size() || matmul_precision() != precision_) return false;
  // The storage feeding each program input: one storage per input, and
  // (below) no storage feeding two, as the plan would have given it one.
  std::vector<const c10::StorageImpl*> src_of(slots_, nullptr);
  size_t p = 0;
  for (size_t i = 0; i < args_.size(); ++i) {
    const ArgPlan& e = args_[i];
    PyObject* obj = PyList_GET_ITEM(args.ptr(), i);
    if (e.how == How::Plain) {
      if (THPVariable_Check(obj) || !same_value(obj, plain_[p++].ptr())) return false;
      continue;
    }
    if (!THPVariable_Check(obj)) return false;
    const at::Tensor& a = THPVariable_Unpack(obj);
    if (a.device().type() != c10::DeviceType::PrivateUse1) return false;
    if (how_of(a, e.copy_slot) != e.how || a.scalar_type() != e.dtype || !a.sizes().equals(e.sizes) ||
        !a.strides().equals(e.strides) || a.storage_offset() != e.offset)
      return false;
    if (e.how == How::Copy) continue;
    const c10::StorageImpl* src = source_of(a);
    const c10::StorageImpl*& seen = src_of[e.slot];
    if (seen != nullptr && seen != src) return false;
    if (seen == nullptr) {
      if (!same_buffer_shape(*source_buffer(a), e.buffer_shape)) return false;
      seen = src;
    }
  }
  src_of.erase(std::remove(src_of.begin(), src_of.end(), nullptr), src_of.end());
  std::sort(src_of.begin(), src_of.end());
  return std::adjacent_find(src_of.begin(), src_of.end()) == src_of.end();
}

std::vector<at::Tensor> CallPlan::inputs(const py::list& args,
                                         std::vector<std::pair<int64_t, at::Tensor>>* copies) const {
  std::vector<at::Tensor> inputs(slots_);
  for (size_t i = 0; i < args_.size(); ++i) {
    const ArgPlan& e = args_[i];
    if (e.how == How::Plain || inputs[e.slot].defined()) continue;
    const at::Tensor& a = THPVariable_Unpack(PyList_GET_ITEM(args.ptr(), i));
    if (e.how == How::In) {
      inputs[e.slot] = a;
    } else if (e.how == How::View) {
      inputs[e.slot] = whole_storage(a);
    } else {
      inputs[e.slot] = a.clone(at::MemoryFormat::Contiguous);
      if (copies) copies->emplace_back(e.slot, a);
    }
  }
  return inputs;
}

std::vector<int64_t> CallPlan::plain() const {
  std::vector<int64_t> positions;
  for (size_t i = 0; i < args_.size(); ++i)
    if (args_[i].how == How::Plain) positions.push_back(static_cast<int64_t>(i));
  return positions;
}

py::list CallPlan::how() const {
  py::list out;
  for (const ArgPlan& e : args_) {
    if (e.how == How::Plain)
      out.append(py::none());
    else
      out.append(py::make_tuple(how_name(e.how), e.slot));
  }
  return out;
}

// One graph output: a number (or None...), a program result, or a program
// input; either tensor maybe as a view, with its lazy conj/neg bits.
struct OutputSlot {
  enum Kind : uint8_t { Constant, Result, Input } kind = Constant;
  int64_t index = 0;
  bool is_view = false;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  bool conj = false, neg = false;
  py::object constant;
};

// dynamo.py's layout entry: ("const", v) or ("out"|"in", k, view, (conj, neg)),
// view None or (sizes, strides, offset).
OutputSlot parse_output(const py::handle& entry) {
  auto t = entry.cast<py::tuple>();
  OutputSlot s;
  auto kind = t[0].cast<std::string>();
  if (kind == "const") {
    s.constant = py::reinterpret_borrow<py::object>(t[1]);
    return s;
  }
  TORCH_CHECK(kind == "out" || kind == "in", "compiled graph output layout: unknown kind ", kind);
  s.kind = kind == "out" ? OutputSlot::Result : OutputSlot::Input;
  s.index = t[1].cast<int64_t>();
  if (!t[2].is_none()) {
    auto view = t[2].cast<py::tuple>();
    s.is_view = true;
    s.sizes = view[0].cast<std::vector<int64_t>>();
    s.strides = view[1].cast<std::vector<int64_t>>();
    s.offset = view[2].cast<int64_t>();
  }
  auto bits = t[3].cast<py::tuple>();
  s.conj = bits[0].cast<bool>();
  s.neg = bits[1].cast<bool>();
  return s;
}

class CompiledCall {
 public:
  CompiledCall(CapturedCall program, std::shared_ptr<CallPlan> plan, const py::list& layout)
      : program_(std::move(program)), plan_(std::move(plan)) {
    for (const auto& entry : layout) layout_.push_back(parse_output(entry));
    for (int j : program_.mutated) mutated_.insert(j);
  }

  // The graph's outputs; None when `args` do not fit the plan. AOTAutograd
  // calls the boxed way: `args` is cleared once the program has its inputs,
  // so that saved activations die as soon as they are used.
  py::object operator()(const py::list& args) const {
    if (!plan_->match(args)) return py::none();
    std::vector<std::pair<int64_t, at::Tensor>> copies;
    std::vector<at::Tensor> inputs = plan_->inputs(args, &copies);
    auto results = program_.run(inputs);
    if (!results) return py::none();
    for (const auto& [j, original] : copies)
      if (mutated_.count(static_cast<int>(j))) original.copy_(inputs[j]);
    if (PyList_SetSlice(args.ptr(), 0, PY_SSIZE_T_MAX, nullptr) < 0) throw py::error_already_set();
    return outputs(*results, inputs);
  }

  std::vector<int> mutated() const { return program_.mutated; }

 private:
  py::list outputs(const std::vector<at::Tensor>& results, const std::vector<at::Tensor>& inputs) const {
    py::list outs(layout_.size());
    for (size_t i = 0; i < layout_.size(); ++i) {
      const OutputSlot& s = layout_[i];
      if (s.kind == OutputSlot::Constant) {
        outs[i] = s.constant;
        continue;
      }
      at::Tensor t = s.kind == OutputSlot::Result ? results[s.index] : inputs[s.index];
      if (s.is_view) t = t.as_strided(s.sizes, s.strides, s.offset);
      if (s.conj) t = t.conj();
      if (s.neg) t = at::_neg_view(t);
      outs[i] = py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(t)));
    }
    return outs;
  }

  CapturedCall program_;
  std::shared_ptr<CallPlan> plan_;
  std::vector<OutputSlot> layout_;
  std::set<int> mutated_;
};

}  // namespace

void bind_compiled_call(py::module& m) {
  m.def("_is_whole_base", [](const at::Tensor& t) { return is_whole_base(t); },
        "Contiguous from offset 0 over its whole storage");
  py::class_<CallPlan, std::shared_ptr<CallPlan>>(m, "CallPlan")
      .def(py::init<const py::list&, const std::set<int64_t>&>(), py::arg("args"), py::arg("copy_slots"))
      .def_property_readonly("key", &CallPlan::key)
      .def_property_readonly("plain", &CallPlan::plain)
      .def("how", &CallPlan::how)
      .def("match", &CallPlan::match)
      .def(
          "inputs", [](const CallPlan& p, const py::list& args) { return p.inputs(args, nullptr); },
          "The program's inputs for these graph inputs (copies made)");
  py::class_<CompiledCall>(m, "CompiledCall")
      .def(py::init<CapturedCall, std::shared_ptr<CallPlan>, const py::list&>())
      .def("__call__", &CompiledCall::operator())
      .def_property_readonly("mutated", &CompiledCall::mutated);
}

}  // namespace torch_tpu::aten
