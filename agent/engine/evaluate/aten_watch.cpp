// The ATen observer of the candidate's job (aten_watch.py says why): a RecordFunction callback for the whole process,
// installed before the candidate's import, that sees every operator call made through PyTorch's dispatcher on every
// thread, whatever Python mode stack, callback or native thread it comes from. A plain CPython module (no pybind11,
// no torch/extension.h): it builds in seconds and each call from Python costs what a builtin's does.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <ATen/record_function.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "siphash.h"

namespace {

// What a name is: no PyTorch compute (another namespace's op, or an allowed one), allowed where nested in an anchor
// (an allowed compute op: its own internals, such as a convolution's bias add), or PyTorch compute outside the list.
enum Verdict : int { kFree = 0, kAnchor = 1, kInternal = 2, kForbidden = 3 };

std::unordered_set<std::string> g_allowed;     // qualified names: aten::mm, mkldnn::_linear_pointwise
std::unordered_set<std::string> g_anchors;     // the allowed compute ops, whose internals are theirs
std::unordered_set<std::string> g_internals;   // what an anchor may call inside itself
std::unordered_set<std::string> g_namespaces;  // PyTorch's own op namespaces, read before the candidate's import
std::string g_canary;                          // the op the harness runs to show the observer still sees calls

std::mutex g_mutex;
std::unordered_map<std::string, long long> g_found;  // "aten::silu" / "aten::silu (on another thread)" -> calls
std::atomic<long long> g_found_total{0};
std::atomic<long long> g_canaries{0};
std::atomic<long long> g_switches{0};  // arm/disarm/canary calls: the harness knows how many it made
std::atomic<long long> g_left_off{0};  // disarm found record functions switched off on the harness's thread
std::atomic<bool> g_installed{false};
std::thread::id g_main;
at::CallbackHandle g_handle = 0;

enum Mode : int { kUnarmed = 0, kArmed = 1, kCanary = 2, kProfiling = 3 };
std::atomic<int> g_mode{kUnarmed};  // the harness's thread only; every other thread is always judged

struct Cached {
  std::string name;
  int verdict;
};
thread_local std::unordered_map<const char*, Cached> t_cache;
thread_local int t_depth = 0;
thread_local bool t_anchor = false;  // this thread's outermost op now running is an anchor
thread_local int t_main = -1;        // whether this is the harness's thread (-1: not asked yet)

int classify(const char* name) {
  std::string full(name);
  const auto colon = full.find("::");
  if (colon == std::string::npos || !g_namespaces.count(full.substr(0, colon))) return kFree;
  if (g_allowed.count(full)) return g_anchors.count(full) ? kAnchor : kFree;
  return g_internals.count(full) ? kInternal : kForbidden;
}

int verdict_of(const char* name) {
  auto it = t_cache.find(name);
  // An op name's storage lives as long as its registration: compared again so that a freed name's address, reused by
  // another op's, never keeps the first one's verdict.
  if (it != t_cache.end() && std::strcmp(it->second.name.c_str(), name) == 0) return it->second.verdict;
  const int verdict = classify(name);
  t_cache[name] = Cached{name, verdict};
  return verdict;
}

void record(const char* name, bool main) {
  std::string key(name);
  if (!main) key += " (on a thread of its own)";
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_found[key] += 1;
  }
  g_found_total.fetch_add(1);
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  const int depth = t_depth++;
  if (t_main < 0) t_main = std::this_thread::get_id() == g_main ? 1 : 0;
  const char* name = fn.name();
  if (name == nullptr) return nullptr;
  if (t_main == 1) {
    const int mode = g_mode.load(std::memory_order_relaxed);
    if (mode == kUnarmed || mode == kProfiling) return nullptr;
    if (mode == kCanary) {
      if (depth == 0 && g_canary == name) g_canaries.fetch_add(1);
      return nullptr;
    }
  }
  const int verdict = verdict_of(name);
  if (depth == 0) {
    t_anchor = verdict == kAnchor;
    if (verdict >= kInternal) record(name, t_main == 1);
  } else if (!t_anchor && verdict >= kInternal) {
    // Inside an allowed compute op its own implementation runs (relu's clamp_min, a convolution's bias add): not
    // judged. Inside anything else (a memory op) only memory ops may run.
    record(name, t_main == 1);
  }
  return nullptr;
}

