// A child forked from a process that uses CUDA cannot use its parent's
// CUDA (a local GPU refuses the inherited context; rgpu must not let the
// child write into the parent's connection), and the parent carries on.
#include "check.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static bool round_trip(int *dev, int value)
{
    int host[256], back[256];
    for (int i = 0; i < 256; i++)
        host[i] = value + i;
    memset(back, 0, sizeof back);
    return cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaMemcpy(back, dev, sizeof back, cudaMemcpyDeviceToHost) == cudaSuccess &&
           memcmp(host, back, sizeof host) == 0;
}

// In the child: every call must fail.  Exit status: how many succeeded.
static int child(int *dev)
{
    int n = 0, host[4] = { 0 };
    void *p = NULL;
    n += cudaMalloc(&p, 1024) == cudaSuccess;
    n += cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost) == cudaSuccess;
    n += cudaDeviceSynchronize() == cudaSuccess;
    return n;
}

int main()
{
    int *dev = NULL;
    if (!check_cuda(cudaMalloc(&dev, 1024), "cudaMalloc in the parent"))
        return check_exit_status();
    check(round_trip(dev, 7), "parent round trip before fork", "data differ");

    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(child(dev));
    int status = 0;
    check(pid > 0 && waitpid(pid, &status, 0) == pid, "fork and wait", "failed");
    check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "a forked child cannot use its parent's CUDA", "%d calls succeeded in the child",
          WIFEXITED(status) ? WEXITSTATUS(status) : -1);

    check(round_trip(dev, 1000), "parent round trip after the child's calls", "data differ");
    check_cuda(cudaFree(dev), "cudaFree in the parent");
    return check_exit_status();
}
