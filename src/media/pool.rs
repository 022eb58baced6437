//! The pool pictures are decoded on: at most one picture per core at a
//! time, each on tokio's blocking threads (never an async worker), each
//! given a time limit that counts its wait for a turn too. A picture past
//! its limit is answered at once; its thread finishes the work and only
//! then gives its turn back, so the bound on memory and CPU holds even
//! then.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// The wait and the work together took longer than the limit.
    #[error("processing the picture took longer than {0:?}")]
    TimedOut(Duration),
    /// The work panicked (a bug in a decoder).
    #[error("processing the picture failed")]
    Panicked,
}

#[derive(Clone)]
pub struct Pool {
    turns: Arc<Semaphore>,
    limit: Duration,
}

impl Pool {
    /// `workers` at a time (at least one), each within `limit`.
    pub fn new(workers: usize, limit: Duration) -> Pool {
        Pool { turns: Arc::new(Semaphore::new(workers.max(1))), limit }
    }

    /// One worker per core.
    pub fn per_core(limit: Duration) -> Pool {
        Pool::new(std::thread::available_parallelism().map_or(1, |n| n.get()), limit)
    }

    /// Runs `work` when a worker is free.
    pub async fn run<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> Result<T, PoolError> {
        let turns = self.turns.clone();
        let job = async move {
            // The semaphore is never closed.
            let turn = turns.acquire_owned().await.map_err(|_| PoolError::Panicked)?;
            tokio::task::spawn_blocking(move || {
                let _turn = turn;
                work()
            })
            .await
            .map_err(|_| PoolError::Panicked)
        };
        tokio::time::timeout(self.limit, job).await.map_err(|_| PoolError::TimedOut(self.limit))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_runs_off_the_runtime_and_a_panic_is_an_error() {
        let pool = Pool::new(1, Duration::from_secs(10));
        let runtime_thread = std::thread::current().id();
        let ran_on = pool.run(|| std::thread::current().id()).await.expect("ran");
        assert_ne!(ran_on, runtime_thread);
        assert_eq!(pool.run(|| panic!("decoder bug")).await, Err::<(), _>(PoolError::Panicked));
    }
}
