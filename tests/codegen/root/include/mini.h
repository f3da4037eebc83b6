/* A miniature CUDA-style header for the generator's golden tests: one
 * function per kind of parameter the generator must classify. */
#ifndef MINI_H
#define MINI_H

/* The headers' version of the library, as its version query would answer. */
#define MINI_VERSION 1020

#include <stddef.h>

typedef enum miniStatus_enum {
    MINI_SUCCESS = 0,           /**< All went well. */
    MINI_ERROR_INVALID = 1,     /**< An argument was out of range. */
    MINI_ERROR_NOT_SUPPORTED = 801, /**< The operation is not supported. */
    MINI_ERROR_NO_DEVICE = 100  /**< No device. */
} miniStatus;

typedef struct miniStream_st *miniStream;      /* an opaque handle */
typedef unsigned long long miniDeviceptr;

struct miniDim { unsigned x, y, z; };          /* pointer-free, by value */
struct miniProps { char name[32]; int major, minor; size_t mem; };
struct miniWithPointer { void *p; int n; };

miniStatus miniInit(unsigned int flags);
miniStatus miniGetCount(int *count);
miniStatus miniStreamCreate(miniStream *stream, unsigned int flags);
miniStatus miniStreamSync(miniStream stream);
miniStatus miniGetProps(struct miniProps *props, int device);
miniStatus miniSetProps(const struct miniProps *props);
miniStatus miniLaunch(struct miniDim grid, float scale, double offset, miniStream s);
miniStatus miniFind(int *device, const char *name);
miniStatus miniGetName(char *name, int len, int device);
miniStatus miniMemset(void *dst, int value, size_t count);
miniStatus miniMemsetAsync(miniDeviceptr dst, int value, size_t count, miniStream s);
miniStatus miniSetArray(const int *values, size_t n);
miniStatus miniCallback(void (*fn)(void *), void *user);
miniStatus miniHandle(struct miniWithPointer *w);
const char *miniErrorName(miniStatus s);

/* Older ABIs the library still exports, declared only in the internal view
 * (as cuda.h declares its CUDA 2.x entry points): one with 32-bit sizes,
 * one with a 32-bit device address. */
typedef unsigned int miniDeviceptr_v1;
#if defined(MINI_INTERNAL)
miniStatus miniOldCount(unsigned int *count);
miniStatus miniOldMemset(miniDeviceptr_v1 dst, int value, unsigned int count);
#endif

#endif
