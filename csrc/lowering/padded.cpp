#include "lowering/padded.h"

#include <algorithm>
#include <map>

#include "lowering/common.h"

namespace torch_tpu::lowering {

using hlo::Builder;
using hlo::Compare;
using hlo::Shape;
using hlo::TensorType;
using hlo::Value;
using E = hlo::ElementType;

namespace {

enum class Kind { Attention, Bmm, Cat, Convert, Gather, Identity, Mm, Pointwise, Reduce, ReduceOther, Softmax };

struct Rule {
  Kind kind;
  Fill fill = Fill::None;  // Reduce: the identity of the reduction
};

// Sorted by name.
const std::map<std::string, Rule>& rules() {
  static const std::map<std::string, Rule> table = {
      {"aten::_log_softmax", {Kind::Softmax, Fill::Lowest}},
      {"aten::_scaled_dot_product_fused_attention_overrideable", {Kind::Attention}},
      {"aten::_softmax", {Kind::Softmax, Fill::Lowest}},
      {"aten::_to_copy", {Kind::Pointwise}},
      {"aten::abs", {Kind::Pointwise}},
      {"aten::add.Scalar", {Kind::Pointwise}},
      {"aten::add.Tensor", {Kind::Pointwise}},
      {"aten::addmm", {Kind::Mm}},
      {"aten::all", {Kind::Reduce, Fill::True}},
      {"aten::all.dim", {Kind::Reduce, Fill::True}},
      {"aten::amax", {Kind::Reduce, Fill::Lowest}},
      {"aten::amin", {Kind::Reduce, Fill::Highest}},
      {"aten::any", {Kind::Reduce, Fill::False}},
      {"aten::any.dim", {Kind::Reduce, Fill::False}},
      {"aten::bitwise_and.Tensor", {Kind::Pointwise}},
      {"aten::bitwise_not", {Kind::Pointwise}},
      {"aten::bitwise_or.Tensor", {Kind::Pointwise}},
      {"aten::bmm", {Kind::Bmm}},
      {"aten::cat", {Kind::Cat}},
      {"aten::clone", {Kind::Pointwise}},
      {"aten::cos", {Kind::Pointwise}},
      // A running sum along the padded dimension reads no later entry, so the
      // padding at the end never reaches a valid one.
      {"aten::cumsum", {Kind::Pointwise}},
      {"aten::div.Tensor", {Kind::Pointwise}},
      {"aten::embedding", {Kind::Gather}},  // XLA clamps the padding's indices
      {"aten::eq.Scalar", {Kind::Pointwise}},
      {"aten::eq.Tensor", {Kind::Pointwise}},
      {"aten::exp", {Kind::Pointwise}},
      {"aten::ge.Scalar", {Kind::Pointwise}},
      {"aten::gelu", {Kind::Pointwise}},
      {"aten::gt.Scalar", {Kind::Pointwise}},
      {"aten::le.Scalar", {Kind::Pointwise}},
      {"aten::log", {Kind::Pointwise}},
      {"aten::logical_and", {Kind::Pointwise}},
      {"aten::logical_not", {Kind::Pointwise}},
      {"aten::lt.Scalar", {Kind::Pointwise}},
      {"aten::masked_fill.Scalar", {Kind::Pointwise}},
      {"aten::maximum", {Kind::Pointwise}},
      {"aten::mean.dim", {Kind::ReduceOther}},
      {"aten::minimum", {Kind::Pointwise}},
      {"aten::mm", {Kind::Mm}},
      {"aten::mul.Scalar", {Kind::Pointwise}},
      {"aten::mul.Tensor", {Kind::Pointwise}},
      {"aten::ne.Scalar", {Kind::Pointwise}},
      {"aten::neg", {Kind::Pointwise}},
      {"aten::pow.Tensor_Scalar", {Kind::Pointwise}},
      {"aten::reciprocal", {Kind::Pointwise}},
      {"aten::relu", {Kind::Pointwise}},
      {"aten::rsqrt", {Kind::Pointwise}},
      {"aten::sigmoid", {Kind::Pointwise}},
      {"aten::silu", {Kind::Pointwise}},
      {"aten::sin", {Kind::Pointwise}},
      {"aten::sqrt", {Kind::Pointwise}},
      {"aten::sub.Tensor", {Kind::Pointwise}},
      {"aten::sum.dim_IntList", {Kind::Reduce, Fill::Zero}},
      {"aten::tanh", {Kind::Pointwise}},
      {"aten::where.self", {Kind::Pointwise}},
      {"tpu::contiguous", {Kind::Identity}},
      {"tpu::convert", {Kind::Convert}},
  };
  return table;
}

using Fills = std::vector<Fill>;
using Slots = std::vector<PaddedSlot>;

int64_t rank_of(const PaddedSlot& s) { return static_cast<int64_t>(s.shape.size()); }

// Pointwise ops broadcast: every padded slot must land on the same output
// dimension with the same bound and size, and every other slot must have
// size 1 there (or not reach it).
bool aligned(const Slots& slots) {
  int64_t out_rank = 0;
  for (const auto& s : slots)
    if (s.present) out_rank = std::max(out_rank, rank_of(s));
  int64_t at = -1, bound = 0, size = 0;
  for (const auto& s : slots) {
    if (!s.present || s.dim < 0) continue;
    int64_t d = s.dim + out_rank - rank_of(s);
    if (at < 0) {
      at = d;
      bound = s.shape[s.dim];
      size = s.size;
    } else if (d != at || s.shape[s.dim] != bound || s.size != size) {
      return false;
    }
  }
  for (const auto& s : slots) {
    if (!s.present || s.dim >= 0) continue;
    int64_t d = at - (out_rank - rank_of(s));
    if (d >= 0 && s.shape[d] != 1) return false;
  }
  return at >= 0;
}

bool only_first_padded(const Slots& slots) {
  for (size_t i = 1; i < slots.size(); ++i)
    if (slots[i].dim >= 0) return false;
  return !slots.empty() && slots[0].dim >= 0;
}

std::optional<Fills> plan_reduce(const Rule& rule, const Args& args, const Slots& slots) {
  if (!only_first_padded(slots)) return std::nullopt;
  Fills fills(slots.size(), Fill::None);
  Arg all;  // None: aten::all and aten::any reduce every dimension
  auto dims = reduction_dims(args.size() > 1 ? args[1] : all, rank_of(slots[0]));
  bool over_padded = std::find(dims.begin(), dims.end(), slots[0].dim) != dims.end();
  if (over_padded && rule.kind == Kind::ReduceOther) return std::nullopt;
  if (over_padded) fills[0] = rule.fill;
  return fills;
}

// The indices may be padded; the table is not.
std::optional<Fills> plan_gather(const Slots& slots) {
  if (slots.size() != 2 || slots[0].dim >= 0 || slots[1].dim < 0) return std::nullopt;
  return Fills(slots.size(), Fill::None);
}

std::optional<Fills> plan_softmax(const Rule& rule, const Args& args, const Slots& slots) {
  if (!only_first_padded(slots)) return std::nullopt;
  Fills fills(slots.size(), Fill::None);
  if (wrap_dim(args.at(1).as_int(), rank_of(slots[0])) == slots[0].dim) fills[0] = rule.fill;
  return fills;
}

// A product's padded dimensions: rows of the left matrix, columns of the
// right one and (bmm) the batch pass through; a contraction padded on both
// sides alike is summed with zeros in both paddings (garbage times zero can
// be NaN). `lhs` is the left matrix's slot, `batch` how many batch dims.
std::optional<Fills> plan_product(const Slots& slots, size_t lhs, int batch) {
  if (slots.size() < lhs + 2) return std::nullopt;
  const PaddedSlot &a = slots[lhs], &b = slots[lhs + 1];
  Fills fills(slots.size(), Fill::None);
  const int rows = batch, inner = batch + 1, cols = batch + 1;
  if (a.dim == inner || b.dim == batch) {  // the contraction
    if (a.dim != inner || b.dim != batch || a.size != b.size || a.shape[inner] != b.shape[batch])
      return std::nullopt;
    fills[lhs] = fills[lhs + 1] = Fill::Zero;
    return fills;
  }
  if (batch > 0 && (a.dim == 0 || b.dim == 0)) {  // the batch: padded alike on both sides
    if (a.dim != 0 || b.dim != 0 || a.size != b.size || a.shape[0] != b.shape[0]) return std::nullopt;
    return fills;
  }
  if (a.dim >= 0 && b.dim >= 0) return std::nullopt;  // rows and columns at once: two dims
  if (a.dim >= 0 && a.dim != rows) return std::nullopt;
  if (b.dim >= 0 && b.dim != cols) return std::nullopt;
  return fills;
}

// addmm's bias must be padded as the result is, or broadcast over it.
std::optional<Fills> plan_mm(const std::string& name, const Slots& slots) {
  size_t lhs = name == "aten::addmm" ? 1 : 0;
  auto fills = plan_product(slots, lhs, 0);
  if (!fills || lhs == 0) return fills;
  const PaddedSlot &bias = slots[0], &a = slots[1], &b = slots[2];
  int out_dim = a.dim == 0 ? 0 : b.dim == 1 ? 1 : -1;
  if (out_dim < 0) return bias.dim < 0 ? fills : std::nullopt;
  const PaddedSlot& by = out_dim == 0 ? a : b;
  int64_t at = out_dim - (2 - rank_of(bias));  // the bias dimension on the padded one
  bool broadcast = bias.dim < 0 && (at < 0 || bias.shape[at] == 1);
  bool alike = bias.dim == at && bias.size == by.size && bias.shape[at] == by.shape[out_dim];
  if (!broadcast && !alike) return std::nullopt;
  return fills;
}

std::optional<Fills> plan_cat(const Args& args, const Slots& slots) {
  int64_t rank = -1;
  for (const auto& s : slots) {
    if (!s.present) return std::nullopt;
    if (rank_of(s) == 1 && s.shape[0] == 0 && s.dim < 0) continue;  // skipped by cat
    if (rank < 0) rank = rank_of(s);
    if (rank_of(s) != rank || rank == 0) return std::nullopt;
  }
  if (rank < 0) return std::nullopt;
  int64_t dim = wrap_dim(args.at(1).as_int(), rank);
  // Along another dimension, every part must be padded alike (rotary's
  // halves): the result is padded there too.
  const PaddedSlot* other = nullptr;
  for (const auto& s : slots)
    if (s.dim >= 0 && s.dim != dim) other = &s;
  for (const auto& s : slots) {
    if (!other) {
      if (s.dim >= 0 && s.dim != dim) return std::nullopt;
    } else if (!(rank_of(s) == 1 && s.shape[0] == 0 && s.dim < 0) &&
               (s.dim != other->dim || s.size != other->size || s.shape[s.dim] != other->shape[other->dim])) {
      return std::nullopt;
    }
  }
  return Fills(slots.size(), Fill::None);
}

// Keys and values padded along the sequence (their padded positions are
// masked), queries padded along theirs (their rows are garbage nobody reads),
// or both. A causal mask needs queries and keys padded alike: then no valid
// query reaches a padded key. A mask of the caller's is not taken.
std::optional<Fills> plan_attention(const Args& args, const Slots& slots) {
  if (slots.size() < 3) return std::nullopt;
  const PaddedSlot &q = slots[0], &k = slots[1], &v = slots[2];
  int64_t r = rank_of(q);
  if (r < 2 || (q.dim >= 0 && q.dim != r - 2)) return std::nullopt;
  if (k.dim >= 0 || v.dim >= 0) {
    if (k.dim != r - 2 || v.dim != r - 2 || k.size != v.size || k.shape[k.dim] != v.shape[v.dim])
      return std::nullopt;
  }
  if (args.at(5).as_bool() &&  // is_causal
      (q.dim < 0 || k.dim < 0 || q.size != k.size || q.shape[q.dim] != k.shape[k.dim]))
    return std::nullopt;
  for (size_t i = 3; i < slots.size(); ++i)
    if (slots[i].present) return std::nullopt;
  return Fills(slots.size(), Fill::None);
}

Value fill_value(Builder& b, Fill f, E t) {
  switch (f) {
    case Fill::Lowest: return b.min_value(t);
    case Fill::Highest: return b.max_value(t);
    case Fill::True: return cast(b, b.constant_bool(true), t);
    case Fill::False:
    case Fill::Zero:
    case Fill::None: break;
  }
  return cast(b, b.constant_bool(false), t);
}

// True where the index along `dim` is below `size`.
Value valid(Builder& b, const Shape& shape, int64_t dim, Value size) {
  Value at = b.iota(TensorType{E::I64, shape}, dim);
  return b.compare(at, b.broadcast_in_dim(size, shape, {}), Compare::LT);
}

Value resize(Builder& b, Value v, int64_t dim, int64_t bound) {
  int64_t have = v.shape()[dim];
  if (have == bound) return v;
  std::vector<int64_t> zero(v.rank(), 0), high(v.rank(), 0);
  if (have > bound) {
    std::vector<int64_t> limit = v.shape(), step(v.rank(), 1);
    limit[dim] = bound;
    return b.slice(v, zero, limit, step);
  }
  high[dim] = bound - have;
  return b.pad(v, b.zeros(v.dtype(), {}), zero, high, zero);
}

// Each part at the running sum of the true sizes before it. The work area is
// long enough that no write is clamped (dynamic_update_slice moves a write
// that would run past the end).
Value padded_cat(Context& ctx, const Args& args, const std::vector<Value>& sizes, Value like,
                 int64_t bound) {
  Builder& b = ctx.b;
  std::vector<Value> parts;
  for (const auto& t : args[0].tensors) parts.push_back(*t);
  int64_t dim = wrap_dim(args[1].as_int(), like.rank());
  int64_t room = bound;
  for (const auto& p : parts) room += p.rank() == like.rank() ? p.shape()[dim] : 0;
  Shape work_shape = like.shape();
  work_shape[dim] = room;
  Value work = b.zeros(like.dtype(), work_shape);
  Value offset = b.constant_int(0, E::I64);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].rank() != like.rank()) continue;  // a skipped 1-D empty tensor
    std::vector<Value> starts(like.rank(), b.constant_int(0, E::I64));
    starts[dim] = offset;
    work = b.dynamic_update_slice(work, cast(b, parts[i], like.dtype()), starts);
    Value length = sizes[i].valid() ? sizes[i] : b.constant_int(parts[i].shape()[dim], E::I64);
    offset = b.add(offset, length);
  }
  return resize(b, work, dim, bound);
}