void on_end(const at::RecordFunction&, at::ObserverContext*) {
  if (t_depth > 0) --t_depth;
}

bool fill(PyObject* items, std::unordered_set<std::string>& into) {
  PyObject* iterator = PyObject_GetIter(items);
  if (iterator == nullptr) return false;
  while (PyObject* item = PyIter_Next(iterator)) {
    const char* text = PyUnicode_AsUTF8(item);
    if (text == nullptr) {
      Py_DECREF(item);
      Py_DECREF(iterator);
      return false;
    }
    into.insert(text);
    Py_DECREF(item);
  }
  Py_DECREF(iterator);
  return !PyErr_Occurred();
}

// install(allowed, anchors, internals, namespaces, canary): once, on the harness's thread, before the candidate's import.
PyObject* install(PyObject*, PyObject* args) {
  PyObject *allowed, *anchors, *internals, *namespaces;
  const char* canary;
  if (!PyArg_ParseTuple(args, "OOOOs", &allowed, &anchors, &internals, &namespaces, &canary)) return nullptr;
  if (g_installed.load()) {
    PyErr_SetString(PyExc_RuntimeError, "the ATen observer is installed already");
    return nullptr;
  }
  if (!fill(allowed, g_allowed) || !fill(anchors, g_anchors) || !fill(internals, g_internals) ||
      !fill(namespaces, g_namespaces))
    return nullptr;
  g_canary = canary;
  g_main = std::this_thread::get_id();
  g_handle = at::addGlobalCallback(at::RecordFunctionCallback(on_start, on_end)
                                       .scopes({at::RecordScope::FUNCTION})
                                       .needsInputs(false)
                                       .needsOutputs(false)
                                       .needsIds(false));
  g_installed.store(true);
  // On, here as on every thread, for good (this thread is judged only while armed): a thread-local state captured at
  // any time and set back later, or handed to a task (at::launch carries it), has them on (the ninth red team's c3, c7
  // and c14b captured them off, at the import and in the harness's own time). The harness's own work between calls
  // pays the record functions' cost, a few tenths of a microsecond per op of its own.
  at::enableRecordFunction(true);
  Py_RETURN_NONE;
}

PyObject* set_mode(int mode) {
  g_switches.fetch_add(1);
  if (mode == kUnarmed) {
    if (!at::isRecordFunctionEnabled()) g_left_off.fetch_add(1);  // switched off inside the call: a finding
    g_mode.store(kUnarmed);
    at::enableRecordFunction(true);
  } else {
    t_depth = 0;
    g_mode.store(mode);
    at::enableRecordFunction(true);
  }
  Py_RETURN_NONE;
}

PyObject* arm(PyObject*, PyObject*) { return set_mode(kArmed); }
PyObject* disarm(PyObject*, PyObject*) { return set_mode(kUnarmed); }
PyObject* canary_mode(PyObject*, PyObject*) { return set_mode(kCanary); }
PyObject* profiling(PyObject*, PyObject*) { return set_mode(kProfiling); }

// state() -> (findings so far, canaries seen, switches made, times record functions were found off at a disarm)
PyObject* state(PyObject*, PyObject*) {
  return Py_BuildValue("(LLLL)", g_found_total.load(), g_canaries.load(), g_switches.load(), g_left_off.load());
}

