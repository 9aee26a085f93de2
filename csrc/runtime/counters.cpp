#include "runtime/counters.h"

#include <deque>
#include <mutex>
#include <unordered_map>

namespace torch_tpu::runtime {

namespace {

struct Slot {
  explicit Slot(std::string_view n) : name(n) {}
  const std::string name;
  std::atomic<int64_t> value{0};
};

struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

// Never destroyed: static Counters in other files may count during exit.
struct Registry {
  std::mutex mu;  // guards the two containers, not the values
  std::deque<Slot> slots;  // a deque never moves its elements: slots stay put
  std::unordered_map<std::string_view, Slot*, TextHash, std::equal_to<>> by_name;  // views of Slot::name
};

Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

std::atomic<int64_t>* slot(std::string_view name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.by_name.find(name);
  if (it == r.by_name.end()) {
    Slot& s = r.slots.emplace_back(name);
    it = r.by_name.emplace(s.name, &s).first;
  }
  return &it->second->value;
}

}  // namespace

Counter::Counter(std::string_view name) : slot_(slot(name)) {}

void count(std::string_view name, int64_t n) { slot(name)->fetch_add(n, std::memory_order_relaxed); }

std::map<std::string, int64_t> counter_values() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::map<std::string, int64_t> values;
  for (const Slot& s : r.slots)
    if (int64_t v = s.value.load(std::memory_order_relaxed)) values.emplace(s.name, v);
  return values;
}

void reset_counters() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (Slot& s : r.slots) s.value.store(0, std::memory_order_relaxed);
}

}  // namespace torch_tpu::runtime
