//! Tuning of glibc's malloc for a long-running server with a large,
//! churning response cache (docs/PERFORMANCE.md, "Memory"). No-ops on
//! other C libraries.

/// glibc's malloc gives each thread that allocates its own arena (up to
/// 8 per core), and memory freed into one arena is not reused by another.
/// Cached responses are rendered on the blocking pool's threads and freed
/// wherever they are evicted, so with the default every arena grew to its
/// own high-water mark: ~25 MB more peak RSS under the realistic benchmark
/// (docs/PERFORMANCE.md, "Memory"). Two arenas keep that down without one
/// lock for all threads. `MALLOC_ARENA_MAX` in the environment still wins.
pub fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only sets a tunable; it is called before the
        // runtime starts any thread.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}

/// Hands memory that is free inside the heap back to the kernel. Start-up
/// reads the whole database (the integrity check, migrations) through
/// SQLite's page cache on the main thread; that memory is freed, but it
/// stays resident in the main arena, which the renderers' threads do not
/// allocate from.
pub fn release_free() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free pages; it is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}
