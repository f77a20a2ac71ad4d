/* One MPI family's calls for mpicoll.engine._direct: included once per family, with HANDLE (the type of
 * MPI_Request, MPI_Comm and MPI_Datatype: a pointer in Open MPI, an int in MPICH) and F(name) (the family's
 * prefix) defined.  Every function takes handles as intptr_t and request arrays as raw memory, and returns
 * MPI's error code; api() hands them to the module as one table of function pointers. */

static struct {
    int (*isend)(const void *, int, HANDLE, int, int, HANDLE, HANDLE *);
    int (*irecv)(void *, int, HANDLE, int, int, HANDLE, HANDLE *);
    int (*send)(const void *, int, HANDLE, int, int, HANDLE);
    int (*recv)(void *, int, HANDLE, int, int, HANDLE, void *);
    int (*sendrecv)(const void *, int, HANDLE, int, int, void *, int, HANDLE, int, int, HANDLE, void *);
    int (*waitall)(int, HANDLE *, void *);
    int (*testall)(int, HANDLE *, int *, void *);
    int (*startall)(int, HANDLE *);
    int (*grequest_start)(int (*)(void *, void *), int (*)(void *), int (*)(void *, int), void *, HANDLE *);
    /* MPICH's MPIX_Grequest_start (None in Open MPI): the same with a poll function that MPI's waits call */
    int (*polled_grequest_start)(int (*)(void *, void *), int (*)(void *), int (*)(void *, int),
                                 int (*)(void *, void *), int (*)(int, void **, double, void *), void *, HANDLE *);
    int (*grequest_complete)(HANDLE);
    int (*request_free)(HANDLE *);
} F(mpi);

static int
F(resolve)(void *lib)
{
#define SYMBOL(field, name) if ((*(void **)&F(mpi).field = dlsym(lib, name)) == NULL) return -1
    SYMBOL(isend, "MPI_Isend");
    SYMBOL(irecv, "MPI_Irecv");
    SYMBOL(send, "MPI_Send");
    SYMBOL(recv, "MPI_Recv");
    SYMBOL(sendrecv, "MPI_Sendrecv");
    SYMBOL(waitall, "MPI_Waitall");
    SYMBOL(testall, "MPI_Testall");
    SYMBOL(startall, "MPI_Startall");
    SYMBOL(grequest_start, "MPI_Grequest_start");
    SYMBOL(grequest_complete, "MPI_Grequest_complete");
    SYMBOL(request_free, "MPI_Request_free");
#undef SYMBOL
    *(void **)&F(mpi).polled_grequest_start = dlsym(lib, "MPIX_Grequest_start");   /* (optional) */
    return 0;
}

#define H(value) ((HANDLE)(value))

/* MPI_Waitall (done NULL) or MPI_Testall of n requests, with statuses: MPI's error, or MPI_ERR_IN_STATUS where
 * it returned MPI_SUCCESS but a completed request's status holds an error.  Open MPI 5.0's MPI_Waitall and
 * MPI_Testall with MPI_STATUSES_IGNORE return MPI_SUCCESS when a request had already completed in error (a
 * truncated receive: a stand-in's marked message, see mpicoll.engine.standin) before the call, so that error
 * is read from the statuses, zeroed first (MPI copies each completed request's whole status). */
static int
F(complete_checked)(int n, HANDLE *requests, int *done)
{
    char small[16 * 32];
    size_t bytes = (size_t)n * (size_t)status_size;
    char *statuses = bytes <= sizeof small ? small : malloc(bytes);
    if (statuses == NULL)
        return done ? F(mpi).testall(n, requests, done, status_ignore) : F(mpi).waitall(n, requests, status_ignore);
    memset(statuses, 0, bytes);
    int rc = done ? F(mpi).testall(n, requests, done, statuses) : F(mpi).waitall(n, requests, statuses);
    for (int i = 0; rc == 0 && (done == NULL || *done) && i < n; i++)
        if (*(int *)(statuses + (size_t)i * (size_t)status_size + error_at) != 0)
            rc = in_status;
    if (statuses != small)
        free(statuses);
    return rc;
}

