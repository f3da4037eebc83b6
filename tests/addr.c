/* addr: the one address parser (common/rgpu_addr.c), case by case. */
#include "rgpu_addr.h"

#include <stdio.h>
#include <string.h>

static int failures;

/* spec must parse to want (rgpu_addr_format's text), or fail with an
 * error containing want_err when want is NULL. */
static void check(const char *spec, const char *want, const char *want_err)
{
    struct rgpu_addr a;
    char err[512] = "", got[400] = "";
    int rc = rgpu_addr_parse(spec, &a, err, sizeof err);
    if (rc == 0)
        rgpu_addr_format(&a, got, sizeof got);
    if (want ? rc != 0 || strcmp(got, want) != 0 : rc == 0 || !strstr(err, want_err)) {
        printf("FAIL '%s': got %s%s, wanted %s%s\n", spec, rc ? "error: " : "", rc ? err : got,
               want ? "" : "error containing ", want ? want : want_err);
        failures++;
    } else {
        printf("ok '%s' -> %s\n", spec, want ? got : err);
    }
}

int main(void)
{
    check("unix:/run/rgpu/rgpud.sock", "unix:/run/rgpu/rgpud.sock", NULL);
    check("/tmp/x.sock", "unix:/tmp/x.sock", NULL);
    check("unix:rel.sock", "unix:rel.sock", NULL);
    check("127.0.0.1:9000", "127.0.0.1:9000", NULL);
    check("gpu.example:7", "gpu.example:7", NULL);
    check("gpu.example", "gpu.example:9713", NULL);
    check("[::1]:9000", "[::1]:9000", NULL);
    check("[::1]", "[::1]:9713", NULL);
    check("::1", "[::1]:9713", NULL);
    check("fe80::1:2", "[fe80::1:2]:9713", NULL);
    check("", NULL, "empty");
    check("unix:", NULL, "no socket path");
    check("host:0", NULL, "port '0'");
    check("host:65536", NULL, "port '65536'");
    check("host:http", NULL, "port 'http'");
    check("host:", NULL, "port ''");
    check(":9000", NULL, "names no host");
    check("[::1", NULL, "without its ']'");
    check("[::1]x", NULL, "after ']'");
    check("[]:9000", NULL, "names no host");
    char longpath[200];
    memset(longpath, 'a', sizeof longpath);
    longpath[0] = '/';
    longpath[sizeof longpath - 1] = '\0';
    check(longpath, NULL, "longer than");
    return failures ? 1 : 0;
}