// Element i of a NumberList argument, as the int64 parameter it is fed as.
Value list_number(Context& ctx, const Arg& list, size_t i) {
  Arg n;
  n.kind = Arg::Kind::Number;
  n.index = list.index;
  n.element = static_cast<int>(i);
  n.number = list.numbers.at(i);
  return ctx.number(n, E::I64);
}

struct SlotRef {
  size_t arg;
  int entry;  // -1: a Tensor argument
};

std::vector<SlotRef> slot_refs(const Args& args) {
  std::vector<SlotRef> refs;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].kind == Arg::Kind::Tensor) refs.push_back({i, -1});
    if (args[i].kind == Arg::Kind::TensorList)
      for (size_t e = 0; e < args[i].tensors.size(); ++e) refs.push_back({i, static_cast<int>(e)});
  }
  return refs;
}

std::vector<Value> lower_padded(Context& ctx, const Args& all) {
  Builder& b = ctx.b;
  size_t k = all.size() - 4;
  const std::string& name = all[k].s;
  const auto& dims = all[k + 1].ints;
  const auto& outs = all[k + 2].ints;
  Args args(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k));
  std::vector<SlotRef> refs = slot_refs(args);
  TPU_CHECK(refs.size() == dims.size(), ErrorKind::Runtime, "padded ", name, ": ", refs.size(),
            " inputs for ", dims.size(), " dimensions");
  Slots slots(refs.size());
  std::vector<Value> sizes(refs.size());
  int padded = 0;
  for (size_t s = 0; s < refs.size(); ++s) {
    const Arg& a = args[refs[s].arg];
    std::optional<Value> v = refs[s].entry < 0 ? std::optional<Value>(a.tensor) : a.tensors[refs[s].entry];
    slots[s].present = v.has_value();
    if (v) slots[s].shape = v->shape();
    slots[s].dim = static_cast<int>(dims[s]);
    if (dims[s] < 0) continue;
    slots[s].size = all[k + 3].numbers.at(padded).i;
    sizes[s] = list_number(ctx, all[k + 3], padded++);
  }
  const Rule& rule = rules().at(name);
  std::optional<Fills> fills = plan_padded(name, args, slots);
  TPU_CHECK(fills.has_value(), ErrorKind::Runtime, "padded ", name, ": inputs do not fit its rule");
  for (size_t s = 0; s < refs.size(); ++s) {
    if ((*fills)[s] == Fill::None) continue;
    Arg& a = args[refs[s].arg];
    Value& v = refs[s].entry < 0 ? a.tensor : *a.tensors[refs[s].entry];
    v = b.select(valid(b, v.shape(), slots[s].dim, sizes[s]), v,
                 b.broadcast_in_dim(fill_value(b, (*fills)[s], v.dtype()), v.shape(), {}));
  }
  std::vector<Value> out;
  // The runtime's own copies (runtime/copies.cpp) are not in the registry.
  if (rule.kind == Kind::Identity) {
    out = {args[0].tensor};
  } else if (rule.kind == Kind::Convert) {
    out = {cast(b, args[0].tensor, args[1].dtype)};
  } else {
    // Causal attention's valid queries never reach a padded key: no mask.
    if (rule.kind == Kind::Attention && slots[1].dim >= 0 && !args[5].as_bool()) {
      const PaddedSlot& key = slots[1];
      Shape mask{1, key.shape[key.dim]};
      args[3].kind = Arg::Kind::Tensor;
      args[3].tensor = valid(b, mask, 1, sizes[1]);
    }
    const Lowering* inner = find_lowering(name);
    TPU_CHECK(inner, ErrorKind::Runtime, "padded: no lowering ", name);
    out = inner->fn(ctx, args);
    if (rule.kind == Kind::Cat && outs.size() >= 2 && outs[0] >= 0 &&
        outs[0] == wrap_dim(args[1].as_int(), out[0].rank()))
      out[0] = padded_cat(ctx, args, sizes, out[0], outs[1]);
  }
  for (size_t j = 0; j < out.size() && 2 * j + 1 < outs.size(); ++j)
    if (outs[2 * j] >= 0) out[j] = resize(b, out[j], outs[2 * j], outs[2 * j + 1]);
  return out;
}