// found() -> {name: calls}, every finding since the install (never cleared: nothing can take one back)
PyObject* found(PyObject*, PyObject*) {
  PyObject* out = PyDict_New();
  if (out == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const auto& entry : g_found) {
    PyObject* count = PyLong_FromLongLong(entry.second);
    if (count == nullptr || PyDict_SetItemString(out, entry.first.c_str(), count) < 0) {
      Py_XDECREF(count);
      Py_DECREF(out);
      return nullptr;
    }
    Py_DECREF(count);
  }
  return out;
}

kstudio::GuardedKey g_key;  // the parent's key for this job (siphash.h), kept here alone
long long g_takes = 0;

// The harness's own code, as it was before the candidate's import: every callable entry of the harness's modules',
// classes' and given objects' namespaces, held here with its function's code object, and gc's list of callbacks. The
// candidate's Python can reach all of them (sys.modules, gc) and replace one, so that its code runs where the harness
// calls it, in the harness's own time, unjudged (the tenth red team: batch.derive wrapped to run F.silu; the
// observer's arm pointed at its disarm; gc.callbacks rebound). Each take compares them all; a change is in the counts.
struct Watched {
  PyObject* mapping;
  PyObject* key;
  PyObject* value;
  PyObject* code;  // a function's __code__, which can be replaced in place; nullptr for anything else
  std::string name;
};
std::vector<Watched> g_watched;
PyObject* g_gc_dict = nullptr;
PyObject* g_gc_list = nullptr;
Py_ssize_t g_gc_length = 0;
bool g_watching = false;

// watch([(label, mapping), ...], gc_module_dict) -> count: once, before the candidate's import.
PyObject* watch(PyObject*, PyObject* args) {
  PyObject *namespaces, *gc_dict;
  if (!PyArg_ParseTuple(args, "OO", &namespaces, &gc_dict)) return nullptr;
  if (g_watching) {
    PyErr_SetString(PyExc_RuntimeError, "the harness's code is watched already");
    return nullptr;
  }
  PyObject* iterator = PyObject_GetIter(namespaces);
  if (iterator == nullptr) return nullptr;
  while (PyObject* pair = PyIter_Next(iterator)) {
    const char* label = nullptr;
    PyObject* mapping = nullptr;
    if (!PyArg_ParseTuple(pair, "sO", &label, &mapping)) {
      Py_DECREF(pair);
      Py_DECREF(iterator);
      return nullptr;
    }
    PyObject* items = PyMapping_Items(mapping);
    if (items == nullptr) {
      Py_DECREF(pair);
      Py_DECREF(iterator);
      return nullptr;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); ++i) {
      PyObject* item = PyList_GET_ITEM(items, i);
      PyObject* key = PyTuple_GET_ITEM(item, 0);
      PyObject* value = PyTuple_GET_ITEM(item, 1);
      if (!PyUnicode_Check(key) || !PyCallable_Check(value)) continue;
      PyObject* code = PyFunction_Check(value) ? PyFunction_GetCode(value) : nullptr;
      Py_INCREF(mapping);
      Py_INCREF(key);
      Py_INCREF(value);
      Py_XINCREF(code);
      g_watched.push_back(Watched{mapping, key, value, code, std::string(label) + "." + PyUnicode_AsUTF8(key)});
    }
    Py_DECREF(items);
    Py_DECREF(pair);
  }
  Py_DECREF(iterator);
  if (PyErr_Occurred()) return nullptr;
  PyObject* list = PyDict_GetItemString(gc_dict, "callbacks");
  if (list != nullptr && PyList_Check(list)) {
    Py_INCREF(gc_dict);
    Py_INCREF(list);
    g_gc_dict = gc_dict;
    g_gc_list = list;
    g_gc_length = PyList_GET_SIZE(list);
  }
  g_watching = true;
  return PyLong_FromSize_t(g_watched.size());
}

