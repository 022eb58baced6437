//! The pool pictures are decoded on: a few threads of its own (one per
//! core), which run at a lower CPU priority than the rest of the server,
//! and a budget of memory for all the pictures being decoded together
//! (each asks for what its header says it will take). Each picture is
//! given a time limit that counts its wait for a turn too. A picture past
//! its limit is answered at once; its thread finishes the work and only
//! then takes the next, and its memory is given back only then, so the
//! bounds on memory and CPU hold even then. A picture whose caller has
//! given up before a thread took it is not decoded at all.
//!
//! Why threads of its own rather than tokio's blocking pool: a decode is
//! CPU work that can wait, while the requests beside it cannot, so these
//! threads are niced when they start (`crate::priority`), which tokio's
//! shared blocking threads cannot be.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::{Semaphore, oneshot};

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// The wait and the work together took longer than the limit.
    #[error("processing the picture took longer than {0:?}")]
    TimedOut(Duration),
    /// The work panicked (a bug in a decoder).
    #[error("processing the picture failed")]
    Panicked,
}

type Job = Box<dyn FnOnce() + Send>;

#[derive(Clone)]
pub struct Pool {
    workers: usize,
    /// The decoding threads' queue, made with the threads on first use.
    queue: Arc<OnceLock<crossbeam_channel::Sender<Job>>>,
    /// MiB of decoding memory left to hand out.
    memory: Arc<Semaphore>,
    budget_mb: u32,
    limit: Duration,
}

impl Pool {
    /// `workers` threads (at least one), `budget_mb` MiB among them, each
    /// picture within `limit`.
    pub fn new(workers: usize, budget_mb: u32, limit: Duration) -> Pool {
        let budget_mb = budget_mb.max(1);
        Pool {
            workers: workers.max(1),
            queue: Arc::new(OnceLock::new()),
            memory: Arc::new(Semaphore::new(budget_mb as usize)),
            budget_mb,
            limit,
        }
    }

    /// One worker per core.
    pub fn per_core(budget_mb: u32, limit: Duration) -> Pool {
        Pool::new(per_core_workers(), budget_mb, limit)
    }

    /// Runs `work`, which needs about `need_mb` MiB (at most the whole
    /// budget), when a thread and that memory are free.
    pub async fn run<T: Send + 'static>(
        &self,
        need_mb: u32,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, PoolError> {
        let memory = self.memory.clone();
        let need = need_mb.clamp(1, self.budget_mb);
        let queue = self.queue.get_or_init(|| start(self.workers)).clone();
        let job = async move {
            // The semaphore is never closed.
            let held = memory.acquire_many_owned(need).await.map_err(|_| PoolError::Panicked)?;
            let (tx, rx) = oneshot::channel();
            let job: Job = Box::new(move || {
                if tx.is_closed() {
                    return; // timed out while queued
                }
                let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
                drop(held);
                let _ = tx.send(out.map_err(|_| PoolError::Panicked));
            });
            queue.send(job).map_err(|_| PoolError::Panicked)?;
            rx.await.map_err(|_| PoolError::Panicked)?
        };
        tokio::time::timeout(self.limit, job).await.map_err(|_| PoolError::TimedOut(self.limit))?
    }
}

/// How many threads `Pool::per_core` starts: one per core.
pub fn per_core_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Starts `n` niced threads taking jobs from one queue; they end when the
/// last `Pool` holding its sender is dropped.
fn start(n: usize) -> crossbeam_channel::Sender<Job> {
    let (tx, rx) = crossbeam_channel::unbounded::<Job>();
    for i in 0..n {
        let rx = rx.clone();
        let spawned = std::thread::Builder::new().name(format!("pith-pictures-{i}")).spawn(move || {
            crate::priority::lower_this_thread();
            while let Ok(job) = rx.recv() {
                job();
            }
        });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "could not start a picture decoding thread");
        }
    }
    tx
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::priority::{NICE, nice_of_this_thread};

    #[tokio::test]
    async fn work_runs_off_the_runtime_at_a_lower_priority_and_a_panic_is_an_error() {
        let pool = Pool::new(1, 64, Duration::from_secs(10));
        let runtime_thread = std::thread::current().id();
        let (ran_on, nice) = pool.run(1, || (std::thread::current().id(), nice_of_this_thread())).await.expect("ran");
        assert_ne!(ran_on, runtime_thread);
        assert_eq!(nice, (nice_of_this_thread() + NICE).min(19), "the decoding thread is niced");
        assert_eq!(pool.run(1, || panic!("decoder bug")).await, Err::<(), _>(PoolError::Panicked));
        // The thread lives on after a panic, and more than the budget
        // waits for all of it, rather than forever.
        assert_eq!(pool.run(1000, || 7).await, Ok(7));
    }

    #[tokio::test]
    async fn a_picture_past_its_limit_is_answered_and_one_given_up_in_the_queue_is_skipped() {
        let pool = Pool::new(1, 64, Duration::from_millis(200));
        let (ran_tx, ran_rx) = std::sync::mpsc::channel();
        let slow = pool.run(1, || std::thread::sleep(Duration::from_millis(600)));
        let queued = pool.run(1, move || ran_tx.send(()).expect("send"));
        let (slow, queued) = tokio::join!(slow, queued);
        assert_eq!(slow, Err(PoolError::TimedOut(Duration::from_millis(200))));
        assert_eq!(queued, Err(PoolError::TimedOut(Duration::from_millis(200))));
        // Once the slow one is done, the thread skips the abandoned job.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(pool.run(1, || 1).await, Ok(1));
        assert!(ran_rx.try_recv().is_err(), "the abandoned job never ran");
    }
}