std::vector<Value> lower_unpad(Context& ctx, const Args& a) {
  Value x = a[0].as_tensor();
  std::vector<int64_t> zero(x.rank(), 0), limit = x.shape(), step(x.rank(), 1);
  limit[a[1].as_int()] = a[2].as_int();
  return {ctx.b.slice(x, zero, limit, step)};
}

std::vector<Value> lower_box(Context& ctx, const Args& a) {
  std::vector<Value> starts;
  for (size_t i = 0; i < a[2].numbers.size(); ++i) starts.push_back(list_number(ctx, a[2], i));
  return {ctx.b.dynamic_slice(a[0].as_tensor(), starts, a[1].as_ints())};
}

}  // namespace

bool has_padded_rule(const std::string& name) { return rules().count(name) != 0; }

std::optional<std::vector<Fill>> plan_padded(const std::string& name, const Args& args,
                                             const std::vector<PaddedSlot>& slots) {
  auto it = rules().find(name);
  if (it == rules().end()) return std::nullopt;
  const Rule& rule = it->second;
  switch (rule.kind) {
    case Kind::Attention: return plan_attention(args, slots);
    case Kind::Cat: return plan_cat(args, slots);
    case Kind::Convert:
    case Kind::Identity:
    case Kind::Pointwise:
      if (!aligned(slots)) return std::nullopt;
      return Fills(slots.size(), Fill::None);
    case Kind::Bmm: return plan_product(slots, 0, 1);
    case Kind::Gather: return plan_gather(slots);
    case Kind::Mm: return plan_mm(name, slots);
    case Kind::Reduce:
    case Kind::ReduceOther: return plan_reduce(rule, args, slots);
    case Kind::Softmax: return plan_softmax(rule, args, slots);
  }
  return std::nullopt;
}

const Lowering& padded_lowering() {
  static const Lowering l{"tpu::padded", &lower_padded};
  return l;
}

const Lowering& padded_static_lowering() {
  static const Lowering l{"tpu::padded", &lower_padded, true, false, false, true};
  return l;
}

const Lowering& unpad_lowering() {
  static const Lowering l{"tpu::unpad", &lower_unpad};
  return l;
}

const Lowering& box_lowering() {
  static const Lowering l{"tpu::box", &lower_box};
  return l;
}

}  // namespace torch_tpu::lowering
