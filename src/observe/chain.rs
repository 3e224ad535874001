//! The chain a task works for, carried into the tasks it spawns, so that every metric it records carries a
//! `chain` label without each stage being told the chain's name.
//!
//! `pipeline::chains` runs each chain's job inside [`scope`]; every spawn in the pipeline wraps its future
//! in [`carry`]. Outside any scope (a library caller, a test) the chain is [`crate::config::DEFAULT_CHAIN`].

use std::future::Future;
use std::sync::Arc;

tokio::task_local! {
    static CHAIN: Arc<str>;
}

/// The chain of the running task.
pub fn current() -> Arc<str> {
    CHAIN
        .try_with(Arc::clone)
        .unwrap_or_else(|_| Arc::from(crate::config::DEFAULT_CHAIN))
}

/// `job` as the work of `chain`.
pub fn scope<F: Future>(chain: &str, job: F) -> impl Future<Output = F::Output> {
    CHAIN.scope(Arc::from(chain), job)
}

/// `task` to be spawned, keeping the chain of the task that spawns it.
pub fn carry<F: Future>(task: F) -> impl Future<Output = F::Output> {
    CHAIN.scope(current(), task)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_spawned_task_keeps_its_chain() {
        assert_eq!(&*current(), crate::config::DEFAULT_CHAIN);
        let inner = scope("base", async {
            tokio::spawn(carry(async { current() }))
                .await
                .expect("joins")
        })
        .await;
        assert_eq!(&*inner, "base");
        let lost = scope("base", async {
            tokio::spawn(async { current() }).await.expect("joins")
        })
        .await;
        assert_eq!(
            &*lost,
            crate::config::DEFAULT_CHAIN,
            "without carry, a spawn forgets it"
        );
    }
}
