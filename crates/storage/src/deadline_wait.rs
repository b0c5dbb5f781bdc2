//! Waiting on async work from synchronous code: the engine is thread-based, the HDFS and
//! ZooKeeper clients are async. The work runs on a runtime the caller owns; the calling
//! thread waits on a channel with a deadline. It never calls `block_on`, so it works from any
//! thread, a runtime's own included, and a dead service costs the caller `limit`, not a hang.

use std::future::Future;
use std::time::Duration;

/// Why [`wait_on`] returned no value.
#[derive(Debug)]
pub enum Waited<E> {
    /// The work took longer than the limit (it was cancelled).
    TimedOut,
    /// The work failed.
    Failed(E),
}

/// Runs `fut` on `runtime` and waits for its result at most `limit`.
pub fn wait_on<T, E, Fut>(
    runtime: &tokio::runtime::Handle,
    limit: Duration,
    fut: Fut,
) -> Result<T, Waited<E>>
where
    T: Send + 'static,
    E: Send + 'static,
    Fut: Future<Output = Result<T, E>> + Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let task = runtime.spawn(async move {
        let _ = tx.send(fut.await);
    });
    match rx.recv_timeout(limit) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Waited::Failed(e)),
        Err(_) => {
            task.abort();
            Err(Waited::TimedOut)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_errors_and_deadlines() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let h = rt.handle();
        let ok: Result<u32, Waited<String>> = wait_on(h, Duration::from_secs(5), async { Ok(7) });
        assert!(matches!(ok, Ok(7)));
        let failed: Result<u32, Waited<String>> =
            wait_on(h, Duration::from_secs(5), async { Err("no".to_string()) });
        assert!(matches!(failed, Err(Waited::Failed(e)) if e == "no"));
        let slow: Result<u32, Waited<String>> = wait_on(h, Duration::from_millis(50), async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(1)
        });
        assert!(matches!(slow, Err(Waited::TimedOut)));
        // From inside the runtime too (a handler thread of an async server).
        let inner = rt.block_on(async {
            let h = tokio::runtime::Handle::current();
            tokio::task::spawn_blocking(move || {
                wait_on::<u32, String, _>(&h, Duration::from_secs(5), async { Ok(3) })
            })
            .await
        });
        assert!(matches!(inner, Ok(Ok(3))));
    }
}
