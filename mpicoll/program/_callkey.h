/* What the two source files of mpicoll.program._callkey share: _callkey.c builds the plan cache's key of a
 * blocking call, _callrun.c runs a whole blocking call with it. */
#ifndef MPICOLL_CALLKEY_H
#define MPICOLL_CALLKEY_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

extern PyObject *fallback;          /* mpicoll.program.callkey._call_key (set by init) */
extern PyObject *empty_tuple;
extern PyObject *s_state, *s_tags, *s_entries, *s_slow_path, *s_used, *s_run, *s_recorder, *s_calls,
    *s_what;   /* interned attribute names */

/* the tuple of argv[0 .. n) */
PyObject *tuple_of(PyObject *const *argv, Py_ssize_t n);
/* the key of a call (bytes, the Python function's tuple, or None), or NULL with an exception set */
PyObject *key_of(PyObject *method, PyObject *const *argv, Py_ssize_t nargs, PyObject *args, PyObject *algorithm,
                 PyObject *values);
/* the module's run(comm, method, algorithm, *args) and init_run(active, elsewhere, value_args, failed) */
PyObject *run(PyObject *self, PyObject *const *argv, Py_ssize_t argc);
PyObject *init_run(PyObject *self, PyObject *args);
/* and start(comm, method, args, algorithm) and init_start(...) (see _callrun.c) */
PyObject *run_summing(PyObject *self, PyObject *const *argv, Py_ssize_t argc);
PyObject *start_summing(PyObject *self, PyObject *const *argv, Py_ssize_t argc);
PyObject *init_summing(PyObject *self, PyObject *args);
PyObject *start(PyObject *self, PyObject *const *argv, Py_ssize_t argc);
PyObject *init_start(PyObject *self, PyObject *args);

#endif
