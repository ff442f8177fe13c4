// CPython binding for the HIP attention probe (plain C API; no torch, no pybind).
// Device pointers come in as Python ints (e.g. torch tensors' data_ptr()).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <cstring>
#include <string>

#ifndef HIPATTN_ARCHS
#define HIPATTN_ARCHS ""
#endif

extern "C" {
int hipattn_forward(const void* q, const void* k, const void* v, void* o, int B, int H, int S,
                    int D, int dtype, int causal, float scale, void* stream);
const char* hipattn_error_string(int code);
int hipattn_device_count(void);
int hipattn_synchronize(void);
}

static int parse_dtype(PyObject* obj) {
  if (PyLong_Check(obj)) {
    long v = PyLong_AsLong(obj);
    return (v >= 0 && v <= 2) ? static_cast<int>(v) : -1;
  }
  PyObject* s = PyObject_Str(obj);  // accepts "float16" and torch.float16 ("torch.float16")
  if (!s) return -2;
  std::string name = PyUnicode_AsUTF8(s);
  Py_DECREF(s);
  if (name.rfind("torch.", 0) == 0) name = name.substr(6);
  if (name == "float32" || name == "float" || name == "fp32") return 0;
  if (name == "float16" || name == "half" || name == "fp16") return 1;
  if (name == "bfloat16" || name == "bf16") return 2;
  return -1;
}

static PyObject* forward(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"q", "k", "v", "o", "B", "H", "S", "D", "dtype", "causal", "scale",
                             "stream", nullptr};
  unsigned long long q, k, v, o, stream = 0;
  int B, H, S, D, causal = 0;
  double scale = -1.0;
  PyObject* dtype_obj;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "KKKKiiiiO|pdK", const_cast<char**>(kw), &q, &k,
                                   &v, &o, &B, &H, &S, &D, &dtype_obj, &causal, &scale, &stream))
    return nullptr;
  int dtype = parse_dtype(dtype_obj);
  if (dtype == -2) return nullptr;
  if (dtype < 0) {
    PyErr_SetString(PyExc_ValueError, "dtype: expected float32, float16 or bfloat16 (or 0/1/2)");
    return nullptr;
  }
  if (D != 64 && D != 128) {
    PyErr_Format(PyExc_ValueError, "D: head dim %d is not supported (64 or 128)", D);
    return nullptr;
  }
  if (B < 0 || H < 0 || S < 0) {
    PyErr_SetString(PyExc_ValueError, "B, H and S must be >= 0");
    return nullptr;
  }
  if (scale < 0) scale = 1.0 / __builtin_sqrt(static_cast<double>(D));
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = hipattn_forward(reinterpret_cast<const void*>(q), reinterpret_cast<const void*>(k),
                       reinterpret_cast<const void*>(v), reinterpret_cast<void*>(o), B, H, S, D,
                       dtype, causal, static_cast<float>(scale), reinterpret_cast<void*>(stream));
  Py_END_ALLOW_THREADS
  if (rc != 0) {
    PyErr_Format(PyExc_RuntimeError, "hipattn.forward: HIP error %d: %s", rc,
                 rc > 0 ? hipattn_error_string(rc) : "unsupported arguments");
    return nullptr;
  }
  Py_RETURN_NONE;
}

static PyObject* archs(PyObject*, PyObject*) {
  // CMAKE_HIP_ARCHITECTURES as built (CMake passes them ','-separated).
  const char* all = HIPATTN_ARCHS;
  PyObject* out = PyList_New(0);
  const char* p = all;
  while (out && *p) {
    const char* e = std::strchr(p, ',');
    size_t n = e ? static_cast<size_t>(e - p) : std::strlen(p);
    if (n) {
      PyObject* s = PyUnicode_FromStringAndSize(p, static_cast<Py_ssize_t>(n));
      if (!s || PyList_Append(out, s) < 0) { Py_XDECREF(s); Py_DECREF(out); return nullptr; }
      Py_DECREF(s);
    }
    p += n + (e ? 1 : 0);
  }
  return out;
}

static PyObject* device_count(PyObject*, PyObject*) {
  return PyLong_FromLong(hipattn_device_count());
}

static PyObject* synchronize(PyObject*, PyObject*) {
  int rc = hipattn_synchronize();
  if (rc != 0) {
    PyErr_Format(PyExc_RuntimeError, "hipDeviceSynchronize: HIP error %d: %s", rc,
                 hipattn_error_string(rc));
    return nullptr;
  }
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"forward", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(forward)),
     METH_VARARGS | METH_KEYWORDS,
     "forward(q, k, v, o, B, H, S, D, dtype, causal=False, scale=1/sqrt(D), stream=0)\n"
     "Attention forward on device pointers (ints) of contiguous [B, H, S, D] tensors."},
    {"archs", archs, METH_NOARGS, "gfx targets this module was compiled for."},
    {"device_count", device_count, METH_NOARGS,
     "Visible GPUs, or -(HIP error code) (-100: no device)."},
    {"synchronize", synchronize, METH_NOARGS, "hipDeviceSynchronize()."},
    {nullptr, nullptr, 0, nullptr}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_hipattn",
                                    "HIP attention forward probe (rocmbuild).", -1, methods};

PyMODINIT_FUNC PyInit__hipattn(void) { return PyModule_Create(&moddef); }
