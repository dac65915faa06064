/* A simulated communicator for tests of data-parallel fitting: each
 * "process" is a thread, and simcomm_reduce (an lse_reduce_fn) is an
 * all-reduce (sum) over the threads, summed in rank order so every thread
 * gets the same bits. simcomm_fail_at makes the n-th reduction of every
 * thread fail, as a lost process would make MPI_Allreduce fail. */
#ifndef LSE_SIMCOMM_H
#define LSE_SIMCOMM_H

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <lsegraph/lsegraph.h>

#define SIMCOMM_MAX 8

typedef struct simcomm {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t n_ranks;
    size_t arrived;
    size_t readers; /* ranks yet to copy the last result */
    unsigned long generation;
    double *slots; /* (n_ranks, cap) contributions */
    double *result;
    size_t cap;
    size_t n;       /* length of the current reduction */
    int mismatch;   /* ranks disagreed on the length */
    size_t fail_at; /* 1-based reduction that fails (0: never) */
    size_t calls[SIMCOMM_MAX];
} simcomm;

typedef struct simcomm_rank {
    simcomm *comm;
    size_t rank;
} simcomm_rank;

static inline void simcomm_init(simcomm *c, size_t n_ranks)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->n_ranks = n_ranks;
}

static inline void simcomm_destroy(simcomm *c)
{
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c->slots);
    free(c->result);
}

static inline lse_status simcomm_reduce(double *buf, size_t n, void *user)
{
    simcomm_rank *me = user;
    simcomm *c = me->comm;
    pthread_mutex_lock(&c->mu);
    while (c->readers > 0) /* the last result is still being read */
        pthread_cond_wait(&c->cv, &c->mu);
    const size_t call = ++c->calls[me->rank];
    if (c->arrived == 0) {
        c->n = n;
        if (n > c->cap) {
            free(c->slots);
            free(c->result);
            c->slots = malloc(c->n_ranks * n * sizeof *c->slots);
            c->result = malloc(n * sizeof *c->result);
            c->cap = n;
        }
    } else if (n != c->n) {
        c->mismatch = 1;
    }
    const size_t m = n < c->n ? n : c->n;
    memcpy(c->slots + me->rank * c->cap, buf, m * sizeof *buf);
    const unsigned long gen = c->generation;
    if (++c->arrived == c->n_ranks) {
        for (size_t i = 0; i < c->n; i++) {
            double s = 0.0;
            for (size_t r = 0; r < c->n_ranks; r++)
                s += c->slots[r * c->cap + i];
            c->result[i] = s;
        }
        c->arrived = 0;
        c->readers = c->n_ranks;
        c->generation++;
        pthread_cond_broadcast(&c->cv);
    } else {
        while (c->generation == gen)
            pthread_cond_wait(&c->cv, &c->mu);
    }
    memcpy(buf, c->result, m * sizeof *buf);
    if (--c->readers == 0)
        pthread_cond_broadcast(&c->cv);
    const int fail = c->fail_at != 0 && call == c->fail_at;
    pthread_mutex_unlock(&c->mu);
    return fail ? LSE_EIO : LSE_OK;
}

#endif /* LSE_SIMCOMM_H */
