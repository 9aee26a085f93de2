#include "distributed/programs/collectives.h"

#include "common/error.h"
#include "hlo/builder.h"

namespace torch_tpu::distributed::programs {

namespace {

using hlo::Builder;
using hlo::ElementType;
using hlo::Shape;
using hlo::TensorType;
using hlo::Value;

const char* op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Avg: return "AVG";
    case ReduceOp::BitAnd: return "BAND";
    case ReduceOp::BitOr: return "BOR";
    case ReduceOp::BitXor: return "BXOR";
    case ReduceOp::Max: return "MAX";
    case ReduceOp::Min: return "MIN";
    case ReduceOp::Product: return "PRODUCT";
    case ReduceOp::Sum: return "SUM";
  }
  return "?";
}

void check_world(int world, const char* collective) {
  TPU_CHECK(world >= 1, ErrorKind::Value, "tpu_dist program ", collective,
            ": world size must be positive, got ", world);
}

void check_rank(int rank, int world, const char* what, const char* collective) {
  TPU_CHECK(rank >= 0 && rank < world, ErrorKind::Value, "tpu_dist program ", collective, ": ",
            what, " ", rank, " is not a rank of a group of ", world);
}

// One group holding every replica: rank r is replica r.
Builder::ReplicaGroups everyone(int world) {
  std::vector<int64_t> ids(world);
  for (int r = 0; r < world; ++r) ids[r] = r;
  return {ids};
}

Shape prepend(int64_t n, const Shape& shape) {
  Shape s{n};
  s.insert(s.end(), shape.begin(), shape.end());
  return s;
}

// The combiner of `op` on `dtype`, or an error for combinations that have
// no meaning (the same ones the host path refuses).
Value (Builder::*combiner(ReduceOp op, ElementType dtype, const char* collective))(Value, Value) {
  const bool is_bool = dtype == ElementType::Bool;
  const bool bitwise = op == ReduceOp::BitAnd || op == ReduceOp::BitOr || op == ReduceOp::BitXor;
  TPU_CHECK(!(hlo::is_complex(dtype) && (op == ReduceOp::Min || op == ReduceOp::Max)),
            ErrorKind::Type, "tpu_dist program ", collective, ": reduce op ", op_name(op),
            " is not defined for ", hlo::mlir_name(dtype));
  TPU_CHECK(!bitwise || is_bool || hlo::is_integral(dtype), ErrorKind::Type, "tpu_dist program ",
            collective, ": bitwise reduce op ", op_name(op), " needs an integer dtype, got ",
            hlo::mlir_name(dtype));
  if (is_bool) {
    switch (op) {
      case ReduceOp::BitAnd: case ReduceOp::Min: case ReduceOp::Product: return &Builder::and_;
      case ReduceOp::BitXor: return &Builder::xor_;
      case ReduceOp::Avg:
        fail(ErrorKind::Type, "tpu_dist program ", collective, ": AVG is not defined for bool");
      default: return &Builder::or_;
    }
  }
  switch (op) {
    case ReduceOp::BitAnd: return &Builder::and_;
    case ReduceOp::BitOr: return &Builder::or_;
    case ReduceOp::BitXor: return &Builder::xor_;
    case ReduceOp::Max: return &Builder::max;
    case ReduceOp::Min: return &Builder::min;
    case ReduceOp::Product: return &Builder::mul;
    default: return &Builder::add;  // SUM, and AVG's sum
  }
}

// Whether XLA recognizes the combiner as a reduction kind: add, multiply,
// min, max, and and/or on bool. The CPU plugin refuses any other reduction
// computation ("Unsupported reduction computation"), so those are built from
// data movement instead, which every plugin runs.
bool native_combiner(Value (Builder::*combine)(Value, Value), ElementType dtype) {
  if (combine == &Builder::and_ || combine == &Builder::or_) return dtype == ElementType::Bool;
  return combine != &Builder::xor_;
}

// The other combiners (integer and/or/xor, bool xor): every replica receives
// the operands it needs and folds them itself, in rank order. For all_reduce
// that is an all_gather; for reduce_scatter an all_to_all brings replica r
// everyone's row r, which moves no more data than the reduce_scatter would.
Value exchange_and_fold(Builder& b, Value x, Value (Builder::*combine)(Value, Value), int world,
                        bool scatter) {
  Value stacked = scatter ? b.all_to_all(x, 0, 0, everyone(world))
                          : b.all_gather(b.reshape(x, prepend(1, x.shape())), 0, everyone(world));
  Value identity = combine == &Builder::and_
                       ? b.not_(b.constant_int(0, x.dtype()))  // all ones
                       : b.constant_int(0, x.dtype());
  Value folded = b.reduce({stacked}, {identity}, {0},
                          [combine](Builder& r, const std::vector<Value>& a) {
                            return std::vector<Value>{(r.*combine)(a[0], a[1])};
                          })[0];
  // reduce_scatter keeps a leading dimension of one, like the native op.
  return scatter ? b.reshape(folded, prepend(1, folded.shape())) : folded;
}

