/* The listener's accept loop, its children, and the line between it and
 * each session.
 *
 * The listener accepts connections and forks one session process per
 * client (session.c); it never loads or calls CUDA itself, since CUDA is
 * undefined in the child of a process that initialised it, and it never
 * waits on a client.  Connections that are not let in yet are bounded by
 * admission.c; the clients let in, by --max-sessions.
 *
 * Each session has a line to the listener (a socketpair of datagrams,
 * SOCK_SEQPACKET) for two things the session cannot do alone:
 *
 *  - once its client is let in, it asks for a place among the sessions
 *    (--max-sessions): 'L', answered 'Y', or 'N' at the cap (the session
 *    then answers its client busy);
 *  - it names each CUDA IPC file its driver creates in /dev/shm (the
 *    sandbox's trap handler makes those: sandbox.c).  A file outlives the
 *    process that made it; when the session ends, clean exit or crash,
 *    the listener removes those of its files still there, if they are
 *    still the same files (device and inode).
 *
 * What comes over a line is as hostile as the session may have become:
 * fixed-size messages, names checked, and nothing a session could not do
 * itself (its own sandbox lets it remove cuda.shm.* files). */
#include "rgpud.h"
#include "sandbox.h"
#include "rgpu_hello.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"
#include "rgpu_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define LINE_LET_IN 'L'
#define LINE_YES 'Y'
#define LINE_BUSY 'N'
/* How long a session waits for its listener's answer (it never waits on
 * a client; a listener this slow is overloaded). */
#define LINE_ANSWER_MS 5000
/* Files a session has open in /dev/shm, as far as the listener keeps
 * track: beyond, it checks which are gone, then logs and forgets. */
#define MAX_IPC_FILES 4096
/* Messages read from one line per turn of the loop: one session cannot
 * keep the listener from the others. */
#define LINE_BURST 64

/* At most this many busy answers in flight: a flood of connections at the
 * cap costs a bounded number of processes, the rest are closed at once. */
#define MAX_REFUSERS 8
/* A refused client has this long to send its hello. */
#define REFUSE_HELLO_MS 2000

struct ipc_file {
    uint64_t dev, ino;
    char name[SANDBOX_IPC_NAME_MAX];
};

struct session {
    pid_t pid;
    int line;                   /* the listener's end; -1 once closed */
    int source;                 /* admission.c's, while not let in */
    int let_in;                 /* counted against --max-sessions */
    int busy;                   /* refused at the cap: not a failed attempt */
    int warned;
    struct ipc_file *files;
    int nfiles, files_cap;
};

static struct {
    struct session *s;
    int n, cap;
    int let_in;                 /* sessions let in */
    pid_t refusers[MAX_REFUSERS];
    int nrefusers;
    int shm_dir;                /* /dev/shm, to remove files of sessions gone; or -1 */
} L = { .shm_dir = -1 };

/* The session's end of its line (a session process only); -1 elsewhere. */
static int my_line = -1;

