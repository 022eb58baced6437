/*
 * bench/c/cserver.c: the published "C + SQLite prefork" forum server design,
 * rebuilt as a comparison point for Pith (see docs/BENCHMARKS.md, "The C
 * design").
 *
 * The design, as published: SQLite in WAL mode with synchronous=NORMAL;
 * N (8) "prefork" threads, each blocking in accept() on one shared
 * listening socket and serving exactly one request per connection
 * (Connection: close); one dedicated thread running a FULL WAL checkpoint
 * every second. Nothing is cached: every GET runs its queries.
 *
 * It serves the two endpoints of the WORKLOAD.md contract from the same
 * pith.db that `pith seed` makes:
 *   GET  /api/v1/topics/{id}        the topic and all its posts, as JSON
 *                                    (built by SQLite's json functions)
 *   POST /api/v1/topics/{id}/posts  {"body": "..."} with a bearer token,
 *                                    checked as Pith does (SHA-256 of the
 *                                    token looked up in `tokens`)
 *
 * Build: gcc -O2 -pthread -o cserver cserver.c -lsqlite3 -lcrypto
 * Run:   cserver PORT PATH/TO/pith.db [THREADS]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MAX_REQUEST (64 * 1024) /* headers and body together */
#define MAX_BODY_CHARS 40000    /* Pith's limit on a post body */

static int listen_fd;
static const char *db_path;

/* SQL that turns stored rows into Pith's JSON shapes. Times are RFC 3339
 * UTC like Pith's; deleted and removed posts keep their place with an empty
 * body, as in Pith's public view. body_html is NULL only for rows nobody
 * has rendered yet (Pith renders those on open); escaping is the fallback. */
#define ESCAPED(x) "replace(replace(replace(" x ",'&','&amp;'),'<','&lt;'),'>','&gt;')"
#define RFC3339(x) "strftime('%Y-%m-%dT%H:%M:%SZ'," x ",'unixepoch')"
#define BOOL(x) "json(CASE WHEN " x " THEN 'true' ELSE 'false' END)"
#define HIDDEN "(p.deleted OR p.removed)"
/* A post as created (with its HTML). */
#define POST_JSON                                                                                      \
    "json_object('id',p.id,'topic_id',p.topic_id,'parent_id',p.parent_id,"                          \
    "'author',CASE WHEN p.deleted THEN NULL ELSE u.name END,"                                         \
    "'body',CASE WHEN " HIDDEN " THEN '' ELSE p.body END,"                                             \
    "'body_html',CASE WHEN " HIDDEN " THEN '' ELSE coalesce(p.body_html,'<p>'||" ESCAPED("p.body")    \
    "||'</p>'||char(10)) END,"                                                                         \
    "'created_at'," RFC3339("p.created_at") ",'edited_at'," RFC3339("p.edited_at") ","                \
    "'deleted'," BOOL("p.deleted") ",'removed'," BOOL("p.removed") ",'score',p.score)"
/* A post as a topic's post list carries it (Pith's GET without ?html=true):
 * the Markdown body only, no topic_id, and parent_id, edited_at, deleted
 * and removed only when not null or false. json_object cannot leave a key
 * out, so the object is formatted by printf (json_quote escapes the
 * strings; one copy of the body, where || would copy it once per piece),
 * and the response is concatenated around the list: no JSON is parsed
 * again. */
#define LISTED_POST_JSON                                                                               \
    "printf('{\"id\":%d%s,\"author\":%s,\"body\":%s,\"created_at\":\"%s\"%s%s%s,\"score\":%d}',"           \
    "p.id,"                                                                                            \
    "CASE WHEN p.parent_id IS NULL THEN '' ELSE ',\"parent_id\":'||p.parent_id END,"                 \
    "json_quote(CASE WHEN p.deleted THEN NULL ELSE u.name END),"                                       \
    "json_quote(CASE WHEN " HIDDEN " THEN '' ELSE p.body END),"                                        \
    RFC3339("p.created_at") ","                                                                        \
    "CASE WHEN p.edited_at IS NULL THEN '' ELSE ',\"edited_at\":\"'||" RFC3339("p.edited_at") "||'\"' END," \
    "CASE WHEN p.deleted THEN ',\"deleted\":true' ELSE '' END,"                                      \
    "CASE WHEN p.removed THEN ',\"removed\":true' ELSE '' END,"                                      \
    "p.score)"

