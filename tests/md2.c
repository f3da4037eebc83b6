/* The integrity check's hash (stubs/cuda_integrity.c) against RFC 1319's
 * MD2 test suite: a wrong digest would make every static CUDA runtime fail
 * its start-up check, so the hash is checked on its own here. */
#include "cuda_export.h"

#include <stdio.h>
#include <string.h>

static int failures;

static void expect(const char *msg, const char *want)
{
    struct rgpu_md2 m;
    uint8_t d[16];
    char hex[33];
    rgpu_md2_init(&m);
    /* Fed in two pieces, so that block boundaries inside an update count. */
    size_t half = strlen(msg) / 2;
    rgpu_md2_update(&m, msg, half);
    rgpu_md2_update(&m, msg + half, strlen(msg) - half);
    rgpu_md2_final(&m, d);
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    if (strcmp(hex, want) == 0) {
        printf("ok MD2(\"%s\")\n", msg);
    } else {
        printf("FAIL MD2(\"%s\") = %s, want %s\n", msg, hex, want);
        failures++;
    }
}

int main(void)
{
    expect("", "8350e5a3e24c153df2275c9f80692773");
    expect("a", "32ec01ec4a6dac72c0ab96fb34c0b5d1");
    expect("abc", "da853b0d3f88d99b30283a69e6ded6bb");
    expect("message digest", "ab4f496bfb2a530b219ff33031fe06b0");
    expect("abcdefghijklmnopqrstuvwxyz", "4e8ddff3650292ab5a4108c3aa47940b");
    expect("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
           "da33def2a42df13975352846c30338cd");
    expect("1234567890123456789012345678901234567890123456789012345678901234567890"
           "1234567890", "d5976f79d83d3a0dc9806c3c66f3efd8");
    return failures ? 1 : 0;
}
