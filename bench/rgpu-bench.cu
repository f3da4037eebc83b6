// rgpu-bench: the three costs that decide how a remoted CUDA program feels
// (docs/benchmarks.md): a synchronous round trip, a batch of launches, and bulk
// copy bandwidth.  Run it natively and through rgpu and compare the columns.
//
// Copies through rgpu cannot beat the socket they travel on, so the same run
// also measures a plain socket pair on this machine (TCP over loopback and a
// Unix socket, no GPU involved) carrying as many bytes each way, and prints
// each copy's bandwidth as a fraction of the plain socket's in its direction.
//
// Output: one line per metric, "name value unit", aligned so that it reads as
// a table; lines starting with '#' are comments.  tests/gpu/run.sh parses it.
//
//   rgpu-bench [--quick] [--copies]
//     --quick: CI size, for a smoke test on the fake GPU
//     --copies: only the copies and the plain sockets
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kernels.cuh"   // k_empty: the fake GPU backend knows it by name

#define CK(call) check((call), #call, __LINE__)

static void check(cudaError_t e, const char *what, int line)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "rgpu-bench:%d: %s: %s (%s)\n", line, what,
                cudaGetErrorName(e), cudaGetErrorString(e));
        exit(1);
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void metric(const char *name, double value, const char *unit)
{
    printf("%-24s %12.3f %s\n", name, value, unit);
    fflush(stdout);   // partial results survive a later failure or timeout
}

// Mean microseconds per call of cudaStreamQuery(0) on an idle device: the
// answer depends on the GPU, so every call is a full round trip through rgpu.
static void bench_stream_query(int n)
{
    CK(cudaStreamQuery(0));   // warm-up
    double t0 = now_s();
    for (int i = 0; i < n; i++)
        CK(cudaStreamQuery(0));
    metric("stream_query_rtt", (now_s() - t0) * 1e6 / n, "us");
}

// Same with cudaDeviceSynchronize, the round trip that real programs pay most.
static void bench_device_sync(int n)
{
    CK(cudaDeviceSynchronize());
    double t0 = now_s();
    for (int i = 0; i < n; i++)
        CK(cudaDeviceSynchronize());
    metric("device_sync_rtt", (now_s() - t0) * 1e6 / n, "us");
}

// n launches of an empty kernel and one synchronize: what a launch costs when
// nothing waits for it (rgpu may batch these without waiting for replies).
static void bench_launches(int n)
{
    // Warm-up: the first launch loads the module (uploads the fatbin in rgpu).
    k_empty<<<1, 1>>>();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());

    double t0 = now_s();
    for (int i = 0; i < n; i++)
        k_empty<<<1, 1>>>();
    // <<<>>> returns nothing; a failed launch leaves its error as the last
    // error until read, so one check here covers the whole loop without
    // adding a call per launch.
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    double dt = now_s() - t0;
    metric("launch_total", dt * 1e3, "ms");
    metric("launch_per_call", dt * 1e6 / n, "us");
}

// Best of 3 after one warm-up, in GB/s (1e9 bytes/s).
static double best_copy_gbs(void *dst, const void *src, size_t bytes,
                            cudaMemcpyKind kind)
{
    double best = 0;
    CK(cudaMemcpy(dst, src, bytes, kind));   // warm-up
    for (int i = 0; i < 3; i++) {
        double t0 = now_s();
        CK(cudaMemcpy(dst, src, bytes, kind));
        double gbs = bytes / (now_s() - t0) / 1e9;
        if (gbs > best)
            best = gbs;
    }
    return best;
}

// ---- a plain socket: what the link carries without rgpu ----------------------
//
// The peer is another process, as rgpud is (two threads of one process
// share an address space and a Unix socket between them ran up to 1.7
// times faster on the development machine than between processes).  It is
// forked before the first CUDA call, so it holds no CUDA state.  Writes go
// in 4 MiB calls, as rgpu's chunks (one 256 MiB send was a quarter slower
// over TCP there); reads ask for everything still due.

