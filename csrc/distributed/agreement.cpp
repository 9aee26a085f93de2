#include "distributed/agreement.h"

#include <functional>
#include <iterator>
#include <sstream>

#include "distributed/staging.h"

namespace torch_tpu::distributed {

namespace {

// Layout of one rank's row in the exchanged table.
enum Slot : int64_t { kName, kHash, kRoot, kOp, kDtype, kNdim, kDim0, kMaxDims = 4, kSplits = kDim0 + kMaxDims };

// Names travel as indices into this list so every rank can print what the
// others called.
const char* const kCollectives[] = {
    "broadcast",      "all_reduce",        "all_reduce_coalesced", "reduce",
    "all_gather",     "all_gather_into_tensor", "all_gather_coalesced",
    "all_gather_into_tensor_coalesced", "gather", "scatter", "reduce_scatter",
    "reduce_scatter_tensor", "reduce_scatter_tensor_coalesced", "all_to_all_single",
    "all_to_all",     "barrier"};

int64_t name_index(const std::string& name) {
  for (size_t i = 0; i < std::size(kCollectives); ++i)
    if (name == kCollectives[i]) return static_cast<int64_t>(i);
  TORCH_INTERNAL_ASSERT(false, "tpu_dist: collective missing from the agreement table: ", name);
}

constexpr int64_t kInvalid = -2;

int64_t hash_of(const Signature& s) {
  std::ostringstream d;
  d << s.collective << '|';
  for (const auto& t : s.matching) d << c10::toString(t.scalar_type()) << t.sizes() << ';';
  return static_cast<int64_t>(std::hash<std::string>{}(d.str()) & 0x7fffffffffffffffULL);
}

std::string describe_row(const int64_t* row) {
  std::ostringstream o;
  o << kCollectives[row[kName]];
  if (row[kNdim] >= 0) {
    o << "(" << c10::toString(static_cast<c10::ScalarType>(row[kDtype])) << "[";
    for (int64_t i = 0; i < row[kNdim] && i < kMaxDims; ++i) o << (i ? ", " : "") << row[kDim0 + i];
    if (row[kNdim] > kMaxDims) o << ", ...";
    o << "]";
    if (row[kOp] >= 0) o << ", op=" << op_name(static_cast<c10d::ReduceOp::RedOpType>(row[kOp]));
    if (row[kRoot] >= 0) o << ", root=" << row[kRoot];
    o << ")";
  }
  return o.str();
}

}  // namespace

void agree(c10d::Backend& host_group, const Signature& sig) {
  const int world = host_group.getSize();
  const int64_t width = kSplits + 2 * world;
  at::Tensor mine = at::full({width}, -1, at::kLong);
  int64_t* m = mine.data_ptr<int64_t>();
  m[kName] = name_index(sig.collective);
  m[kHash] = sig.local_error.empty() ? hash_of(sig) : kInvalid;
  m[kRoot] = sig.root;
  m[kOp] = sig.reduce_op;
  if (!sig.matching.empty()) {
    const at::Tensor& t = sig.matching.front();
    m[kDtype] = static_cast<int64_t>(t.scalar_type());
    m[kNdim] = t.dim();
    for (int64_t i = 0; i < t.dim() && i < kMaxDims; ++i) m[kDim0 + i] = t.size(i);
  }
  for (size_t i = 0; i < sig.send_rows.size(); ++i) m[kSplits + i] = sig.send_rows[i];
  for (size_t i = 0; i < sig.recv_rows.size(); ++i) m[kSplits + world + i] = sig.recv_rows[i];

  at::Tensor table = at::empty({world * width}, at::kLong);
  c10d::AllgatherOptions opts;
  host_group._allgather_base(table, mine, opts)->wait();
  const int64_t* rows = table.data_ptr<int64_t>();

  TORCH_CHECK(sig.local_error.empty(), "tpu_dist: ", sig.collective, ": rank ", host_group.getRank(),
              ": ", sig.local_error);
  for (int r = 0; r < world; ++r) {
    TORCH_CHECK(rows[r * width + kHash] != kInvalid, "tpu_dist: ", sig.collective, ": rank ", r,
                " rejected its arguments (its error says why); no data was exchanged");
  }
  bool same = true;
  for (int r = 1; r < world; ++r) {
    const int64_t* a = rows;
    const int64_t* b = rows + r * width;
    same = same && a[kHash] == b[kHash] && a[kRoot] == b[kRoot] && a[kOp] == b[kOp];
  }
  std::string pairs;
  if (same && !sig.send_rows.empty()) {
    for (int i = 0; i < world && pairs.empty(); ++i)
      for (int j = 0; j < world; ++j) {
        int64_t sent = rows[i * width + kSplits + j];
        int64_t expected = rows[j * width + kSplits + world + i];
        if (sent != expected) {
          pairs = c10::str("rank ", i, " sends ", sent, " rows to rank ", j, ", which expects ",
                           expected);
          break;
        }
      }
  }
  if (same && pairs.empty()) return;

  std::ostringstream msg;
  msg << "tpu_dist: " << sig.collective << ": ranks disagree on the collective";
  if (!pairs.empty()) {
    msg << " split sizes: " << pairs;
  } else {
    msg << " or its tensors (collectives must be called in the same order with matching dtypes "
           "and shapes on every rank): ";
    for (int r = 0; r < world; ++r) {
      const int64_t* row = rows + r * width;
      msg << (r ? "; " : "") << "rank " << r << ": " << describe_row(row);
    }
  }
  TORCH_CHECK(false, msg.str());
}

}  // namespace torch_tpu::distributed
