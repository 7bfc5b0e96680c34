/* status.h -- what mkv-volume shows on its metrics listener: the fsync
 * histogram, bytes total and free per subvolume directory, temporary
 * files in flight, and the status page's JSON (/status) and HTML (/). */
#ifndef VOL_STATUS_H
#define VOL_STATUS_H

#include <stdbool.h>
#include <stddef.h>

/* Register the collector for the data directory dir (open as root_fd);
 * with pages (-metrics), start the status page's sampler, which
 * page_stop (page.h) ends. */
void vol_status_start(int root_fd, const char *dir, int port, bool pages);

/* For a HEAD of a health check's marker (".mkv", the master's), the disk
 * under it as "TOTAL FREE" bytes, the Mkv-Disk header's value: false for
 * any other path. */
bool vol_marker_disk(const char *path, int fd, char *out, size_t n);

#endif