static const char *SQL_TOPIC =
    "SELECT '{\"topic\":'||json_object('id',t.id,'community',c.name,"
    "'author',CASE WHEN t.deleted THEN NULL ELSE u.name END,'title',t.title,"
    "'body',CASE WHEN t.deleted THEN NULL ELSE t.body END,"
    "'body_html',CASE WHEN t.deleted OR t.body IS NULL THEN NULL ELSE coalesce(t.body_html,'<p>'||" ESCAPED("t.body")
    "||'</p>'||char(10)) END,"
    "'url',CASE WHEN t.deleted THEN NULL ELSE t.url END,"
    "'created_at'," RFC3339("t.created_at") ",'edited_at'," RFC3339("t.edited_at") ","
    "'deleted'," BOOL("t.deleted") ",'removed'," BOOL("t.removed") ",'locked'," BOOL("t.locked") ","
    "'score',t.score,'post_count',coalesce((SELECT post_count FROM topic_counts WHERE topic_id = t.id),0))"
    "||',\"posts\":['||coalesce((SELECT group_concat(j,',') FROM (SELECT " LISTED_POST_JSON " AS j"
    " FROM posts p JOIN users u ON u.id = p.author_id WHERE p.topic_id = t.id"
    " ORDER BY p.score DESC, p.id ASC)),'')||']}'"
    " FROM topics t JOIN communities c ON c.id = t.community_id JOIN users u ON u.id = t.author_id"
    " WHERE t.id = ?1 AND t.removed = 0";

static const char *SQL_USER = "SELECT u.id FROM tokens k JOIN users u ON u.id = k.user_id WHERE k.hash = ?1";
static const char *SQL_BODY = "SELECT json_extract(?1,'$.body'), json_type(?1,'$.body')";
static const char *SQL_TOPIC_STATE =
    "SELECT deleted, removed, locked, community_id FROM topics WHERE id = ?1";
static const char *SQL_BANNED =
    "SELECT 1 FROM bans WHERE user_id = ?1 AND (community_id IS NULL OR community_id = ?2)"
    " AND (expires_at IS NULL OR expires_at > ?3)";
static const char *SQL_MODERATES =
    "SELECT 1 FROM users WHERE id = ?1 AND is_admin"
    " UNION ALL SELECT 1 FROM moderators WHERE user_id = ?1 AND community_id = ?2";
static const char *SQL_INSERT =
    "INSERT INTO posts (topic_id, parent_id, author_id, body, body_html, created_at)"
    " VALUES (?1, NULL, ?2, ?3, '<p>'||" ESCAPED("?3") "||'</p>'||char(10), ?4)";
/* A topic's count of posts is a row of its own (Pith's migration 0019). */
static const char *SQL_COUNT = "INSERT INTO topic_counts (topic_id, post_count) VALUES (?1, 1)"
                               " ON CONFLICT (topic_id) DO UPDATE SET post_count = post_count + 1";
/* Pith indexes a new post for search in the same transaction (or queues it
 * while a bulk load defers the index); so does this design. */
static const char *SQL_INDEX =
    "INSERT INTO posts_fts (rowid, body) SELECT ?1, ?2 WHERE NOT (SELECT deferred FROM fts_defer)";
static const char *SQL_QUEUE = "INSERT INTO fts_queue (posts, command, item, body)"
                               " SELECT 1, NULL, ?1, ?2 WHERE (SELECT deferred FROM fts_defer)";
static const char *SQL_POST = "SELECT " POST_JSON " FROM posts p JOIN users u ON u.id = p.author_id WHERE p.id = ?1";

/* One worker's connection and statements, prepared once. */
struct db {
    sqlite3 *conn;
    sqlite3_stmt *topic, *user, *body, *state, *banned, *moderates, *insert, *count, *index, *queue, *post;
};

static void die(const char *what, const char *detail) {
    fprintf(stderr, "cserver: %s: %s\n", what, detail);
    exit(1);
}

