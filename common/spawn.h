/* spawn.h -- the one pool of threads: the master's requests and volume
 * checks, the operator commands' workers, rebuild's writers, rebalance's
 * background deletes and the progress line run on it, and mkv-volume's
 * fsyncs and md5s.
 * Creating a thread (and connecting it anew to the volumes) per PUT or
 * DELETE cost more than the request; cached threads keep their stacks and
 * their warm httpc handles.  Threads idle for 30 s exit. */
#ifndef MKV_SPAWN_H
#define MKV_SPAWN_H

/* Run fn(arg) on an idle cached thread, or a new one.  0, or -1 when no
 * thread could be created (nothing runs then). */
int spawn(void (*fn)(void *), void *arg);
/* How many spawn()ed functions are still running (not a queue's: the
 * server waits for these at shutdown). */
int spawn_busy(void);

/* A work queue served by n threads of the pool: fn(ctx, item) for each
 * item pushed, started in the order pushed, at most n at once.
 * spawn_queue_end waits until every item pushed is done and frees the
 * queue.  Dies when no thread can be had. */
struct spawn_queue;
struct spawn_queue *spawn_queue(int n, void (*fn)(void *ctx, void *item), void *ctx);
void spawn_queue_push(struct spawn_queue *q, void *item);
void spawn_queue_end(struct spawn_queue *q);

#endif