// Reduces `x` across all replicas: the whole of it (all_reduce) or, with
// `scatter`, this replica's slice of dimension 0 (reduce_scatter). AVG sums,
// then divides by the world size; integers are summed in int64 first so the
// mean is that of the exact sum, as on the host path.
Value reduce_across(Builder& b, Value x, ReduceOp op, int world, bool scatter,
                    const char* collective) {
  const ElementType dtype = x.dtype();
  auto combine = combiner(op, dtype, collective);
  if (!native_combiner(combine, dtype)) return exchange_and_fold(b, x, combine, world, scatter);
  const bool int_mean = op == ReduceOp::Avg && hlo::is_integral(dtype);
  TPU_CHECK(!(int_mean && dtype == ElementType::U64), ErrorKind::NotImplemented,
            "tpu_dist program ", collective, ": AVG of uint64 needs a 128-bit sum");
  if (int_mean && dtype != ElementType::I64) x = b.convert(x, ElementType::I64);
  hlo::RegionFn region = [combine](Builder& r, const std::vector<Value>& args) {
    return std::vector<Value>{(r.*combine)(args[0], args[1])};
  };
  Value y = scatter ? b.reduce_scatter(x, 0, everyone(world), region)
                    : b.all_reduce(x, everyone(world), region);
  if (op == ReduceOp::Avg) {
    y = b.div(y, b.full(world, y.dtype(), y.shape()));
    if (y.dtype() != dtype) y = b.convert(y, dtype);
  }
  return y;
}

Program finish(Builder& b, Value result, const TensorType& input, int world) {
  return Program{b.module({result}), input, result.type, world};
}

}  // namespace

Program all_reduce(ReduceOp op, ElementType dtype, const Shape& shape, int world) {
  check_world(world, "all_reduce");
  Builder b;
  TensorType in{dtype, shape};
  Value x = b.parameter(in);
  return finish(b, reduce_across(b, x, op, world, false, "all_reduce"), in, world);
}

Program all_gather(ElementType dtype, const Shape& shape, int world) {
  check_world(world, "all_gather");
  Builder b;
  TensorType in{dtype, shape};
  Value x = b.reshape(b.parameter(in), prepend(1, shape));
  return finish(b, b.all_gather(x, 0, everyone(world)), in, world);
}

Program reduce_scatter(ReduceOp op, ElementType dtype, const Shape& shape, int world) {
  check_world(world, "reduce_scatter");
  Builder b;
  TensorType in{dtype, prepend(world, shape)};
  Value y = reduce_across(b, b.parameter(in), op, world, true, "reduce_scatter");
  return finish(b, b.reshape(y, shape), in, world);
}

Program all_to_all(ElementType dtype, const Shape& shape, int world) {
  check_world(world, "all_to_all");
  TPU_CHECK(!shape.empty() && shape[0] % world == 0, ErrorKind::Value,
            "tpu_dist program all_to_all: the leading dimension of ", hlo::shape_str(shape),
            " must split into ", world, " equal blocks");
  Builder b;
  TensorType in{dtype, shape};
  // [world, block rows, rest...]: block j goes to rank j, and what arrives
  // is stacked in sender order along the same dimension.
  Shape blocks = shape;
  blocks[0] = shape[0] / world;
  blocks = prepend(world, blocks);
  Value x = b.reshape(b.parameter(in), blocks);
  Value y = b.all_to_all(x, 0, 0, everyone(world));
  return finish(b, b.reshape(y, shape), in, world);
}

Program broadcast(ElementType dtype, const Shape& shape, int world, int root) {
  check_world(world, "broadcast");
  check_rank(root, world, "root", "broadcast");
  // Gathering everyone's operand and keeping the root's row copies bits, so
  // every dtype (bool, -0.0, NaN payloads) arrives unchanged; a sum with zeros
  // from the other ranks would not.
  Builder b;
  TensorType in{dtype, shape};
  Value x = b.reshape(b.parameter(in), prepend(1, shape));
  Value all = b.all_gather(x, 0, everyone(world));
  std::vector<int64_t> start(all.rank(), 0), limit = all.shape(), strides(all.rank(), 1);
  start[0] = root;
  limit[0] = root + 1;
  return finish(b, b.reshape(b.slice(all, start, limit, strides), shape), in, world);
}

Program send_recv(ElementType dtype, const Shape& shape, int world, int src, int dst) {
  check_world(world, "send_recv");
  check_rank(src, world, "source", "send_recv");
  check_rank(dst, world, "destination", "send_recv");
  TPU_CHECK(src != dst, ErrorKind::Value, "tpu_dist program send_recv: rank ", src,
            " cannot send to itself");
  Builder b;
  TensorType in{dtype, shape};
  Value x = b.parameter(in);
  Value moved = b.collective_permute(x, {{src, dst}});
  // Ranks other than dst receive zeros from the permute; they keep their own.
  Value is_dst = b.compare(b.replica_id(), b.constant_int(dst, ElementType::U32), hlo::Compare::EQ);
  return finish(b, b.select(is_dst, moved, x), in, world);
}

}  // namespace torch_tpu::distributed::programs