static sqlite3 *open_db(void) {
    sqlite3 *c;
    if (sqlite3_open_v2(db_path, &c, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
        die("cannot open the database", sqlite3_errmsg(c));
    /* Only the checkpoint thread checkpoints (wal_autocheckpoint=0). */
    const char *pragmas = "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"
                          "PRAGMA wal_autocheckpoint=0;";
    char *err = NULL;
    if (sqlite3_exec(c, pragmas, NULL, NULL, &err) != SQLITE_OK) die("pragmas", err);
    sqlite3_busy_timeout(c, 10000);
    return c;
}

static sqlite3_stmt *prepare(sqlite3 *c, const char *sql) {
    sqlite3_stmt *s;
    if (sqlite3_prepare_v3(c, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL) != SQLITE_OK)
        die("prepare", sqlite3_errmsg(c));
    return s;
}

static void db_init(struct db *d) {
    d->conn = open_db();
    d->topic = prepare(d->conn, SQL_TOPIC);
    d->user = prepare(d->conn, SQL_USER);
    d->body = prepare(d->conn, SQL_BODY);
    d->state = prepare(d->conn, SQL_TOPIC_STATE);
    d->banned = prepare(d->conn, SQL_BANNED);
    d->moderates = prepare(d->conn, SQL_MODERATES);
    d->insert = prepare(d->conn, SQL_INSERT);
    d->count = prepare(d->conn, SQL_COUNT);
    d->index = prepare(d->conn, SQL_INDEX);
    d->queue = prepare(d->conn, SQL_QUEUE);
    d->post = prepare(d->conn, SQL_POST);
}

static int write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void respond(int fd, int status, const char *reason, const char *body, size_t len) {
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     status, reason, len);
    if (write_all(fd, head, (size_t)n) == 0) write_all(fd, body, len);
}

static void error(int fd, int status, const char *reason, const char *code, const char *message) {
    char body[512];
    int n = snprintf(body, sizeof body, "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}", code, message);
    respond(fd, status, reason, body, (size_t)n);
}

static void get_topic(struct db *d, int fd, long long id) {
    sqlite3_stmt *s = d->topic;
    sqlite3_bind_int64(s, 1, id);
    if (sqlite3_step(s) == SQLITE_ROW) {
        respond(fd, 200, "OK", (const char *)sqlite3_column_text(s, 0), (size_t)sqlite3_column_bytes(s, 0));
    } else {
        error(fd, 404, "Not Found", "not_found", "topic not found");
    }
    sqlite3_reset(s);
}

/* The user id behind `Authorization: Bearer TOKEN`, or 0. */
static long long authenticate(struct db *d, const char *token, size_t len) {
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)token, len, digest);
    sqlite3_bind_blob(d->user, 1, digest, sizeof digest, SQLITE_STATIC);
    long long user = sqlite3_step(d->user) == SQLITE_ROW ? sqlite3_column_int64(d->user, 0) : 0;
    sqlite3_reset(d->user);
    return user;
}

static int exists(sqlite3_stmt *s) {
    int found = sqlite3_step(s) == SQLITE_ROW;
    sqlite3_reset(s);
    return found;
}

/* Inserts the post inside an open write transaction: 0 and the new id, or
 * an HTTP status (the error response already sent). */