int listener_init(const struct rgpud_options *opt)
{
    L.cap = opt->max_sessions + opt->max_startups;
    L.s = calloc((size_t)L.cap, sizeof *L.s);
    L.shm_dir = open("/dev/shm", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (L.shm_dir < 0)
        rgpu_info("no /dev/shm (%s): CUDA IPC files of ended sessions are not removed",
                  strerror(errno));
    return L.s && admission_init(opt) == 0 ? 0 : -1;
}

/* ---- IPC files of a session ------------------------------------------------------- */

/* Whether /dev/shm/NAME is still that file: a regular file of ours. */
static int same_file(const struct ipc_file *f)
{
    struct stat st;
    return fstatat(L.shm_dir, f->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
           st.st_uid == geteuid() && (uint64_t)st.st_dev == f->dev &&
           (uint64_t)st.st_ino == f->ino;
}

/* Keep only the files still there. */
static void forget_gone_files(struct session *s)
{
    int k = 0;
    for (int i = 0; i < s->nfiles; i++)
        if (same_file(&s->files[i]))
            s->files[k++] = s->files[i];
    s->nfiles = k;
}

static void note_file(struct session *s, const struct sandbox_ipc_file *m)
{
    struct ipc_file f = { .dev = m->dev, .ino = m->ino };
    if (!memchr(m->name, '\0', sizeof m->name) || !sandbox_ipc_name_ok(m->name)) {
        rgpu_warn("session %d named an IPC file that is none: ignored", (int)s->pid);
        return;
    }
    memcpy(f.name, m->name, sizeof f.name);
    if (s->nfiles == s->files_cap)
        forget_gone_files(s);
    if (s->nfiles == s->files_cap && s->files_cap < MAX_IPC_FILES) {
        int cap = s->files_cap ? 2 * s->files_cap : 16;
        struct ipc_file *n = realloc(s->files, (size_t)cap * sizeof *n);
        if (n) {
            s->files = n;
            s->files_cap = cap;
        }
    }
    if (s->nfiles < s->files_cap) {
        s->files[s->nfiles++] = f;
        rgpu_debug("session %d made /dev/shm/%s", (int)s->pid, f.name);
    }
    else if (!s->warned++)
        rgpu_warn("session %d has more than %d CUDA IPC files in /dev/shm: those beyond are "
                  "left there when it ends", (int)s->pid, MAX_IPC_FILES);
}

static void remove_files(struct session *s)
{
    int removed = 0;
    for (int i = 0; i < s->nfiles; i++)
        if (same_file(&s->files[i]) && unlinkat(L.shm_dir, s->files[i].name, 0) == 0)
            removed++;
    if (removed)
        rgpu_info("session %d: removed %d CUDA IPC file%s it left in /dev/shm", (int)s->pid,
                  removed, removed == 1 ? "" : "s");
    free(s->files);
    s->files = NULL;
    s->nfiles = s->files_cap = 0;
}

/* ---- sessions and their lines ----------------------------------------------------- */

static void answer(struct session *s, char c)
{
    if (s->line >= 0 && send(s->line, &c, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1)
        rgpu_warn("session %d: cannot answer on its line: %s", (int)s->pid, strerror(errno));
}

static void let_in(struct session *s, const struct rgpud_options *opt)
{
    if (s->let_in || s->busy)
        return;                 /* asked before: the first answer stands */
    if (L.let_in >= opt->max_sessions) {
        s->busy = 1;
        rgpu_warn("%d sessions active, the cap (--max-sessions): refusing a client",
                  L.let_in);
        answer(s, LINE_BUSY);
        return;
    }
    s->let_in = 1;
    L.let_in++;
    admission_ended(s->source, 0);
    answer(s, LINE_YES);
}

/* Everything the session has said so far (at most LINE_BURST messages
 * unless all); the line is closed at its end. */
static void read_line(struct session *s, const struct rgpud_options *opt, int all)
{
    for (int k = 0; s->line >= 0 && (all || k < LINE_BURST); k++) {
        union {
            char type;
            struct sandbox_ipc_file file;
        } m;
        ssize_t n = recv(s->line, &m, sizeof m, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            close(s->line);
            s->line = -1;
        } else if (n == 1 && m.type == LINE_LET_IN) {
            let_in(s, opt);
        } else if (n == (ssize_t)sizeof m.file && m.type == SANDBOX_LINE_IPC_FILE) {
            note_file(s, &m.file);
        } else if (!s->warned++) {
            rgpu_warn("session %d sent its listener a message it does not know: ignored",
                      (int)s->pid);
        }
    }
}

static struct session *session_of(pid_t pid)
{
    for (int i = 0; i < L.n; i++)
        if (L.s[i].pid == pid)
            return &L.s[i];
    return NULL;
}

static struct session *session_of_line(int line)
{
    for (int i = 0; i < L.n; i++)
        if (L.s[i].line == line)
            return &L.s[i];
    return NULL;
}

static void log_session_end(pid_t pid, int status)
{
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        rgpu_info("session %d ended (%d active)", (int)pid, L.n);
    else if (WIFEXITED(status))
        rgpu_warn("session %d ended with exit code %d (%d active)", (int)pid,
                  WEXITSTATUS(status), L.n);
    else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS)
        rgpu_warn("session %d killed by the sandbox (SIGSYS: a forbidden system call, "
                  "named in the kernel's audit log, type=1326; %d active)", (int)pid, L.n);
    else if (WIFSIGNALED(status))
        rgpu_warn("session %d killed by signal %d (%s; %d active)", (int)pid,
                  WTERMSIG(status), strsignal(WTERMSIG(status)), L.n);
}

/* A session has been reaped: what it said last, its count, its files. */
static void session_gone(struct session *s, int status, const struct rgpud_options *opt)
{
    read_line(s, opt, 1);
    if (s->line >= 0)
        close(s->line);
    if (s->let_in)
        L.let_in--;
    else
        admission_ended(s->source, !s->busy);
    remove_files(s);
    pid_t pid = s->pid;
    *s = L.s[--L.n];
    log_session_end(pid, status);
}

static void reap_children(const struct rgpud_options *opt)
{
    pid_t pid;
    int status;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        struct session *s = session_of(pid);
        if (s) {
            session_gone(s, status, opt);
            continue;
        }
        for (int i = 0; i < L.nrefusers; i++)
            if (L.refusers[i] == pid)
                L.refusers[i--] = L.refusers[--L.nrefusers];
    }
}

/* In a child of the listener: nothing of the listener's but fd stays open. */
static void close_listener_fds(int lfd, int sfd)
{
    close(lfd);
    close(sfd);
    for (int i = 0; i < L.n; i++)
        if (L.s[i].line >= 0)
            close(L.s[i].line);
    if (L.shm_dir >= 0)
        close(L.shm_dir);
    admission_close_in_child();
}

/* ---- refusals and starts ---------------------------------------------------------- */

/* The busy answer, in the welcome layout of this protocol version (one
 * function, so that a new hello codec replaces it in one place). */
static void send_busy_welcome(int fd, const char *why)
{
    struct rgpu_hs_msg m = { .type = RGPU_MSG_WELCOME };
    struct rgpu_welcome *w = &m.u.welcome;
    w->proto = RGPU_PROTO_VERSION;
    w->status = RGPU_EBUSY;
    gethostname(w->server_name, sizeof w->server_name - 1);
    snprintf(w->message, sizeof w->message, "%s", why);
    (void)rgpu_hs_send(fd, &m);
}

/* Every startup slot taken and as many waiting: a short-lived child reads
 * the client's hello (the client sends it first and reads nothing before;
 * closing on unread bytes would reset the connection under the answer),
 * answers busy and leaves.  The listener itself never waits on a client. */
static void refuse_busy(int fd, int lfd, int sfd, const struct rgpud_options *opt)
{
    pid_t pid = L.nrefusers < MAX_REFUSERS ? fork() : -1;
    if (pid == 0) {
        struct timeval tv = { REFUSE_HELLO_MS / 1000, 0 };
        struct rgpu_hs_msg hello;
        char why[160], bad[160];
        sigset_t all;
        ipc_forget_secret();            /* it reads a stranger's bytes */
        close_listener_fds(lfd, sfd);
        sigemptyset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        snprintf(why, sizeof why, "rgpud has %d connections that are not let in yet "
                 "(--max-startups); try again later", opt->max_startups);
        /* Read as any handshake message (within the handshake's size);
         * whatever it says, the answer is busy. */
        if (rgpu_hs_recv(fd, &hello, bad, sizeof bad) != -1)
            send_busy_welcome(fd, why);
        _exit(0);
    }
    if (pid > 0)
        L.refusers[L.nrefusers++] = pid;
    rgpu_warn("%d connections not let in yet, the cap (--max-startups): %s a client",
              opt->max_startups, pid > 0 ? "refusing" : "closing at once on");
    close(fd);
}

static void start_session(int fd, int source, int lfd, int sfd,
                          const struct rgpud_options *opt)
{
    struct ipc_seed seed;
    int line[2];
    if (L.n == L.cap) {
        /* Cannot happen: admission.c and --max-sessions bound them. */
        rgpu_error("the table of sessions is full: closing a connection");
        close(fd);
        return;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, line) < 0) {
        rgpu_error("socketpair: %s", strerror(errno));
        close(fd);
        return;
    }
    ipc_listener_seed(fd, opt, &seed);  /* the daemon's secret stays here */
    pid_t pid = fork();
    if (pid < 0) {
        rgpu_error("fork: %s", strerror(errno));
        explicit_bzero(&seed, sizeof seed);
        close(line[0]);
        close(line[1]);
        close(fd);
        return;
    }
    if (pid == 0) {
        int one = 1;
        sigset_t all;
        ipc_session_start(&seed);
        close_listener_fds(lfd, sfd);
        close(line[0]);
        my_line = line[1];
        sandbox_report_ipc_files(my_line);
        /* Replies are small and awaited: never hold them back. */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        signal(SIGCHLD, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        sigemptyset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        session_run(fd, opt);
    }
    explicit_bzero(&seed, sizeof seed); /* the next session must not inherit it */
    close(line[1]);
    close(fd);
    admission_started(source);
    L.s[L.n++] = (struct session){ .pid = pid, .line = line[0], .source = source };
    rgpu_info("session %d started for %s (%d active)", (int)pid,
              admission_source_text(source), L.n);
}

/* Connections that waited for their source's turn, while they may start. */
static void start_waiting(const struct rgpud_options *opt, int lfd, int sfd)
{
    int fd, source;
    while ((fd = admission_next(&source)) >= 0)
        start_session(fd, source, lfd, sfd, opt);
}

static void accept_one(int lfd, int sfd, const struct rgpud_options *opt)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int fd = accept4(lfd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC);
    if (fd < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            rgpu_warn("accept: %s", strerror(errno));
        return;
    }
    int source = admission_source(fd, &ss);
    switch (admission_decide(source)) {
    case ADMIT_START: start_session(fd, source, lfd, sfd, opt); break;
    case ADMIT_WAIT: admission_wait(fd, source); break;
    case ADMIT_BUSY: refuse_busy(fd, lfd, sfd, opt); break;
    case ADMIT_DROP: close(fd); break;
    }
}

