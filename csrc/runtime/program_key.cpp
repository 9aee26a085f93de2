// Program keys. Each recorded node has a signature: its lowering, the
// default float type and float32 matmul precision, every argument (a
// Number by its kind alone, unless the lowering bakes values into the
// program), and each input and destination
// as (which of the op's distinct bases, its type, its view). The recorder
// appends the signatures, with how nodes connect, to the graph's key and
// folds them into its rolling hash (the cut policy's repeat detection). At a
// launch the key gains which results are live and which parameters are
// donated: all of that shapes the program, and nothing else does, so equal
// keys share one executable.
#include "common/key_text.h"
#include "runtime/executor_internal.h"

namespace torch_tpu::runtime::executor {

using lowering::Arg;

uint64_t fnv(uint64_t h, const std::string& s) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

namespace {

// A number's kind always shapes the program; its value only when the
// lowering bakes it in (otherwise it is a parameter).
void append_number(std::string& key, const lowering::Number& n, bool static_numbers) {
  key += static_cast<char>('0' + static_cast<int>(n.kind));
  if (static_numbers) {
    append_double(key, n.f, '/');
    append_double(key, n.im, '/');
    append_int(key, n.i);
  }
}

}  // namespace

void append_arg(std::string& key, const Arg& a, bool static_numbers) {
  key += static_cast<char>('A' + static_cast<int>(a.kind));
  switch (a.kind) {
    case Arg::Kind::Int: append_int(key, a.i); break;
    case Arg::Kind::Float: append_double(key, a.f); break;
    case Arg::Kind::Bool: key += a.b ? '1' : '0'; break;
    case Arg::Kind::DType: key += hlo::mlir_name(a.dtype); break;
    case Arg::Kind::String: key += a.s; break;
    case Arg::Kind::IntList:
      for (int64_t v : a.ints) append_int(key, v, ',');
      break;
    case Arg::Kind::FloatList:
      for (double v : a.floats) append_double(key, v, ',');
      break;
    case Arg::Kind::BoolList:
      for (bool v : a.bools) key += v ? '1' : '0';
      break;
    case Arg::Kind::Number: append_number(key, a.number, static_numbers); break;
    case Arg::Kind::NumberList:
      for (const auto& n : a.numbers) append_number(key, n, static_numbers);
      break;
    case Arg::Kind::Tensor:
      if (a.wrapped_number) key += 'w';
      break;
    default: break;
  }
  key += ';';
}

void append_view(std::string& key, int local, const hlo::TensorType& base, const ViewGeometry& view) {
  key += 's';
  append_int(key, local);
  base.append_key(key);
  if (is_identity(view, base)) key += '=';
  else view.append_key(key);
}

const lowering::Number& number_of(const Arg& a, const NumberParam& np) {
  return np.element >= 0 ? a.numbers.at(static_cast<size_t>(np.element)) : a.number;
}

void append_param_link(std::string& links, int param) {
  links += 'p';
  append_int(links, param, ',');
}

void append_node_link(std::string& links, int node, int result) {
  links += 'n';
  append_int(links, node, '.');
  append_int(links, result, ',');
}

namespace {

void append_launch(std::string& key, const std::vector<std::pair<int, int>>& live_ids,
                   const std::vector<int>& alias, int device) {
  key += "|live:";
  for (const auto& [n, r] : live_ids) {
    append_int(key, n, '.');
    append_int(key, r, ',');
  }
  key += "|donate:";
  for (int a : alias) append_int(key, a, ',');
  key += '@';
  append_int(key, device);
}

}  // namespace

std::string launch_key(const Graph& g, const std::vector<std::pair<int, int>>& live_ids,
                       const std::vector<int>& alias) {
  std::string key;
  key.reserve(g.key.size() + 8 * (live_ids.size() + alias.size()) + 32);
  key += g.key;
  append_launch(key, live_ids, alias, g.device);
  return key;
}

void appended_node_key(std::string& key, const std::string* graph_key, const std::string& sig,
                       const std::string& links, const std::vector<std::pair<int, int>>& live_ids,
                       int params, int device) {
  key.clear();
  if (graph_key) key += *graph_key;
  key += sig;
  key += '{';
  key += links;
  key += '}';
  thread_local std::vector<int> alias;
  alias.assign(static_cast<size_t>(params), -1);
  append_launch(key, live_ids, alias, device);
}

}  // namespace torch_tpu::runtime::executor
