//! The pool pictures are decoded on: at most one picture per core at a
//! time, and at most a budget of memory for all of them together (each
//! picture asks for what its header says it will take), each on tokio's
//! blocking threads (never an async worker), each given a time limit that
//! counts its wait for a turn too. A picture past its limit is answered at
//! once; its thread finishes the work and only then gives its turn and
//! its memory back, so the bounds on memory and CPU hold even then.

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
    /// MiB of decoding memory left to hand out.
    memory: Arc<Semaphore>,
    budget_mb: u32,
    limit: Duration,
}

impl Pool {
    /// `workers` at a time (at least one), `budget_mb` MiB among them,
    /// each within `limit`.
    pub fn new(workers: usize, budget_mb: u32, limit: Duration) -> Pool {
        let budget_mb = budget_mb.max(1);
        Pool {
            turns: Arc::new(Semaphore::new(workers.max(1))),
            memory: Arc::new(Semaphore::new(budget_mb as usize)),
            budget_mb,
            limit,
        }
    }

    /// One worker per core.
    pub fn per_core(budget_mb: u32, limit: Duration) -> Pool {
        Pool::new(std::thread::available_parallelism().map_or(1, |n| n.get()), budget_mb, limit)
    }

    /// Runs `work`, which needs about `need_mb` MiB (at most the whole
    /// budget), when a worker and that memory are free.
    pub async fn run<T: Send + 'static>(
        &self,
        need_mb: u32,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, PoolError> {
        let (turns, memory) = (self.turns.clone(), self.memory.clone());
        let need = need_mb.clamp(1, self.budget_mb);
        let job = async move {
            // The semaphores are never closed.
            let memory = memory.acquire_many_owned(need).await.map_err(|_| PoolError::Panicked)?;
            let turn = turns.acquire_owned().await.map_err(|_| PoolError::Panicked)?;
            tokio::task::spawn_blocking(move || {
                let _held = (turn, memory);
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
        let pool = Pool::new(1, 64, Duration::from_secs(10));
        let runtime_thread = std::thread::current().id();
        let ran_on = pool.run(1, || std::thread::current().id()).await.expect("ran");
        assert_ne!(ran_on, runtime_thread);
        assert_eq!(pool.run(1, || panic!("decoder bug")).await, Err::<(), _>(PoolError::Panicked));
        // More than the budget waits for all of it, rather than forever.
        assert_eq!(pool.run(1000, || 7).await, Ok(7));
    }
}