static int
F(wait_checked)(int n, HANDLE *requests)
{
    return F(complete_checked)(n, requests, NULL);
}

/* a round's messages, blocking: Sendrecv, Send or Recv for one message each way at most, else every receive
 * posted, then every send, then Waitall (the rule of mpicoll.engine.blocking.Plain) */
static int
F(transfer)(const Round *r, intptr_t comm, int tag)
{
    const Message *m = r->messages;
    int nrecvs = r->nrecvs, nsends = r->nsends;
    if (nsends == 1 && nrecvs == 1)
        return F(mpi).sendrecv(m[1].address, m[1].nbytes, H(byte), m[1].peer, tag,
                               m[0].address, m[0].nbytes, H(byte), m[0].peer, tag, H(comm), status_ignore);
    if (nsends == 1 && nrecvs == 0)
        return F(mpi).send(m[0].address, m[0].nbytes, H(byte), m[0].peer, tag, H(comm));
    if (nsends == 0 && nrecvs == 1)
        return F(mpi).recv(m[0].address, m[0].nbytes, H(byte), m[0].peer, tag, H(comm), status_ignore);
    HANDLE *requests = (HANDLE *)r->requests;
    int posted = 0, rc = 0;
    for (int i = 0; i < nrecvs + nsends && rc == 0; i++, posted++)
        rc = i < nrecvs ? F(mpi).irecv(m[i].address, m[i].nbytes, H(byte), m[i].peer, tag, H(comm), &requests[i])
                        : F(mpi).isend(m[i].address, m[i].nbytes, H(byte), m[i].peer, tag, H(comm), &requests[i]);
    if (rc != 0)
        posted--;
    int waited = posted ? F(wait_checked)(posted, requests) : 0;
    return rc != 0 ? rc : waited;
}

/* a round's messages posted nonblocking with tag: every receive, then every send */
static int
F(post)(Round *r, intptr_t comm, int tag)
{
    const Message *m = r->messages;
    HANDLE *requests = (HANDLE *)r->requests;
    int rc = 0;
    for (int i = 0; i < r->nrecvs + r->nsends && rc == 0; i++)
        rc = i < r->nrecvs ? F(mpi).irecv(m[i].address, m[i].nbytes, H(byte), m[i].peer, tag, H(comm), &requests[i])
                           : F(mpi).isend(m[i].address, m[i].nbytes, H(byte), m[i].peer, tag, H(comm), &requests[i]);
    return rc;
}

static int
F(startall)(Round *r)
{
    int n = r->nrecvs + r->nsends;
    return n ? F(mpi).startall(n, (HANDLE *)r->requests) : 0;
}

static int
F(waitall)(Round *r)
{
    int n = r->nrecvs + r->nsends;
    return n ? F(wait_checked)(n, (HANDLE *)r->requests) : 0;
}

static int
F(testall)(Round *r, int *done)
{
    int n = r->nrecvs + r->nsends;
    *done = 1;
    return n ? F(complete_checked)(n, (HANDLE *)r->requests, done) : 0;
}

static int
F(grequest_start)(void *state, void *handle)
{
    if (F(mpi).polled_grequest_start != NULL)   /* (poll: mpicoll's requests moved along, see _progress.c) */
        return F(mpi).polled_grequest_start(query, free_state, cancel, poll_requests, wait_requests, state,
                                                 (HANDLE *)handle);
    return F(mpi).grequest_start(query, free_state, cancel, state, (HANDLE *)handle);
}

static int
F(grequest_complete)(const void *handle)
{
    return F(mpi).grequest_complete(*(HANDLE const *)handle);
}

static int
F(request_free)(void *handle)
{
    return F(mpi).request_free((HANDLE *)handle);
}

static void
F(api)(Api *api)
{
    api->handle_size = sizeof(HANDLE);
    api->polled = F(mpi).polled_grequest_start != NULL;
    api->transfer = F(transfer);
    api->post = F(post);
    api->startall = F(startall);
    api->waitall = F(waitall);
    api->testall = F(testall);
    api->grequest_start = F(grequest_start);
    api->grequest_complete = F(grequest_complete);
    api->request_free = F(request_free);
}

#undef H
