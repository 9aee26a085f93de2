#include "runtime/dynamic_dims.h"

#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "common/error.h"
#include "lowering/padded.h"
#include "runtime/counters.h"
#include "runtime/eager_mode.h"

namespace torch_tpu::runtime {

using hlo::TensorType;
using lowering::Arg;

namespace {

// The padded buffer itself as an op input.
TensorInput physical(Storage* s) {
  TensorInput in{s, whole_view(s->base->type())};
  in.padded = true;
  return in;
}

std::vector<TensorInput*> slots_of(OpCall& call) {
  std::vector<TensorInput*> slots;
  for (size_t i = 0; i < call.args.size(); ++i) {
    if (call.args[i].kind != Arg::Kind::Tensor && call.args[i].kind != Arg::Kind::TensorList) continue;
    for (auto& in : call.inputs[i]) slots.push_back(in ? &*in : nullptr);
  }
  return slots;
}

bool reads_padded(const TensorInput* in) {
  return in && !in->padded && in->storage->base->padded() &&
         in->storage->base->state() != DeviceBuffer::State::Error;
}

Arg make_arg(Arg::Kind kind, size_t index) {
  Arg a;
  a.kind = kind;
  a.index = static_cast<int>(index);
  return a;
}

Arg int_numbers(const std::vector<int64_t>& values, size_t index) {
  Arg a = make_arg(Arg::Kind::NumberList, index);
  for (int64_t v : values) {
    lowering::Number n;
    n.kind = lowering::Number::Kind::Int;
    n.i = v;
    a.numbers.push_back(n);
  }
  return a;
}

// A stand-in for a padded base grown by `delta` along its padded dimension,
// in the bucket of its new size: what the op will read then.
std::unique_ptr<Storage> grown(const DeviceBuffer& base, int64_t delta, int device) {
  const int dim = base.padding().dim;
  TensorType logical = base.logical_type();
  logical.shape[dim] += delta;
  TensorType physical = logical;
  physical.shape[dim] = bucket_of(logical.shape[dim]);
  auto s = std::make_unique<Storage>(logical.nbytes(), device);
  s->base = DeviceBuffer::deferred_zeros(physical, device);
  s->base->set_padding(dim, logical.shape[dim]);
  return s;
}

// How far the padded input nearest its bucket's end is from it, and that
// bucket: once per op signature and bucket (`slots` are the op's inputs),
// when the op has seen that input grow and it is within a quarter of the
// bucket's end. A padded tensor that keeps its size (a marked batch) never
// gets there: compiling its next bucket would only cost. Called under the
// executor's lock (run_op).
std::optional<std::pair<int64_t, int64_t>> near_bucket_end(const OpCall& call,
                                                           const std::vector<TensorInput*>& slots) {
  int64_t room = -1, bucket = 0;
  std::string key = call.lowering->name;
  for (const Arg& a : call.args)
    if (a.kind == Arg::Kind::Int || a.kind == Arg::Kind::IntList) {
      key += '/';
      key += std::to_string(a.i);
      for (int64_t v : a.ints) key += "," + std::to_string(v);
    }
  for (auto* in : slots) {
    if (!in) continue;
    const auto& base = in->storage->base;
    base->type().append_key(key);
    if (!in->padded && !reads_padded(in)) {  // a box reads its input physical
      in->view.append_key(key);
      continue;
    }
    const int64_t extent = base->type().shape[base->padding().dim];
    if (room < 0 || extent - base->padding().size < room) {
      room = extent - base->padding().size;
      bucket = extent;
    }
  }
  if (room < 0) return std::nullopt;
  struct Seen {
    int64_t room;
    bool compiled;
  };
  static auto& seen = *new std::map<std::string, Seen>;  // never destroyed: used during exit
  if (seen.size() > 4096) seen.clear();  // bounded: a key per op signature and bucket
  auto [it, fresh] = seen.try_emplace(std::move(key), Seen{room, false});
  const bool grew = !fresh && room < it->second.room;
  it->second.room = room;
  if (!grew || it->second.compiled || room > bucket / 4) return std::nullopt;
  it->second.compiled = true;
  return std::make_pair(room, bucket);
}

// A view that is a box of the logical tensor (a slice in each dimension with
// step 1, in any order, size-1 dimensions dropped): its start and size per
// dimension of the tensor, and which tensor dimension each view dimension is.
struct Box {
  std::vector<int64_t> starts, sizes;
  std::vector<int> of_view;  // -1 for a view dimension of size 1
};

std::optional<Box> box_of(const ViewGeometry& v, const TensorType& logical) {
  if (v.dtype != logical.dtype || v.numel() == 0) return std::nullopt;
  const auto& shape = logical.shape;
  auto strides = contiguous_strides(shape);
  Box box;
  box.starts.assign(shape.size(), 0);
  box.sizes.assign(shape.size(), 1);
  int64_t rest = v.offset;
  for (size_t d = 0; d < shape.size(); ++d) {
    box.starts[d] = rest / strides[d];
    rest %= strides[d];
  }
  if (!shape.empty() && box.starts[0] >= shape[0]) return std::nullopt;
  std::vector<bool> used(shape.size(), false);
  for (size_t j = 0; j < v.sizes.size(); ++j) {
    if (v.sizes[j] == 1) {
      box.of_view.push_back(-1);
      continue;
    }
    int found = -1;
    for (size_t d = 0; d < shape.size(); ++d)
      if (!used[d] && shape[d] > 1 && strides[d] == v.strides[j]) found = static_cast<int>(d);
    if (found < 0 || box.starts[found] + v.sizes[j] > shape[found]) return std::nullopt;
    used[found] = true;
    box.sizes[found] = v.sizes[j];
    box.of_view.push_back(found);
  }
  return box;
}

// Cuts the box out of the padded buffer into a storage of its own, and
// points `in` at it.
bool read_box(TensorInput& in, std::vector<std::unique_ptr<Storage>>& staged) {
  const auto& base = in.storage->base;
  auto box = box_of(in.view, base->logical_type());
  int dim = base->padding().dim;
  if (!box || box->sizes[dim] >= base->padding().size) return false;  // the whole extent: exact
  OpCall call;
  call.lowering = &lowering::box_lowering();
  call.device = in.storage->device;
  call.args.push_back(make_arg(Arg::Kind::Tensor, 0));
  Arg sizes = make_arg(Arg::Kind::IntList, 1);
  sizes.ints = box->sizes;
  call.args.push_back(sizes);
  call.args.push_back(int_numbers(box->starts, 2));
  call.inputs = {{physical(in.storage)}, {}, {}};
  TensorType type{base->type().dtype, box->sizes};
  auto s = std::make_unique<Storage>(type.nbytes(), call.device);
  // The same box of the next bucket (compile_next_buckets), from a copy:
  // run_op takes the call's arguments.
  std::optional<OpCall> next;
  std::unique_ptr<Storage> stand_in;
  if (eager_mode() == EagerMode::Strict)
    if (auto near = near_bucket_end(call, {&*call.inputs[0][0]})) {
      stand_in = grown(*base, near->first, call.device);
      next = call;
      next->inputs[0][0] = physical(stand_in.get());
    }
  s->base = run_op(call).at(0);
  if (next) compile_ahead(*next);  // a box of any bucket that holds it is valid
  auto box_strides = contiguous_strides(box->sizes);
  ViewGeometry view = in.view;
  view.offset = 0;
  for (size_t j = 0; j < view.sizes.size(); ++j)
    view.strides[j] = box->of_view[j] < 0 ? 1 : box_strides[box->of_view[j]];
  in = TensorInput{s.get(), view};
  staged.push_back(std::move(s));
  return true;
}

// A cat that has seen another size along its dimension for the same other
// sizes: the tensor it builds grows (a KV cache, generate()'s input_ids).
bool growing_cat(const OpCall& call) {
  const auto& ins = call.inputs.at(0);
  int64_t rank = -1;
  for (const auto& in : ins)
    if (in && !(in->view.sizes.size() == 1 && in->view.sizes[0] == 0))
      rank = static_cast<int64_t>(in->view.sizes.size());
  if (rank <= 0 || call.args.size() < 2) return false;
  int64_t dim = call.args[1].i < 0 ? call.args[1].i + rank : call.args[1].i;
  if (dim < 0 || dim >= rank) return false;
  std::string key = std::to_string(dim) + "@" + std::to_string(call.device);
  int64_t total = 0;
  for (const auto& in : ins) {
    if (!in || static_cast<int64_t>(in->view.sizes.size()) != rank) continue;
    hlo::Shape s = in->view.sizes;
    total += s[dim];
    s[dim] = -1;
    key += TensorType{in->view.dtype, s}.str();
  }
  static std::mutex mu;
  static auto& seen = *new std::map<std::string, int64_t>;  // never destroyed: used during exit
  std::lock_guard<std::mutex> lock(mu);
  if (seen.size() > 4096) seen.clear();  // bounded: a key per distinct cat
  constexpr int64_t kGrows = -1;  // seen with two sizes: padded from now on
  auto [it, fresh] = seen.emplace(key, total);
  if (fresh) return false;
  if (it->second == kGrows) return true;
  if (it->second == total) return false;
  it->second = kGrows;
  return true;
}

std::vector<int> differing_dims(const TensorType& a, const TensorType& b) {
  std::vector<int> dims;
  for (size_t d = 0; d < a.shape.size(); ++d)
    if (a.shape[d] != b.shape[d]) dims.push_back(static_cast<int>(d));
  return dims;
}

}  // namespace

void copy_rows(const void* from, int64_t from_extent, void* to, int64_t to_extent,
               const TensorType& logical, int dim) {
  int64_t inner = hlo::byte_size(logical.dtype), outer = 1;
  for (int64_t d = dim + 1; d < logical.rank(); ++d) inner *= logical.shape[d];
  for (int64_t d = 0; d < dim; ++d) outer *= logical.shape[d];
  int64_t rows = logical.shape[dim] * inner;
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(static_cast<char*>(to) + o * to_extent * inner,
                static_cast<const char*>(from) + o * from_extent * inner, static_cast<size_t>(rows));
}

// Always above the size: a padded buffer is never exactly full, so an op's
// padded results are told apart from its static ones by their shape.
int64_t bucket_of(int64_t size) {
  int64_t b = 16;
  while (b <= size) b *= 2;
  return b;
}

std::optional<PaddedView> padded_view_of(const TensorInput& in) {
  const auto& base = in.storage->base;
  const int dim = base->padding().dim;
  return padded_view(in.view, base->logical_type(), dim, base->type().shape[dim]);
}

void unpad(Storage& s) {
  auto base = s.base;
  if (!base->padded()) return;
  OpCall call;
  call.lowering = &lowering::unpad_lowering();
  call.device = s.device;
  call.args.push_back(make_arg(Arg::Kind::Tensor, 0));
  Arg dim = make_arg(Arg::Kind::Int, 1), size = make_arg(Arg::Kind::Int, 2);
  dim.i = base->padding().dim;
  size.i = base->padding().size;
  call.args.push_back(dim);
  call.args.push_back(size);
  call.inputs = {{physical(&s)}, {}, {}};
  // Not into a capture: the storage outlives it, and a capture's results are
  // never computed outside its program.
  s.base = (capturing() ? run_op_alone(call) : run_op(call)).at(0);
}

namespace {

// The op's inputs as lowering/padded.h sees them, and `logical`'s padded
// inputs pointed at stand-ins of their exact types (for type inference).
struct Inputs {
  std::vector<lowering::PaddedSlot> slots;
  std::vector<int64_t> dims, sizes;
  std::vector<std::unique_ptr<Storage>> stand_ins;
};

Inputs describe_inputs(const std::vector<TensorInput*>& slots, OpCall& logical) {
  Inputs r;
  std::vector<TensorInput*> logical_slots = slots_of(logical);
  for (size_t s = 0; s < slots.size(); ++s) {
    lowering::PaddedSlot ps;
    ps.present = slots[s] != nullptr;
    if (reads_padded(slots[s])) {
      const auto& base = slots[s]->storage->base;
      PaddedView pv = *padded_view_of(*slots[s]);
      ps.shape = pv.view.sizes;
      ps.dim = pv.dim;
      ps.size = base->padding().size;
      r.sizes.push_back(ps.size);
      auto fake = std::make_unique<Storage>(slots[s]->storage->nbytes, logical.device);
      fake->base = DeviceBuffer::deferred_zeros(base->logical_type(), logical.device);
      logical_slots[s]->storage = fake.get();
      r.stand_ins.push_back(std::move(fake));
    } else if (ps.present) {
      ps.shape = slots[s]->view.sizes;
    }
    r.dims.push_back(ps.dim);
    r.slots.push_back(std::move(ps));
  }
  return r;
}

// `call` as the padded wrapper of lowering/padded.h, its padded inputs read
// whole; the output spec (argument k + 2) is filled in later.
OpCall wrap(const OpCall& call, const std::vector<TensorInput*>& slots, const Inputs& in) {
  OpCall wrapped = call;
  std::vector<TensorInput*> wrapped_slots = slots_of(wrapped);
  for (size_t s = 0; s < slots.size(); ++s)
    if (in.dims[s] >= 0) *wrapped_slots[s] = TensorInput{slots[s]->storage, padded_view_of(*slots[s])->view, true};
  size_t k = wrapped.args.size();
  Arg inner = make_arg(Arg::Kind::String, k), dims = make_arg(Arg::Kind::IntList, k + 1);
  inner.s = call.lowering->name;
  dims.ints = in.dims;
  wrapped.lowering = call.lowering->static_numbers ? &lowering::padded_static_lowering()
                                                   : &lowering::padded_lowering();
  wrapped.args.push_back(inner);
  wrapped.args.push_back(dims);
  wrapped.args.push_back(make_arg(Arg::Kind::IntList, k + 2));
  wrapped.args.push_back(int_numbers(in.sizes, k + 3));
  wrapped.inputs.resize(wrapped.args.size());
  return wrapped;
}

// (dim, bound) per output: where the exact result (`want`) and the one on
// padded inputs (`have`) differ, padded to the bucket of the exact size;
// nullopt when they differ in more than that. A growing cat pads along its
// dimension even when no input was padded.
std::optional<std::vector<int64_t>> output_spec(const std::vector<TensorType>& want,
                                                const std::vector<TensorType>& have,
                                                std::optional<int64_t> grow_dim) {
  if (want.size() != have.size()) return std::nullopt;
  std::vector<int64_t> spec;
  for (size_t j = 0; j < want.size(); ++j) {
    if (want[j].rank() != have[j].rank() || want[j].dtype != have[j].dtype) return std::nullopt;
    std::vector<int> diff = differing_dims(want[j], have[j]);
    if (j == 0 && diff.empty() && grow_dim && want[0].rank() > 0)
      diff = {static_cast<int>(*grow_dim < 0 ? *grow_dim + want[0].rank() : *grow_dim)};
    if (diff.size() > 1) return std::nullopt;
    spec.push_back(diff.empty() ? -1 : diff[0]);
    spec.push_back(diff.empty() ? 0 : bucket_of(want[j].shape[diff[0]]));
  }
  return spec;
}

// The op as lowering/padded.h's wrapper of its padded inputs read whole, its
// output spec filled in (argument k + 2), with the exact result types; nullopt
// when no rule covers it.
struct Wrapped {
  OpCall call;
  std::vector<int64_t> spec;
  std::vector<TensorType> want;
};

std::optional<Wrapped> wrap_padded(OpCall call, std::optional<int64_t> grow_dim) {
  std::vector<TensorInput*> slots = slots_of(call);
  OpCall logical = call;
  Inputs in = describe_inputs(slots, logical);
  if (!lowering::plan_padded(call.lowering->name, call.args, in.slots)) return std::nullopt;
  Wrapped w{wrap(call, slots, in), {}, result_types(logical)};
  auto spec = output_spec(w.want, result_types(w.call), grow_dim);
  if (!spec) return std::nullopt;
  w.spec = *spec;
  w.call.args[w.call.args.size() - 2].ints = w.spec;
  return w;
}

// Strict mode compiles a padded op once per bucket, on the calling thread's
// time: a growing tensor (decoding's KV cache) would wait at each bucket's
// end for a handful of programs. So when the padded inputs come within a
// quarter of their bucket's end, the programs of their next sizes compile in
// the background: the one that crosses into the next bucket (inputs at their
// last size in this one) and the one that runs in it (inputs at its first
// size). Each is the program those sizes will launch, built by the same
// path; a size never reached costs one compile, nothing else.
void compile_next_buckets(const OpCall& call, const std::vector<TensorInput*>& slots) {
  for (auto* in : slots)  // stand-ins are whole tensors: views of them would not match
    if (reads_padded(in) && !is_identity(in->view, in->storage->base->logical_type())) return;
  auto near = near_bucket_end(call, slots);
  if (!near) return;
  const int64_t room = near->first;
  for (int64_t delta : {room - 1, room}) {
    if (delta <= 0) continue;  // the crossing is this op: compiled already
    OpCall future = call;
    std::vector<TensorInput*> future_slots = slots_of(future);
    std::vector<std::unique_ptr<Storage>> stand_ins;
    for (size_t s = 0; s < slots.size(); ++s) {
      if (!reads_padded(slots[s])) continue;
      stand_ins.push_back(grown(*slots[s]->storage->base, delta, call.device));
      *future_slots[s] = TensorInput{stand_ins.back().get(), whole_view(stand_ins.back()->base->logical_type())};
    }
    try {
      if (auto w = wrap_padded(future, std::nullopt)) compile_ahead(w->call);
    } catch (const Error&) {
      // Sizes the op will never take (an input that does not grow with the
      // others): nothing to compile; the op itself ran.
    }
  }
}

std::vector<int64_t> sizes_of(const Arg& numbers) {
  std::vector<int64_t> sizes;
  for (const auto& n : numbers.numbers) sizes.push_back(n.i);
  return sizes;
}

// Counts a program saved (torch_tpu.metrics()'s `programs_saved_by_padding`)
// each time a padded op runs at true sizes its program has not met before:
// without padding, those sizes would have compiled a program of their own.
void count_saved(const OpCall& wrapped, const std::vector<int64_t>& sizes) {
  std::string key = wrapped.lowering->name;
  for (const Arg& a : wrapped.args) key += a.kind == Arg::Kind::String ? a.s : "";
  for (const auto& ins : wrapped.inputs)
    for (const auto& in : ins)
      if (in) in->view.append_key(key);
  static std::mutex mu;
  static auto& seen = *new std::map<std::string, std::set<std::vector<int64_t>>>;  // used during exit
  std::lock_guard<std::mutex> lock(mu);
  if (seen.size() > 4096) seen.clear();  // bounded: a key per op signature and bucket
  auto& sizes_seen = seen[key];
  if (sizes_seen.insert(sizes).second && sizes_seen.size() > 1) count("programs_saved_by_padding");
}

}  // namespace

std::optional<std::vector<std::shared_ptr<DeviceBuffer>>> run_padded(
    OpCall& call, std::vector<std::unique_ptr<Storage>>& staged) {
  // Every op passes here: the common case (nothing padded, not a cat) is a
  // scan of the inputs.
  bool any = false;
  for (const auto& ins : call.inputs)
    for (const auto& in : ins) any = any || (in && reads_padded(&*in));
  static const lowering::Lowering* cat = lowering::find_lowering("aten::cat");
  bool growing = !any && call.lowering == cat && growing_cat(call);
  if (!any && !growing) return std::nullopt;
  std::vector<TensorInput*> slots = slots_of(call);
  const std::string& name = call.lowering->name;
  bool ruled = lowering::has_padded_rule(name);
  for (auto* in : slots) {
    if (!reads_padded(in)) continue;
    if (ruled && padded_view_of(*in)) continue;
    read_box(*in, staged);  // else read exact (by record)
  }
  if (!ruled || !call.destinations.empty()) return std::nullopt;
  for (auto* in : slots)
    if (reads_padded(in) && !padded_view_of(*in)) return std::nullopt;

  auto w = wrap_padded(call, growing ? std::optional<int64_t>(call.args[1].i) : std::nullopt);
  if (!w) return std::nullopt;
  count_saved(w->call, sizes_of(w->call.args.back()));
  std::vector<std::shared_ptr<DeviceBuffer>> results = run_op(w->call);
  for (size_t j = 0; j < results.size(); ++j)
    if (results[j] && w->spec[2 * j] >= 0)
      results[j]->set_padding(static_cast<int>(w->spec[2 * j]), w->want[j].shape[w->spec[2 * j]]);
  if (any && eager_mode() == EagerMode::Strict) compile_next_buckets(call, slots);
  return results;
}

std::shared_ptr<DeviceBuffer> pad_dimension(const TensorInput& src, int dim) {
  unpad(*src.storage);
  std::shared_ptr<DeviceBuffer> exact = read_contiguous(src);
  std::vector<char> host(static_cast<size_t>(exact->type().nbytes()));
  exact->to_host(host.data());
  return upload_padded(host.data(), exact->type(), dim, src.storage->device);
}

std::shared_ptr<DeviceBuffer> upload_padded(const void* data, const TensorType& logical, int dim, int device) {
  TensorType padded = logical;
  padded.shape[dim] = bucket_of(logical.shape[dim]);
  std::vector<char> out(static_cast<size_t>(padded.nbytes()), 0);
  copy_rows(data, logical.shape[dim], out.data(), padded.shape[dim], logical, dim);
  auto buffer = upload(out.data(), padded, device);
  buffer->set_padding(dim, logical.shape[dim]);
  return buffer;
}

}  // namespace torch_tpu::runtime
