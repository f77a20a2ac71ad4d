/* What the compiled executors (mpicoll.engine._direct and mpicoll.engine._rounds: each links _hooks.c) hand to
 * Python: a blocking round whose messages failed, and a mismatch found on a communicator.
 *
 * round_failed: the function set by on_failure (mpicoll.engine.standin.continue_marked), called as
 * function(bound, comm, tag, round, exc); NULL until it is set.  flagged_on(comm) raises the mismatch found on
 * comm if there is one (1, with it set; else 0): a test of an empty list (mpicoll.engine.flags.FLAGGED) while
 * none is found.  HOOK_METHODS: the module's functions that set them; hooks_init() is called by the module's
 * init function. */
#ifndef MPICOLL_HOOKS_H
#define MPICOLL_HOOKS_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if defined(__GNUC__)
#define HOOK_LOCAL __attribute__((visibility("hidden")))   /* each extension's own */
#else
#define HOOK_LOCAL
#endif

HOOK_LOCAL extern PyObject *round_failed;
HOOK_LOCAL extern PyObject *mismatch_flagged;
HOOK_LOCAL int mismatch_check(PyObject *comm);
HOOK_LOCAL int hooks_init(void);
HOOK_LOCAL PyObject *on_failure(PyObject *self, PyObject *callable);
HOOK_LOCAL PyObject *on_mismatch(PyObject *self, PyObject *args);

static inline int
flagged_on(PyObject *comm)
{
    return PyList_GET_SIZE(mismatch_flagged) && mismatch_check(comm) < 0;
}

#define HOOK_METHODS \
    {"on_failure", on_failure, METH_O, \
     "on_failure(function)\n--\n\nThe function a blocking round whose messages failed is handed to, as " \
     "function(bound, comm, tag, round, exc)."}, \
    {"on_mismatch", on_mismatch, METH_VARARGS, \
     "on_mismatch(flagged, check)\n--\n\nWhat the engine tests before each round and after each wait (a list, " \
     "normally empty), and the function it then calls with the round's communicator, which raises the mismatch " \
     "found there (mpicoll.engine.flags)."}

#endif