static int insert_post(struct db *d, int fd, long long topic, long long user, const char *text, int len,
                       long long *id) {
    sqlite3_bind_int64(d->state, 1, topic);
    if (sqlite3_step(d->state) != SQLITE_ROW) {
        sqlite3_reset(d->state);
        error(fd, 404, "Not Found", "not_found", "topic not found");
        return 404;
    }
    int deleted = sqlite3_column_int(d->state, 0), removed = sqlite3_column_int(d->state, 1);
    int locked = sqlite3_column_int(d->state, 2);
    long long community = sqlite3_column_int64(d->state, 3);
    sqlite3_reset(d->state);
    if (deleted || removed) {
        error(fd, 422, "Unprocessable Entity", "invalid", "the topic has been deleted or removed");
        return 422;
    }
    long long now = (long long)time(NULL);
    sqlite3_bind_int64(d->banned, 1, user);
    sqlite3_bind_int64(d->banned, 2, community);
    sqlite3_bind_int64(d->banned, 3, now);
    if (exists(d->banned)) {
        error(fd, 403, "Forbidden", "banned", "you are banned");
        return 403;
    }
    sqlite3_bind_int64(d->moderates, 1, user);
    sqlite3_bind_int64(d->moderates, 2, community);
    if (locked && !exists(d->moderates)) {
        error(fd, 403, "Forbidden", "topic_locked", "the topic is locked: it takes no new replies");
        return 403;
    }
    sqlite3_bind_int64(d->insert, 1, topic);
    sqlite3_bind_int64(d->insert, 2, user);
    sqlite3_bind_text(d->insert, 3, text, len, SQLITE_STATIC);
    sqlite3_bind_int64(d->insert, 4, now);
    int rc = sqlite3_step(d->insert);
    sqlite3_reset(d->insert);
    *id = sqlite3_last_insert_rowid(d->conn);
    sqlite3_bind_int64(d->count, 1, topic);
    if (rc == SQLITE_DONE) rc = sqlite3_step(d->count);
    sqlite3_reset(d->count);
    sqlite3_stmt *search[2] = {d->index, d->queue};
    for (int i = 0; i < 2 && rc == SQLITE_DONE; i++) {
        sqlite3_bind_int64(search[i], 1, *id);
        sqlite3_bind_text(search[i], 2, text, len, SQLITE_STATIC);
        rc = sqlite3_step(search[i]);
        sqlite3_reset(search[i]);
    }
    if (rc != SQLITE_DONE) {
        error(fd, 500, "Internal Server Error", "internal", "the post could not be stored");
        return 500;
    }
    return 0;
}

