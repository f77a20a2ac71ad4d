/* mpicoll.engine._direct's progress hook: the MPI library's own progress loop advances mpicoll's requests.
 *
 * A thread blocked in MPI (mpi4py's MPI.Request.Waitall on an mpicoll request, a Recv, a Barrier) spins in
 * Open MPI's progress loop, opal_progress, which calls the functions registered with
 * opal_progress_register.  hook_progress(path, lists, advance) registers one (path: libopen-pal's; None:
 * MPICH, whose waits on an mpicoll request call the poll function of its generalized request instead,
 * poll_requests, which runs the same hook): while mpicoll requests are
 * outstanding (the lists of mpicoll.engine.inflight are not empty), it takes the GIL and calls
 * advance() (every request whose queue no thread is driving is tested and moved along), at most once per
 * INTERVAL_NS per thread, and never from within itself nor while the thread drives its own requests in
 * mpicoll's own waits (driving(): those already wait on the requests' messages); where the main thread's
 * requests are all ones C runs, C advances them (_requests.c: advance_main_queue) and Python is not called.
 * So a request waited for by MPI's own functions completes when its messages do, not when a polling thread
 * comes by.
 * unhook_progress() removes it (at exit, before MPI_Finalize and Python's finalization).  hook_age() is the time
 * since the hook last advanced the requests (infinite: never), so the progress thread keeps off while a thread
 * blocked in MPI advances them (mpicoll.engine.progress).
 */
#include "_direct.h"
#include <dlfcn.h>
#include <time.h>

#define INTERVAL_NS 2000     /* at most one call into Python per thread per this many nanoseconds */

static int (*opal_register)(int (*)(void));
static int (*opal_unregister)(int (*)(void));
static PyObject *lists[2];          /* mpicoll.engine.inflight.ACTIVE, ELSEWHERE */
static PyObject *advance;           /* what the hook calls */
static volatile int hooked;
static long long last_advanced;     /* when the hook last advanced the requests (written with the GIL held) */
static _Thread_local int inside;    /* this thread is in the hook, or drives its own requests */
static _Thread_local long long last_call;

long long
now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int
hook(void)
{
    if (!hooked || inside || (PyList_GET_SIZE(lists[0]) == 0 && PyList_GET_SIZE(lists[1]) == 0))
        return 0;   /* (the lists' sizes are read without the GIL: a stale size only delays or wastes one call) */
    long long t = now_ns();
    if (t - last_call < INTERVAL_NS)
        return 0;
    last_call = t;
    inside = 1;
    PyGILState_STATE gil = PyGILState_Ensure();
    int done = hooked && PyList_GET_SIZE(lists[1]) == 0 ? advance_main_queue() : 0;
    if (done < 0)
        PyErr_WriteUnraisable(advance);
    else if (hooked && done == 0) {
        PyObject *result = PyObject_CallNoArgs(advance);
        if (result == NULL)
            PyErr_WriteUnraisable(advance);
        Py_XDECREF(result);
    }
    last_advanced = now_ns();
    PyGILState_Release(gil);
    inside = 0;
    return 0;
}

int
poll_requests(void *state, void *status)
{
    (void)state;
    (void)status;
    hook();
    return 0;
}

int
wait_requests(int count, void **states, double timeout, void *status)
{
    (void)count;
    (void)states;
    (void)timeout;
    (void)status;
    hook();
    return 0;
}

void
driving(int on)
{
    inside = on;
}

PyObject *
hook_progress(PyObject *self, PyObject *args)
{
    (void)self;
    const char *path;
    PyObject *active, *elsewhere, *function;
    if (!PyArg_ParseTuple(args, "zO!O!O", &path, &PyList_Type, &active, &PyList_Type, &elsewhere, &function))
        return NULL;
    if (hooked)
        Py_RETURN_TRUE;
    void *lib = NULL;   /* libopen-pal */
    if (path == NULL ? !api.polled
                     : (lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD)) == NULL
                       || (*(void **)&opal_register = dlsym(lib, "opal_progress_register")) == NULL
                       || (*(void **)&opal_unregister = dlsym(lib, "opal_progress_unregister")) == NULL)
        Py_RETURN_FALSE;
    Py_XSETREF(lists[0], Py_NewRef(active));
    Py_XSETREF(lists[1], Py_NewRef(elsewhere));
    Py_XSETREF(advance, Py_NewRef(function));
    if (path != NULL && opal_register(hook) != 0)
        Py_RETURN_FALSE;
    hooked = 1;
    Py_RETURN_TRUE;
}

PyObject *
hook_age(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyFloat_FromDouble(last_advanced == 0 ? Py_HUGE_VAL : (double)(now_ns() - last_advanced) * 1e-9);
}

PyObject *
unhook_progress(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (hooked) {
        hooked = 0;
        if (opal_unregister != NULL)
            opal_unregister(hook);
    }
    Py_RETURN_NONE;
}