#define PLAIN_WRITE ((size_t)4 << 20)
#define PLAIN_ROUNDS 4          // a warm-up, then the best of 3

static int send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n < PLAIN_WRITE ? n : PLAIN_WRITE, MSG_NOSIGNAL);
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int recv_all(int fd, char *p, size_t n)
{
    while (n > 0) {
        ssize_t r = recv(fd, p, n, 0);
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

// A connected pair with the settings rgpu gives its own sockets: TCP over
// 127.0.0.1 with TCP_NODELAY, or a Unix stream socket pair with 2 MiB send
// buffers (RGPU_UNIX_SNDBUF, common/rgpu_wire.h).  0, or -1 after saying why.
static int socket_pair(int tcp, int fds[2])
{
    if (!tcp) {
        int size = 2 << 20;
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) < 0) {
            perror("rgpu-bench: socketpair");
            return -1;
        }
        setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
        setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
        return 0;
    }
    struct sockaddr_in a;
    socklen_t alen = sizeof a;
    int one = 1;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int l = socket(AF_INET, SOCK_STREAM, 0);
    fds[0] = socket(AF_INET, SOCK_STREAM, 0);
    if (l < 0 || fds[0] < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 1) < 0 ||
        getsockname(l, (struct sockaddr *)&a, &alen) < 0 ||
        connect(fds[0], (struct sockaddr *)&a, sizeof a) < 0 ||
        (fds[1] = accept(l, NULL, NULL)) < 0) {
        perror("rgpu-bench: loopback TCP");
        return -1;
    }
    close(l);
    setsockopt(fds[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fds[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return 0;
}

// The forked peer: each round, say it is ready, then receive bytes and
// acknowledge them (out) or wait for the go and send them.
static void plain_peer(int fd, int out, size_t bytes)
{
    char *buf = (char *)malloc(bytes), c = 'r';
    if (!buf)
        _exit(1);
    memset(buf, 5, bytes);      // touched: no page faults timed
    for (int i = 0; i < PLAIN_ROUNDS; i++) {
        if (out ? send_all(fd, &c, 1) < 0 || recv_all(fd, buf, bytes) < 0 ||
                      send_all(fd, &c, 1) < 0
                : recv_all(fd, &c, 1) < 0 || send_all(fd, buf, bytes) < 0)
            _exit(1);
    }
    _exit(0);
}

// Best of 3 after a warm-up, in GB/s, of carrying bytes from this process
// to the peer (out: as a host-to-device copy goes) or back; 0 when the
// socket failed.  buf: bytes of memory touched beforehand.
static double plain_gbs(int tcp, int out, char *buf, size_t bytes)
{
    int fds[2], status;
    double best = 0;
    char c = 'g';
    if (socket_pair(tcp, fds) < 0)
        return 0;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        plain_peer(fds[1], out, bytes);
    }
    close(fds[1]);
    for (int i = 0; pid > 0 && i < PLAIN_ROUNDS; i++) {
        double t0;
        int fail;
        if (out) {
            fail = recv_all(fds[0], &c, 1) < 0;
            t0 = now_s();
            fail = fail || send_all(fds[0], buf, bytes) < 0 || recv_all(fds[0], &c, 1) < 0;
        } else {
            t0 = now_s();
            fail = send_all(fds[0], &c, 1) < 0 || recv_all(fds[0], buf, bytes) < 0;
        }
        double gbs = bytes / (now_s() - t0) / 1e9;
        if (fail) {
            best = 0;
            break;
        }
        if (i > 0 && gbs > best)
            best = gbs;
    }
    close(fds[0]);
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0)
        best = 0;
    return best;
}

// The plain sockets' rates, plain[tcp][out], measured before any CUDA call.
static void bench_plain(size_t bytes, double plain[2][2])
{
    char *buf = (char *)malloc(bytes);
    if (!buf) {
        fprintf(stderr, "rgpu-bench: malloc(%zu) failed\n", bytes);
        exit(1);
    }
    memset(buf, 3, bytes);
    for (int tcp = 1; tcp >= 0; tcp--)
        for (int out = 1; out >= 0; out--)
            plain[tcp][out] = plain_gbs(tcp, out, buf, bytes);
    free(buf);
}

