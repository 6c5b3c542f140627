// The kernel census: every kernel the device ran in the candidate's job, named, counted and timed by CUPTI's activity
// records, and handed to the trusted parent signed with a key that never passed through the candidate's Python
// (kernel_census.py says what the parent does with it).
//
// Why CUPTI: the driver writes a record for every kernel launched on the process's contexts, from any thread, any
// library, any dispatch path; nothing the candidate's Python does to PyTorch (modes, record functions, the dispatcher,
// the harness's own objects) takes a kernel out of it. What could: native code that switches CUPTI's activity off or
// replaces its callbacks (the binary scan reads CUPTI's names), which the parent sees as the harness's own kernels
// missing or a take the harness did not ask for.
//
// The library is loaded by the harness before the candidate's import and dlopens the libcupti already in the process
// (PyTorch's profiler links it), so nothing here links against CUDA.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cupti_activity.h>
#include <cxxabi.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "siphash.h"

namespace {

using RegisterCallbacks = CUptiResult (*)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
using Enable = CUptiResult (*)(CUpti_ActivityKind);
using FlushAll = CUptiResult (*)(uint32_t);
using NextRecord = CUptiResult (*)(uint8_t*, size_t, CUpti_Activity**);
using Dropped = CUptiResult (*)(CUcontext, uint32_t, size_t*);

struct Cupti {
  RegisterCallbacks register_callbacks = nullptr;
  Enable enable = nullptr;
  Enable disable = nullptr;
  FlushAll flush_all = nullptr;
  NextRecord next_record = nullptr;
  Dropped dropped = nullptr;
};

struct Tally {
  uint64_t count = 0;
  uint64_t ns = 0;
};

Cupti cupti;
std::mutex lock;
std::map<std::string, Tally> kernels;  // since the last take, by demangled name
uint64_t records_dropped = 0;
uint64_t takes = 0;
bool started = false;
kstudio::GuardedKey key;  // the census key (siphash.h), kept here alone

constexpr size_t kBufferBytes = 8 << 20;
constexpr size_t kAlign = 8;

std::string demangled(const char* name) {
  if (name == nullptr) return "?";
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string text = status == 0 && out != nullptr ? out : name;
  std::free(out);
  return text;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  void* raw = nullptr;
  if (posix_memalign(&raw, kAlign, kBufferBytes) != 0) raw = nullptr;
  *buffer = static_cast<uint8_t*>(raw);
  *size = raw != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> guard(lock);
  CUpti_Activity* record = nullptr;
  if (buffer != nullptr && valid > 0) {
    while (cupti.next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
      if (record->kind != CUPTI_ACTIVITY_KIND_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
      // name, start and end sit at the same offsets in every version of the kernel record
      const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      Tally& tally = kernels[demangled(kernel->name)];
      tally.count += 1;
      tally.ns += kernel->end > kernel->start ? kernel->end - kernel->start : 0;
    }
    size_t dropped = 0;
    if (cupti.dropped(context, stream, &dropped) == CUPTI_SUCCESS) records_dropped += dropped;
  }
  std::free(buffer);
}

template <typename T>
bool resolve(void* library, const char* name, T& into) {
  into = reinterpret_cast<T>(dlsym(library, name));
  return into != nullptr;
}

// Our callbacks registered and the kernel records on (a Python error set where CUPTI refused).
bool switch_on() {
  CUptiResult done = cupti.register_callbacks(buffer_requested, buffer_completed);
  if (done == CUPTI_SUCCESS) done = cupti.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (done != CUPTI_SUCCESS) {
    PyErr_Format(PyExc_RuntimeError, "CUPTI's kernel records could not be switched on (CUptiResult %d)", int(done));
    return false;
  }
  return true;
}

// start(library_path, key16) -> None: CUPTI's kernel records on from now on, the key kept here alone.
PyObject* start(PyObject*, PyObject* args) {
  const char* path = nullptr;
  const char* secret = nullptr;
  Py_ssize_t secret_size = 0;
  if (!PyArg_ParseTuple(args, "sy#", &path, &secret, &secret_size)) return nullptr;
  if (started) {
    PyErr_SetString(PyExc_RuntimeError, "the kernel census was started already");
    return nullptr;
  }
  if (secret_size != 16) {
    PyErr_SetString(PyExc_ValueError, "the census key is 16 bytes");
    return nullptr;
  }
  void* library = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (library == nullptr) {
    PyErr_Format(PyExc_RuntimeError, "CUPTI could not be loaded from %s: %s", path, dlerror());
    return nullptr;
  }
  if (!resolve(library, "cuptiActivityRegisterCallbacks", cupti.register_callbacks) ||
      !resolve(library, "cuptiActivityEnable", cupti.enable) || !resolve(library, "cuptiActivityDisable", cupti.disable) ||
      !resolve(library, "cuptiActivityFlushAll", cupti.flush_all) ||
      !resolve(library, "cuptiActivityGetNextRecord", cupti.next_record) ||
      !resolve(library, "cuptiActivityGetNumDroppedRecords", cupti.dropped)) {
    PyErr_Format(PyExc_RuntimeError, "%s lacks CUPTI's activity functions", path);
    return nullptr;
  }
  if (!switch_on()) return nullptr;
  if (!key.set(secret)) {
    PyErr_SetString(PyExc_RuntimeError, "the census key could not be kept");
    return nullptr;
  }
  started = true;
  Py_RETURN_NONE;
}

// resume() -> None: the callbacks registered and the records switched on again, after the harness's own profiler (which
// registers its own) has run.
PyObject* resume(PyObject*, PyObject*) {
  if (!started) {
    PyErr_SetString(PyExc_RuntimeError, "the kernel census was not started");
    return nullptr;
  }
  if (!switch_on()) return nullptr;
  Py_RETURN_NONE;
}

// take(token) -> (text, tag): every kernel record completed since the last take, as lines "count\tns\tname" under a
// header "token\ttake\tdropped", and its SipHash under the key. Flushes CUPTI's buffers first (after the caller's
// device synchronisation every kernel of the batch has its record).
PyObject* take(PyObject*, PyObject* args) {
  unsigned long long token = 0;
  if (!PyArg_ParseTuple(args, "K", &token)) return nullptr;
  if (!started) {
    PyErr_SetString(PyExc_RuntimeError, "the kernel census was not started");
    return nullptr;
  }
  CUptiResult flushed = CUPTI_SUCCESS;
  Py_BEGIN_ALLOW_THREADS
  flushed = cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  Py_END_ALLOW_THREADS
  std::string text;
  {
    std::lock_guard<std::mutex> guard(lock);
    takes += 1;
    text = std::to_string(token) + "\t" + std::to_string(takes) + "\t" + std::to_string(records_dropped) + "\t" +
           std::to_string(int(flushed)) + "\n";
    for (const auto& [name, tally] : kernels) {
      std::string clean = name;
      for (char& c : clean) if (c == '\n' || c == '\t') c = ' ';
      text += std::to_string(tally.count) + "\t" + std::to_string(tally.ns) + "\t" + clean + "\n";
    }
    kernels.clear();
    records_dropped = 0;
  }
  char tag[17];
  std::snprintf(tag, sizeof(tag), "%016llx", static_cast<unsigned long long>(key.sign(text)));
  return Py_BuildValue("(s#s)", text.data(), static_cast<Py_ssize_t>(text.size()), tag);
}

// siphash(key16, data) -> hex: the same function, for the parent's own tests of this module
PyObject* siphash_hex(PyObject*, PyObject* args) {
  const char* secret = nullptr;
  Py_ssize_t secret_size = 0;
  const char* data = nullptr;
  Py_ssize_t size = 0;
  if (!PyArg_ParseTuple(args, "y#y#", &secret, &secret_size, &data, &size)) return nullptr;
  if (secret_size != 16) {
    PyErr_SetString(PyExc_ValueError, "a 16-byte key");
    return nullptr;
  }
  uint64_t test_key[2];
  std::memcpy(test_key, secret, 16);
  char tag[17];
  std::snprintf(tag, sizeof(tag), "%016llx",
                static_cast<unsigned long long>(kstudio::siphash(test_key, std::string(data, size))));
  return PyUnicode_FromString(tag);
}

PyMethodDef methods[] = {
    {"start", start, METH_VARARGS, "switch CUPTI's kernel records on, with the census key"},
    {"resume", resume, METH_NOARGS, "the records on again after the harness's profiler"},
    {"take", take, METH_VARARGS, "the kernels since the last take, signed"},
    {"siphash", siphash_hex, METH_VARARGS, "SipHash-2-4 of data under a key (tests)"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "kstudio_kernel_census", nullptr, -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit_kstudio_kernel_census() { return PyModule_Create(&module_def); }
