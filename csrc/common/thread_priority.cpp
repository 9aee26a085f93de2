#include "common/thread_priority.h"

#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>

namespace torch_tpu {

std::vector<int> thread_ids() {
  std::vector<int> ids;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return ids;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9') ids.push_back(std::atoi(e->d_name));
  }
  closedir(dir);
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::vector<int> started_between(const std::vector<int>& before, const std::vector<int>& after) {
  std::vector<int> started;
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(),
                      std::back_inserter(started));
  return started;
}

std::string set_nice(const std::vector<int>& tids, int nice) {
  for (int tid : tids) {
    if (setpriority(PRIO_PROCESS, static_cast<id_t>(tid), nice) == 0 || errno == ESRCH) continue;
    return "setting thread " + std::to_string(tid) + "'s nice value to " + std::to_string(nice) +
           " failed: " + std::strerror(errno);
  }
  return "";
}

}  // namespace torch_tpu
