/* Opt-in recording of the request frames a session reads, for the fuzzers'
 * seed corpus (tests/fuzz/record.sh): with RGPU_RECORD_DIR set in rgpud's
 * environment, frame n of session PID is written to DIR/PID-n.  Off unless
 * set; a test aid, never enabled by the packaging. */
#include "rgpud.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void record_frame(const char *frame, size_t len)
{
    static const char *dir;
    static int checked;
    static unsigned long n;
    char path[4096];

    if (!checked) {
        dir = getenv("RGPU_RECORD_DIR");
        checked = 1;
    }
    if (!dir || !*dir)
        return;
    snprintf(path, sizeof path, "%s/%ld-%06lu", dir, (long)getpid(), n++);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    /* Best effort: a short recording only shrinks the corpus. */
    if (write(fd, frame, len) < 0)
        (void)0;
    close(fd);
}
