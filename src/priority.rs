//! CPU priority of the server's own threads. Work that can wait (pictures
//! being decoded, zstd and Brotli variants being made, activities from
//! other servers being verified and applied) runs on threads niced once
//! when they start, so on a busy machine the scheduler gives the threads
//! that answer local requests the CPU first, and an idle core to the
//! niced ones whole. Linux keeps a nice value per thread; a thread cannot
//! take its priority back without privileges, which is why only threads
//! of their own are niced, never tokio's shared blocking threads (they
//! would stay niced for whatever ran on them next).

/// How much lower than the server's a niced thread's priority is: it gets
/// about a tenth of a core that a normal thread also wants (the kernel's
/// weights: 1024 at 0, 110 at 10), and all of an idle one.
pub const NICE: i32 = 10;

/// Raises this thread's nice value by `NICE`. Failing is harmless: the
/// thread then runs at the server's priority. A no-op off Linux, where
/// the nice value is the whole process's.
pub fn lower_this_thread() {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid and setpriority only read and set this thread's
    // scheduling attributes.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        let now = libc::getpriority(libc::PRIO_PROCESS, tid);
        libc::setpriority(libc::PRIO_PROCESS, tid, (now + NICE).min(19));
    }
}

/// This thread's nice value (the tests check what was niced).
#[cfg(all(test, target_os = "linux"))]
pub fn nice_of_this_thread() -> i32 {
    // SAFETY: reads this thread's nice value.
    unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_lowered_thread_is_niced_and_its_neighbours_are_not() {
        let before = nice_of_this_thread();
        let niced = std::thread::spawn(|| {
            lower_this_thread();
            nice_of_this_thread()
        })
        .join()
        .expect("thread");
        assert_eq!(niced, (before + NICE).min(19));
        assert_eq!(nice_of_this_thread(), before, "only the thread that asked is niced");
    }
}
