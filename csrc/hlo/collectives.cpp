// The StableHLO collectives of Builder. They are printed in the generic form
// like every other op:
//
//   %r = "stablehlo.all_reduce"(%x) ({ ^bb0(%a: tensor<f32>, %b: tensor<f32>): ... })
//        {replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>} : (...) -> ...
//
// replica_groups is a dense i64 matrix (groups x group size); a channel_handle
// (`#stablehlo.channel_handle<handle = N, type = 1>`, type 1 being
// device-to-device) is only printed when a channel is asked for. Without a
// channel and without use_global_device_ids the ids are replica ids, which is
// what a program compiled for N replicas and one partition uses.
#include <algorithm>
#include <set>

#include "common/error.h"
#include "hlo/builder.h"

namespace torch_tpu::hlo {

namespace {

[[noreturn]] void bad(const char* op, const std::string& msg) {
  fail(ErrorKind::Value, "hlo.", op, ": ", msg);
}

void need(const Value& v, const char* op) {
  if (!v.valid()) bad(op, "operand is not a value of this builder");
}

std::string row(const std::vector<int64_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  return out + "]";
}

// Checks the groups and returns their common size.
int64_t check_groups(const Builder::ReplicaGroups& groups, const char* op) {
  if (groups.empty() || groups[0].empty()) bad(op, "needs at least one non-empty replica group");
  std::set<int64_t> seen;
  for (const auto& g : groups) {
    if (g.size() != groups[0].size()) bad(op, "replica groups must all have the same size");
    for (int64_t id : g) {
      if (id < 0) bad(op, "negative replica id " + std::to_string(id));
      if (!seen.insert(id).second) bad(op, "replica " + std::to_string(id) + " in two groups");
    }
  }
  return static_cast<int64_t>(groups[0].size());
}

std::string groups_attr(const Builder::ReplicaGroups& groups) {
  std::string rows;
  for (size_t i = 0; i < groups.size(); ++i) rows += (i ? ", " : "") + row(groups[i]);
  return "replica_groups = dense<[" + rows + "]> : tensor<" + std::to_string(groups.size()) +
         "x" + std::to_string(groups[0].size()) + "xi64>";
}

std::string channel_attr(int64_t channel) {
  if (channel < 0) fail(ErrorKind::Value, "hlo: negative channel id ", channel);
  if (channel == 0) return "";
  return ", channel_handle = #stablehlo.channel_handle<handle = " + std::to_string(channel) +
         ", type = 1>";
}

void check_dim(int64_t d, const Value& a, const char* op) {
  if (d < 0 || d >= a.rank())
    bad(op, "dimension " + std::to_string(d) + " out of range for " + a.type.str());
}

// Scatters and all-to-alls cut dimension `d` into one piece per group member.
void check_splits(const Value& a, int64_t d, int64_t n, const char* op) {
  if (a.shape()[d] % n != 0)
    bad(op, "dimension " + std::to_string(d) + " of " + a.type.str() + " does not split into " +
                std::to_string(n) + " pieces");
}

// The combiner region: (a, b) -> one rank-0 value of the operand's type.
std::pair<std::vector<TensorType>, RegionFn> combiner(const Value& a, const RegionFn& combine,
                                                      const char* op) {
  TensorType s = scalar_type(a.dtype());
  RegionFn checked = [s, combine, op](Builder& b, const std::vector<Value>& args) {
    std::vector<Value> out = combine(b, args);
    if (out.size() != 1 || out[0].type != s)
      bad(op, "the combiner must return one " + s.str());
    return out;
  };
  return {{s, s}, checked};
}

}  // namespace

Value Builder::all_reduce(Value a, const ReplicaGroups& groups, const RegionFn& combine,
                          int64_t channel) {
  const char* o = "all_reduce";
  need(a, o);
  check_groups(groups, o);
  return op_multi("stablehlo.all_reduce", {a}, {a.type}, groups_attr(groups) + channel_attr(channel),
                  {combiner(a, combine, o)})[0];
}

Value Builder::reduce_scatter(Value a, int64_t dim, const ReplicaGroups& groups,
                              const RegionFn& combine, int64_t channel) {
  const char* o = "reduce_scatter";
  need(a, o);
  check_dim(dim, a, o);
  int64_t n = check_groups(groups, o);
  check_splits(a, dim, n, o);
  TensorType t = a.type;
  t.shape[dim] /= n;
  std::string attrs = "scatter_dimension = " + std::to_string(dim) + " : i64, " +
                      groups_attr(groups) + channel_attr(channel);
  return op_multi("stablehlo.reduce_scatter", {a}, {t}, attrs, {combiner(a, combine, o)})[0];
}

Value Builder::all_gather(Value a, int64_t dim, const ReplicaGroups& groups, int64_t channel) {
  const char* o = "all_gather";
  need(a, o);
  check_dim(dim, a, o);
  int64_t n = check_groups(groups, o);
  TensorType t = a.type;
  t.shape[dim] *= n;
  std::string attrs = "all_gather_dim = " + std::to_string(dim) + " : i64, " +
                      groups_attr(groups) + channel_attr(channel);
  return op("stablehlo.all_gather", {a}, t, attrs);
}

Value Builder::all_to_all(Value a, int64_t split_dim, int64_t concat_dim,
                          const ReplicaGroups& groups, int64_t channel) {
  const char* o = "all_to_all";
  need(a, o);
  check_dim(split_dim, a, o);
  check_dim(concat_dim, a, o);
  int64_t n = check_groups(groups, o);
  check_splits(a, split_dim, n, o);
  TensorType t = a.type;
  t.shape[split_dim] /= n;
  t.shape[concat_dim] *= n;
  std::string attrs = "split_dimension = " + std::to_string(split_dim) +
                      " : i64, concat_dimension = " + std::to_string(concat_dim) +
                      " : i64, split_count = " + std::to_string(n) + " : i64, " +
                      groups_attr(groups) + channel_attr(channel);
  return op("stablehlo.all_to_all", {a}, t, attrs);
}

Value Builder::collective_permute(Value a, const std::vector<std::pair<int64_t, int64_t>>& pairs,
                                  int64_t channel) {
  const char* o = "collective_permute";
  need(a, o);
  if (pairs.empty()) bad(o, "needs at least one (source, target) pair");
  // The spec allows each replica to send at most once and receive at most once.
  std::set<int64_t> sources, targets;
  std::string rows;
  for (const auto& [s, t] : pairs) {
    if (s < 0 || t < 0) bad(o, "negative replica id in a (source, target) pair");
    if (!sources.insert(s).second) bad(o, "replica " + std::to_string(s) + " sends twice");
    if (!targets.insert(t).second) bad(o, "replica " + std::to_string(t) + " receives twice");
    rows += std::string(rows.empty() ? "" : ", ") + row({s, t});
  }
  std::string attrs = "source_target_pairs = dense<[" + rows + "]> : tensor<" +
                      std::to_string(pairs.size()) + "x2xi64>" + channel_attr(channel);
  return op("stablehlo.collective_permute", {a}, a.type, attrs);
}

Value Builder::replica_id() {
  return op("stablehlo.replica_id", {}, scalar_type(ElementType::U32));
}

}  // namespace torch_tpu::hlo
