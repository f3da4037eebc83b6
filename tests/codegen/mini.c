/* The reference "library" of the golden tests: what it exports decides
 * what the generated stub must export.  Bodies do not matter. */
#define MINI_INTERNAL
#include "mini.h"

miniStatus miniInit(unsigned int flags) { (void)flags; return 0; }
miniStatus miniGetCount(int *count) { (void)count; return 0; }
miniStatus miniStreamCreate(miniStream *stream, unsigned int flags) { (void)stream; (void)flags; return 0; }
miniStatus miniStreamSync(miniStream stream) { (void)stream; return 0; }
miniStatus miniGetProps(struct miniProps *props, int device) { (void)props; (void)device; return 0; }
miniStatus miniSetProps(const struct miniProps *props) { (void)props; return 0; }
miniStatus miniLaunch(struct miniDim grid, float scale, double offset, miniStream s) { (void)grid; (void)scale; (void)offset; (void)s; return 0; }
miniStatus miniFind(int *device, const char *name) { (void)device; (void)name; return 0; }
miniStatus miniGetName(char *name, int len, int device) { (void)name; (void)len; (void)device; return 0; }
miniStatus miniMemset(void *dst, int value, size_t count) { (void)dst; (void)value; (void)count; return 0; }
miniStatus miniMemsetAsync(miniDeviceptr dst, int value, size_t count, miniStream s) { (void)dst; (void)value; (void)count; (void)s; return 0; }
miniStatus miniSetArray(const int *values, size_t n) { (void)values; (void)n; return 0; }
miniStatus miniCallback(void (*fn)(void *), void *user) { (void)fn; (void)user; return 0; }
miniStatus miniHandle(struct miniWithPointer *w) { (void)w; return 0; }
const char *miniErrorName(miniStatus s) { (void)s; return ""; }
/* Exported, declared by no header, superseded by miniInit_v2... */
miniStatus miniOld(void) { return 0; }
miniStatus miniOld_v2(void) { return 0; }
miniStatus miniOldCount(unsigned int *count) { (void)count; return 0; }
miniStatus miniOldMemset(miniDeviceptr_v1 dst, int value, unsigned int count) { (void)dst; (void)value; (void)count; return 0; }