// What of the harness's code differs from what watch() held (names, at most a few), and how many entries.
long long changed_code(std::string& names) {
  long long changed = 0;
  auto note = [&](const std::string& name) {
    if (++changed <= 4) names += "~\t" + name + "\n";
  };
  for (const Watched& w : g_watched) {
    PyObject* now = PyObject_GetItem(w.mapping, w.key);
    if (now == nullptr) PyErr_Clear();
    const bool same = now == w.value && (w.code == nullptr || PyFunction_GetCode(now) == w.code);
    Py_XDECREF(now);
    if (!same) note(w.name);
  }
  if (g_gc_list != nullptr) {
    PyObject* now = PyDict_GetItemString(g_gc_dict, "callbacks");
    if (now != g_gc_list || PyList_GET_SIZE(g_gc_list) != g_gc_length) note("gc.callbacks");
  }
  return changed;
}

// key(secret16) -> None: once, before the candidate's import.
PyObject* set_key(PyObject*, PyObject* args) {
  const char* secret = nullptr;
  Py_ssize_t size = 0;
  if (!PyArg_ParseTuple(args, "y#", &secret, &size)) return nullptr;
  if (g_key.held() || size != 16 || !g_key.set(secret)) {
    PyErr_SetString(PyExc_RuntimeError, "the observer's key is set once, 16 bytes");
    return nullptr;
  }
  Py_RETURN_NONE;
}

// take(token) -> (text, tag): everything the observer has counted since it was installed (switches, canaries, left
// off, every finding), with the count of takes, signed: the parent judges it (aten_watch.WatchJudge), so that nothing
// in the candidate's Python stands between the observer and the verdict.
PyObject* take(PyObject*, PyObject* args) {
  unsigned long long token = 0;
  if (!PyArg_ParseTuple(args, "K", &token)) return nullptr;
  if (!g_key.held()) {
    PyErr_SetString(PyExc_RuntimeError, "the observer has no key");
    return nullptr;
  }
  std::string changed_names;
  const long long changed = changed_code(changed_names);  // with the GIL, before the lock
  std::string text;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_takes += 1;
    text = std::to_string(token) + "\t" + std::to_string(g_takes) + "\t" + std::to_string(g_canaries.load()) + "\t" +
           std::to_string(g_switches.load()) + "\t" + std::to_string(g_left_off.load()) + "\t" +
           std::to_string(changed) + "\t" + std::to_string(g_watched.size()) + "\n" + changed_names;
    for (const auto& entry : g_found) text += std::to_string(entry.second) + "\t" + entry.first + "\n";
  }
  char tag[17];
  std::snprintf(tag, sizeof(tag), "%016llx", static_cast<unsigned long long>(g_key.sign(text)));
  return Py_BuildValue("(s#s)", text.data(), static_cast<Py_ssize_t>(text.size()), tag);
}

PyMethodDef kMethods[] = {
    {"key", set_key, METH_VARARGS, "key(secret16): the parent's key, once"},
    {"watch", watch, METH_VARARGS, "watch([(label, mapping)], gc_dict): the harness's code as it is now, once"},
    {"take", take, METH_VARARGS, "take(token) -> (text, tag): the observer's counts, signed"},
    {"install", install, METH_VARARGS, "install(allowed, anchors, internals, namespaces, canary)"},
    {"arm", arm, METH_NOARGS, "judge the harness's thread's calls (a candidate's call is running)"},
    {"disarm", disarm, METH_NOARGS, "stop judging the harness's thread (its own work follows)"},
    {"canary_mode", canary_mode, METH_NOARGS, "count the canary op on the harness's thread"},
    {"profiling", profiling, METH_NOARGS, "record functions on for the harness's profiler, nothing judged"},
    {"state", state, METH_NOARGS, "(findings, canaries, switches, left off)"},
    {"found", found, METH_NOARGS, "{op name: calls}"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "kstudio_aten_watch", nullptr, -1, kMethods};

}  // namespace

PyMODINIT_FUNC PyInit_kstudio_aten_watch() { return PyModule_Create(&kModule); }