/* The accept loop.  SIGCHLD, SIGTERM and SIGINT are blocked and read from
 * a signalfd next to the listening socket, so an ending child or a stop
 * request is handled here, between accepts, never inside one. */
void listener_serve(int lfd, int sfd, const struct rgpud_options *opt)
{
    struct pollfd *pfd = calloc((size_t)L.cap + 2, sizeof *pfd);
    int stopping = 0;
    if (!pfd) {
        rgpu_error("no memory for the listener's loop");
        return;
    }
    fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK);
    while (!stopping) {
        int n = 2, timeout = admission_expire();
        pfd[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
        pfd[1] = (struct pollfd){ .fd = sfd, .events = POLLIN };
        for (int i = 0; i < L.n; i++)
            pfd[n++] = (struct pollfd){ .fd = L.s[i].line, .events = POLLIN };
        if (poll(pfd, (nfds_t)n, timeout) < 0) {
            if (errno != EINTR)
                rgpu_warn("poll: %s", strerror(errno));
            continue;
        }
        /* Lines first, found by descriptor: reaping below reorders the
         * table, and what a session said before it ended counts. */
        for (int i = 2; i < n; i++) {
            struct session *s = pfd[i].revents && pfd[i].fd >= 0 ? session_of_line(pfd[i].fd)
                                                                  : NULL;
            if (s)
                read_line(s, opt, 0);
        }
        if (pfd[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
                if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
                    stopping = 1;
            reap_children(opt);
        }
        if (!stopping)
            start_waiting(opt, lfd, sfd);
        if (!stopping && (pfd[0].revents & POLLIN))
            accept_one(lfd, sfd, opt);
    }
    free(pfd);
}

/* ---- the session's end of its line ------------------------------------------------- */

void listener_let_in(int fd, const struct rgpud_options *opt, struct rgpu_welcome *w)
{
    char ask = LINE_LET_IN, reply = 0, why[160];
    struct pollfd p = { .fd = my_line, .events = POLLIN };
    if (my_line >= 0 && send(my_line, &ask, 1, MSG_NOSIGNAL) == 1 &&
        poll(&p, 1, LINE_ANSWER_MS) == 1 && recv(my_line, &reply, 1, 0) == 1 &&
        reply == LINE_YES)
        return;
    if (reply == LINE_BUSY)
        snprintf(why, sizeof why, "rgpud serves at most %d sessions (--max-sessions); try "
                 "again later", opt->max_sessions);
    else
        snprintf(why, sizeof why, "rgpud's listener did not answer in time; try again later");
    auth_welcome_refusal(fd, w, RGPU_EBUSY, why);
}