static void post_reply(struct db *d, int fd, long long topic, const char *auth, const char *json, size_t json_len) {
    if (!auth || strncasecmp(auth, "Bearer ", 7) != 0) {
        error(fd, 401, "Unauthorized", "unauthorized", "authentication required: send Authorization: Bearer TOKEN");
        return;
    }
    const char *token = auth + 7;
    size_t token_len = strcspn(token, "\r\n");
    long long user = authenticate(d, token, token_len);
    if (!user) {
        error(fd, 401, "Unauthorized", "unauthorized", "unknown or revoked token");
        return;
    }
    /* The body's text, parsed by SQLite's JSON functions. */
    sqlite3_bind_text(d->body, 1, json, (int)json_len, SQLITE_STATIC);
    int ok = sqlite3_step(d->body) == SQLITE_ROW && sqlite3_column_type(d->body, 1) == SQLITE_TEXT &&
             strcmp((const char *)sqlite3_column_text(d->body, 1), "text") == 0;
    const char *text = ok ? (const char *)sqlite3_column_text(d->body, 0) : NULL;
    int len = ok ? sqlite3_column_bytes(d->body, 0) : 0;
    /* Characters, not bytes: count UTF-8 lead bytes. */
    int chars = 0;
    for (int i = 0; i < len; i++) chars += ((unsigned char)text[i] & 0xC0) != 0x80;
    if (!ok || chars == 0 || chars > MAX_BODY_CHARS) {
        sqlite3_reset(d->body);
        error(fd, 422, "Unprocessable Entity", "invalid", "body must be a string of 1 to 40000 characters");
        return;
    }
    long long id = 0;
    int failed;
    if (sqlite3_exec(d->conn, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        error(fd, 503, "Service Unavailable", "busy", "the database is busy");
        failed = 503;
    } else {
        failed = insert_post(d, fd, topic, user, text, len, &id);
        if (failed || sqlite3_exec(d->conn, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
            sqlite3_exec(d->conn, "ROLLBACK", NULL, NULL, NULL);
            if (!failed) error(fd, 503, "Service Unavailable", "busy", "the database is busy");
            failed = 1;
        }
    }
    sqlite3_reset(d->body);
    if (failed) return;
    sqlite3_bind_int64(d->post, 1, id);
    if (sqlite3_step(d->post) == SQLITE_ROW) {
        respond(fd, 201, "Created", (const char *)sqlite3_column_text(d->post, 0),
                (size_t)sqlite3_column_bytes(d->post, 0));
    } else {
        error(fd, 500, "Internal Server Error", "internal", "the post vanished");
    }
    sqlite3_reset(d->post);
}

/* Value of header `name` (with its colon) in `head`, or NULL. */
static const char *header(const char *head, const char *name) {
    size_t n = strlen(name);
    for (const char *p = strstr(head, "\r\n"); p && p[2] != '\r'; p = strstr(p + 2, "\r\n")) {
        if (strncasecmp(p + 2, name, n) == 0) {
            const char *v = p + 2 + n;
            while (*v == ' ' || *v == '\t') v++;
            return v;
        }
    }
    return NULL;
}

/* Reads one request and answers it. */
static void serve(struct db *d, int fd, char *buf) {
    size_t got = 0;
    char *end = NULL;
    while (!end) {
        if (got == MAX_REQUEST) {
            error(fd, 431, "Request Header Fields Too Large", "too_large", "headers too large");
            return;
        }
        ssize_t r = recv(fd, buf + got, MAX_REQUEST - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return;
        got += (size_t)r;
        buf[got] = 0;
        end = strstr(buf, "\r\n\r\n");
    }
    *end = 0;
    char *body = end + 4;
    const char *cl = header(buf, "Content-Length:");
    size_t want = cl ? strtoul(cl, NULL, 10) : 0;
    if (want > MAX_REQUEST - (size_t)(body - buf)) {
        error(fd, 413, "Payload Too Large", "too_large", "body too large");
        return;
    }
    while ((size_t)(buf + got - body) < want) {
        ssize_t r = recv(fd, buf + got, MAX_REQUEST - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return;
        got += (size_t)r;
    }
    long long id;
    int used = 0;
    char tail[16] = "";
    if (sscanf(buf, "GET /api/v1/topics/%lld%n", &id, &used) == 1 && (buf[used] == ' ' || buf[used] == '?')) {
        get_topic(d, fd, id);
    } else if (sscanf(buf, "POST /api/v1/topics/%lld/%15[^ ]", &id, tail) == 2 && strcmp(tail, "posts") == 0) {
        post_reply(d, fd, id, header(buf, "Authorization:"), body, want);
    } else {
        error(fd, 404, "Not Found", "not_found", "no such endpoint");
    }
}

static void *worker(void *arg) {
    (void)arg;
    struct db d;
    db_init(&d);
    char *buf = malloc(MAX_REQUEST + 1);
    if (!buf) die("malloc", "out of memory");
    struct timeval tv = {.tv_sec = 10};
    for (;;) {
        int fd = accept(listen_fd, NULL, NULL);
        if (fd < 0) continue;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        serve(&d, fd, buf);
        close(fd);
    }
    return NULL;
}

static void *checkpointer(void *arg) {
    (void)arg;
    sqlite3 *c = open_db();
    for (;;) {
        sleep(1);
        sqlite3_wal_checkpoint_v2(c, NULL, SQLITE_CHECKPOINT_FULL, NULL, NULL);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) die("usage", "cserver PORT PATH/TO/pith.db [THREADS]");
    int port = atoi(argv[1]);
    db_path = argv[2];
    int threads = argc > 3 ? atoi(argv[3]) : 8;
    if (port <= 0 || port > 65535 || threads <= 0) die("usage", "cserver PORT PATH/TO/pith.db [THREADS]");
    signal(SIGPIPE, SIG_IGN);
    listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(listen_fd, (struct sockaddr *)&addr, sizeof addr) < 0) die("bind", strerror(errno));
    if (listen(listen_fd, 4096) < 0) die("listen", strerror(errno));
    struct db probe;
    db_init(&probe); /* fail fast on a missing or foreign database */
    sqlite3_close_v2(probe.conn);
    pthread_t t;
    for (int i = 0; i < threads; i++) pthread_create(&t, NULL, worker, NULL);
    pthread_create(&t, NULL, checkpointer, NULL);
    fprintf(stderr, "cserver: listening on 127.0.0.1:%d, %d threads, %s\n", port, threads, db_path);
    pthread_join(t, NULL);
    return 0;
}
