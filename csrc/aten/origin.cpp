// Which Python line issued an op, for error messages. The frame walk runs on
// every op, so it is kept cheap: the text is cached per (code object,
// instruction offset) -- turning an offset into a line number scans the
// code's line table, so it is done once per call site, not per op -- and
// whether a code object belongs to torch's own files is decided once. The
// caches are touched only with the GIL held, which is their lock.
#include "aten/origin.h"

#include <Python.h>
#include <frameobject.h>

#include <unordered_map>

namespace torch_tpu::aten {

namespace {

std::vector<std::string> internal_dirs;
std::unordered_map<PyCodeObject*, bool> internal_code;  // holds a reference to each key

struct Site {
  PyCodeObject* code;
  int offset;
  bool operator==(const Site& o) const { return code == o.code && offset == o.offset; }
};
struct SiteHash {
  size_t operator()(const Site& s) const {
    return std::hash<const void*>()(s.code) ^ (static_cast<size_t>(s.offset) * 0x9E3779B97F4A7C15ULL);
  }
};
// Keys hold a reference to their code object (taken in is_internal).
std::unordered_map<Site, std::shared_ptr<const std::string>, SiteHash> places;

bool is_internal(PyCodeObject* code) {
  auto it = internal_code.find(code);
  if (it != internal_code.end()) return it->second;
  const char* file = PyUnicode_AsUTF8(code->co_filename);
  bool internal = false;
  if (file) {
    std::string f(file);
    for (const auto& d : internal_dirs) internal |= f.rfind(d, 0) == 0;
  } else {
    PyErr_Clear();
  }
  Py_INCREF(code);
  internal_code.emplace(code, internal);
  return internal;
}

std::shared_ptr<const std::string> place_of(PyFrameObject* frame, PyCodeObject* code) {
#if PY_VERSION_HEX >= 0x030B0000
  Site site{code, PyFrame_GetLasti(frame)};
#else
  Site site{code, -PyFrame_GetLineNumber(frame)};
#endif
  auto& slot = places[site];
  if (!slot) {
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    slot = std::make_shared<const std::string>(std::string(file ? file : "?") + ":" +
                                                std::to_string(PyFrame_GetLineNumber(frame)));
  }
  return slot;
}

}  // namespace

void set_internal_dirs(std::vector<std::string> dirs) {
  PyGILState_STATE gil = PyGILState_Ensure();
  internal_dirs = std::move(dirs);
  PyGILState_Release(gil);
}

std::shared_ptr<const std::string> python_origin() {
  if (!Py_IsInitialized()) return nullptr;
  PyGILState_STATE gil = PyGILState_Ensure();
  std::shared_ptr<const std::string> result;
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  Py_XINCREF(frame);
  while (frame != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
    bool internal = is_internal(code);
    if (!internal) result = place_of(frame, code);
    Py_DECREF(code);
    if (!internal) break;
    PyFrameObject* back = PyFrame_GetBack(frame);  // new reference
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  PyGILState_Release(gil);
  return result;
}

std::shared_ptr<const std::string> python_caller() {
  if (!Py_IsInitialized()) return nullptr;
  PyGILState_STATE gil = PyGILState_Ensure();
  std::shared_ptr<const std::string> result;
  if (PyFrameObject* frame = PyEval_GetFrame()) {  // borrowed
    PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
    if (!is_internal(code)) result = place_of(frame, code);
    Py_DECREF(code);
  }
  PyGILState_Release(gil);
  return result;
}

}  // namespace torch_tpu::aten
