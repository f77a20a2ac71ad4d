/* What the source files of mpicoll.engine._direct share: _direct.c binds a plan's rounds and runs them;
 * _generalized.c starts and completes generalized requests; _requests.c runs a request's Start and Wait;
 * _progress.c hooks Open MPI's progress loop; _guard.c is the lock of a thread's queue of requests. */
#ifndef MPICOLL_DIRECT_H
#define MPICOLL_DIRECT_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    void *address;
    int nbytes;
    int peer;
} Message;

/* a round: its receives then its sends, the memory of their MPI requests, its local steps */
typedef struct {
    Message *messages;
    int nrecvs, nsends;
    void *requests;
    PyObject *steps;
} Round;

typedef struct {
    size_t handle_size;
    int polled;             /* whether MPI's waits call a generalized request's poll function (MPICH) */
    int (*transfer)(const Round *, intptr_t, int);
    int (*post)(Round *, intptr_t, int);
    int (*startall)(Round *);
    int (*waitall)(Round *);
    int (*testall)(Round *, int *);
    int (*grequest_start)(void *, void *);
    int (*grequest_complete)(const void *);
    int (*request_free)(void *);
} Api;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Py_ssize_t nrounds;
    Round *rounds;
    Py_ssize_t current;     /* a request's round in flight (nrounds: finished) */
    int tag;                /* a nonblocking request's tag (its rounds are posted), -1 (started: persistent) */
    int offset;             /* added to the tag it is given (a plan's signature: mpicoll.engine.mismatch) */
    int in_steps;           /* whether advance's last error came from a local step */
    intptr_t comm;
    PyObject *bound, *comm_object, *keep;
} Rounds;

typedef struct {
    PyObject_HEAD
    int error_class;                /* first: the query callback's state points here */
    unsigned char handle[16];       /* the generalized request, as MPI_Grequest_start made it */
    char *address;                  /* where the mpicoll request keeps its MPI handle */
} Generalized;

extern Api api;                     /* the running MPI family's calls (set by init) */
extern int ready;                   /* whether init succeeded */
extern PyTypeObject RoundsType, GeneralizedType, ReduceType, GuardType;   /* (_generalized.c, _steps.c, _guard.c) */
/* _guard.c: take a Guard if it is free (1; 0: someone holds it), and give it back; no Python call, the GIL held */
int guard_try(PyObject *guard);
void guard_give(PyObject *guard);
/* _steps.c: whether a step is a Reduce, and run one (no Python call) */
int is_reduce_step(PyObject *step);
void run_reduce_step(PyObject *step);

/* an int argument, or -1 with an exception set (PyLong_AsInt is Python 3.13's) */
int as_int(PyObject *value);
/* MPI error code rc as a raised MPI.Exception */
void raise_mpi(int rc);
/* run a list of steps: 0, or -1 with the exception set */
int run_steps(PyObject *steps);
/* Rounds.start(tag=-1) and Rounds.advance(block), for C callers: 0 (advance: 1 when every round is done, 0 when a
 * round is not complete), or -1 with an exception set */
int rounds_start_run(Rounds *self, int tag);
int rounds_advance_run(Rounds *self, int block);
/* Generalized.start() and .complete(error_class), for C callers: 0, or -1 with an exception set */
int generalized_start_run(Generalized *self);
int generalized_complete_run(Generalized *self, int error_class);

#include "_hooks.h"   /* round_failed, flagged_on, HOOK_METHODS */

/* _progress.c: whether this thread drives its own requests in a blocking MPI call (the hook keeps out), and
 * the module's functions hook_progress, unhook_progress and hook_age */
void driving(int on);
/* _progress.c: CLOCK_MONOTONIC in nanoseconds */
long long now_ns(void);
/* the poll and wait functions of a generalized request (MPICH's extension): what MPI's waits on it call (each
 * runs the progress hook once) */
int poll_requests(void *state, void *status);
int wait_requests(int count, void **states, double timeout, void *status);
PyObject *hook_progress(PyObject *self, PyObject *args);
PyObject *unhook_progress(PyObject *self, PyObject *unused);
PyObject *hook_age(PyObject *self, PyObject *unused);
/* _requests.c: the module's functions init_requests, methods and restart */
PyObject *init_requests(PyObject *self, PyObject *args);
PyObject *request_methods(PyObject *self, PyObject *cls);
PyObject *fast_restart(PyObject *self, PyObject *const *argv, Py_ssize_t argc);
/* _requests.c: the main thread's requests advanced without blocking where C runs them all: 1, 0 where Python
 * must (nothing was done), or -1 with an exception set (the GIL held) */
int advance_main_queue(void);

#endif
