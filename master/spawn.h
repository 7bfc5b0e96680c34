/* spawn.h -- run a function on a thread of its own, reusing threads that
 * finished earlier work.  Creating a thread (and connecting it anew to the
 * volumes) per PUT or DELETE cost more than the request; cached threads
 * keep their stacks and their warm httpc handles.  Threads idle for 30 s
 * exit. */
#ifndef MKV_SPAWN_H
#define MKV_SPAWN_H

/* Run fn(arg) on an idle cached thread, or a new one.  0, or -1 when no
 * thread could be created (nothing runs then). */
int spawn(void (*fn)(void *), void *arg);
/* How many spawned functions are still running. */
int spawn_busy(void);

#endif
