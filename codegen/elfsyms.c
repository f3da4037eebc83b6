/* The export list of a reference library: every defined function in its
 * dynamic symbol table.  This, not the headers, decides what a stub must
 * export, since the real libraries export functions no header declares.
 * Where NVIDIA ships headers without a library (NVML), the reference is a
 * text file of names, one a line (codegen/nvml-exports.sh). */
#include "rgpu-gen.h"

#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static const Elf64_Shdr *find_section(const unsigned char *base, size_t size, Elf64_Word type)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)base;
    if (eh->e_shoff + (size_t)eh->e_shnum * sizeof(Elf64_Shdr) > size)
        return NULL;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(base + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; i++)
        if (sh[i].sh_type == type)
            return &sh[i];
    return NULL;
}

/* A name list: one function name a line (the NVML header's, codegen/nvml-exports.sh). */
static char **named_functions(const char *path, int *n)
{
    FILE *f = fopen(path, "r");
    char line[512];
    char **out = NULL;
    int count = 0;
    if (!f)
        die("%s: cannot open the reference list", path);
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, " \t\r\n")] = '\0';
        if (!line[0])
            continue;
        out = realloc(out, (size_t)(count + 2) * sizeof *out);
        if (!out)
            die("out of memory");
        out[count++] = xstrdup(line);
    }
    fclose(f);
    if (!count)
        die("%s: an empty reference list", path);
    qsort(out, (size_t)count, sizeof *out, cmp_str);
    *n = count;
    return out;
}

static int ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

/* A name exported under two versions appears twice: keep one. */
static int sort_unique(char **names, int count)
{
    qsort(names, (size_t)count, sizeof *names, cmp_str);
    int w = 0;
    for (int r = 0; r < count; r++)
        if (w == 0 || strcmp(names[w - 1], names[r]) != 0)
            names[w++] = names[r];
    return w;
}

/* An export list: the functions ("FUNC name@@node" lines), without nodes. */
static char **listed_functions(FILE *f, int *n)
{
    char line[1024];
    int count = 0, cap = 1024;
    char **out = xcalloc((size_t)cap, sizeof *out);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "FUNC ", 5) != 0)
            continue;
        line[strcspn(line, "@\n")] = '\0';
        if (count == cap) {
            cap *= 2;
            out = realloc(out, (size_t)cap * sizeof *out);
            if (!out)
                die("out of memory");
        }
        out[count++] = xstrdup(line + 5);
    }
    *n = sort_unique(out, count);
    return out;
}

char **elf_exported_functions(const char *path, int *n)
{
    if (ends_with(path, ".txt"))
        return named_functions(path, n);
    FILE *list = fopen(path, "r");
    char magic[SELFMAG] = { 0 };
    if (list && fread(magic, 1, SELFMAG, list) == SELFMAG && memcmp(magic, ELFMAG, SELFMAG) != 0) {
        rewind(list);
        char **names = listed_functions(list, n);
        fclose(list);
        if (*n == 0)
            die("%s: lists no function (\"FUNC name@@node\" lines)", path);
        return names;
    }
    if (list)
        fclose(list);
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        die("%s: cannot open the reference library", path);
    const unsigned char *base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (base == MAP_FAILED || (size_t)st.st_size < sizeof(Elf64_Ehdr) ||
        memcmp(base, ELFMAG, SELFMAG) != 0 || base[EI_CLASS] != ELFCLASS64)
        die("%s: not a 64-bit ELF file", path);

    const Elf64_Shdr *dynsym = find_section(base, (size_t)st.st_size, SHT_DYNSYM);
    if (!dynsym)
        die("%s: no dynamic symbol table", path);
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)base;
    const Elf64_Shdr *strtab = (const Elf64_Shdr *)(base + eh->e_shoff) + dynsym->sh_link;
    const Elf64_Sym *syms = (const Elf64_Sym *)(base + dynsym->sh_offset);
    size_t nsyms = dynsym->sh_size / sizeof(Elf64_Sym);
    const char *names = (const char *)(base + strtab->sh_offset);

    char **out = xcalloc(nsyms + 1, sizeof *out);
    int count = 0;
    for (size_t i = 0; i < nsyms; i++) {
        if (ELF64_ST_TYPE(syms[i].st_info) != STT_FUNC || syms[i].st_shndx == SHN_UNDEF)
            continue;
        if (ELF64_ST_BIND(syms[i].st_info) == STB_LOCAL)
            continue;
        out[count++] = xstrdup(names + syms[i].st_name);
    }
    *n = sort_unique(out, count);
    return out;
}