static void print_plain(const double plain[2][2])
{
    static const char *const names[2][2] = { { "plain_unix_recv", "plain_unix_send" },
                                             { "plain_tcp_recv", "plain_tcp_send" } };
    for (int tcp = 1; tcp >= 0; tcp--)
        for (int out = 1; out >= 0; out--)
            metric(names[tcp][out], plain[tcp][out], "GB/s");
}

// Whether this process runs through rgpu (its client core is loaded), and
// then over which kind of socket: RGPU_SERVER as the client core reads it.
static int through_rgpu_tcp(int *tcp)
{
    const char *server = getenv("RGPU_SERVER");
    *tcp = server && *server && strncmp(server, "unix:", 5) != 0;
    return dlsym(RTLD_DEFAULT, "rgpu_stats_totals") != NULL;
}

static void bench_copies(size_t bytes, const double plain[2][2])
{
    void *dev, *pinned, *pageable;
    CK(cudaMalloc(&dev, bytes));
    CK(cudaMemset(dev, 0x5a, bytes));
    CK(cudaMallocHost(&pinned, bytes));
    pageable = malloc(bytes);
    if (!pageable) {
        fprintf(stderr, "rgpu-bench: malloc(%zu) failed\n", bytes);
        exit(1);
    }
    // Touch every page first so that page faults are not timed as copy.
    memset(pageable, 1, bytes);
    memset(pinned, 2, bytes);

    static const char *const names[4] = { "h2d_pageable", "d2h_pageable", "h2d_pinned",
                                          "d2h_pinned" };
    double gbs[4];
    for (int i = 0; i < 4; i++) {
        void *host = i < 2 ? pageable : pinned;
        gbs[i] = i % 2 == 0 ? best_copy_gbs(dev, host, bytes, cudaMemcpyHostToDevice)
                            : best_copy_gbs(host, dev, bytes, cudaMemcpyDeviceToHost);
        metric(names[i], gbs[i], "GB/s");
    }

    // The same number of bytes over plain sockets, then each copy as a
    // fraction of the plain socket in its direction: the socket rgpu uses
    // when it is loaded, else TCP (natively a copy crosses PCIe, not a
    // socket: the ratio then says how much faster the bus is).
    int tcp;
    int remote = through_rgpu_tcp(&tcp);
    print_plain(plain);
    if (!remote)
        tcp = 1;
    printf("# copies as a fraction of plain %s in the same direction (%s)\n",
           tcp ? "TCP over loopback" : "Unix socket", remote ? "through rgpu" : "native");
    for (int i = 0; i < 4; i++) {
        char name[64];
        double p = plain[tcp][i % 2 == 0];      // host-to-device: out
        snprintf(name, sizeof name, "%s/plain", names[i]);
        metric(name, p > 0 ? gbs[i] / p : 0, "ratio");
    }

    free(pageable);
    CK(cudaFreeHost(pinned));
    CK(cudaFree(dev));
}

int main(int argc, char **argv)
{
    int calls = 20000, launches = 100000;
    size_t copy_mib = 256;
    int copies_only = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            calls = 1000;
            launches = 1000;
            copy_mib = 8;
        } else if (strcmp(argv[i], "--copies") == 0) {
            copies_only = 1;
        } else {
            fprintf(stderr, "usage: %s [--quick] [--copies]\n", argv[0]);
            return 2;
        }
    }

    // The plain sockets first, before CUDA is touched (the peer is forked).
    double plain[2][2];
    bench_plain(copy_mib << 20, plain);

    // Create the context before timing anything.
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("# rgpu-bench: %s, %d calls, %d launches, %zu MiB copies\n",
           prop.name, calls, launches, copy_mib);

    if (!copies_only) {
        bench_stream_query(calls);
        bench_device_sync(calls);
        bench_launches(launches);
    }
    bench_copies(copy_mib << 20, plain);
    return 0;
}
