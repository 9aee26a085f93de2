// Which Python line issued an op, for error messages. The frame walk runs on
// every op, so it is kept cheap: results are cached per (code object, line)
// and whether a code object belongs to torch's own files is decided once.
#include "aten/origin.h"

#include <Python.h>
#include <frameobject.h>

#include <mutex>
#include <unordered_map>

namespace torch_tpu::aten {

namespace {

std::vector<std::string> internal_dirs;
std::mutex mu;
std::unordered_map<PyCodeObject*, bool> internal_code;  // holds a reference to each key
std::unordered_map<PyCodeObject*, std::unordered_map<int, std::shared_ptr<const std::string>>> places;

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

}  // namespace

void set_internal_dirs(std::vector<std::string> dirs) {
  std::lock_guard<std::mutex> lock(mu);
  internal_dirs = std::move(dirs);
}

std::shared_ptr<const std::string> python_origin() {
  if (!Py_IsInitialized()) return nullptr;
  PyGILState_STATE gil = PyGILState_Ensure();
  std::shared_ptr<const std::string> result;
  {
    std::lock_guard<std::mutex> lock(mu);
    PyFrameObject* frame = PyEval_GetFrame();  // borrowed
    Py_XINCREF(frame);
    while (frame != nullptr) {
      PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
      bool internal = is_internal(code);
      if (!internal) {
        int line = PyFrame_GetLineNumber(frame);
        auto& slot = places[code][line];
        if (!slot) {
          const char* file = PyUnicode_AsUTF8(code->co_filename);
          slot = std::make_shared<const std::string>(std::string(file ? file : "?") + ":" +
                                                      std::to_string(line));
        }
        result = slot;
      }
      Py_DECREF(code);
      if (!internal) break;
      PyFrameObject* back = PyFrame_GetBack(frame);  // new reference
      Py_DECREF(frame);
      frame = back;
    }
    Py_XDECREF(frame);
  }
  PyGILState_Release(gil);
  return result;
}

}  // namespace torch_tpu::aten
