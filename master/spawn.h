/* spawn.h -- the one pool of threads: the server's requests, the operator
 * commands' workers and rebalance's background deletes all run on it.
 * Creating a thread (and connecting it anew to the volumes) per PUT or
 * DELETE cost more than the request; cached threads keep their stacks and
 * their warm httpc handles.  Threads idle for 30 s exit. */
#ifndef MKV_SPAWN_H
#define MKV_SPAWN_H

/* Run fn(arg) on an idle cached thread, or a new one.  0, or -1 when no
 * thread could be created (nothing runs then). */
int spawn(void (*fn)(void *), void *arg);
/* How many spawn()ed functions are still running (not a group's). */
int spawn_busy(void);

/* Run fn(arg) on n threads of the pool at once; spawn_wait waits until all
 * have returned and frees the group.  Dies when no thread can be had. */
struct spawn_group;
struct spawn_group *spawn_group(int n, void (*fn)(void *), void *arg);
void spawn_wait(struct spawn_group *g);

#endif
