//! Computations of `flscale serve`: each runs on a blocking thread under a
//! deadline, in one of two bounded classes, and can be told to stop.
//!
//! * **Slider** (`GET /api/cavity/view`, milliseconds): its own permits, so it never waits
//!   behind heavy work; the model page stays responsive during a burst of phase maps.
//! * **Heavy** (the scaling engine, the results analysis): at most [`HEAVY_RUNNING`] at once
//!   and [`HEAVY_WAITING`] more queued; beyond that a request is answered 503 at once.
//!
//! A request that passes its deadline is answered 503 and its [`Cancel`] is set; loops that
//! take long (the phase map) ask it between steps and stop, so an abandoned computation
//! releases its thread and its permit soon after. The permit travels with the blocking job,
//! not with the request: a computation counts against its class until it has really ended.
//! The blocking pool has room for both classes and for file reads
//! ([`BLOCKING_THREADS`]), so neither can starve the other.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::error::{secs, ApiError, ApiResult};

/// Slider computations that may run at once.
pub const SLIDER_RUNNING: usize = 2;
/// Heavy computations that may run at once.
pub const HEAVY_RUNNING: usize = 2;
/// Heavy requests that may wait for a free slot (beyond them: 503 at once).
pub const HEAVY_WAITING: usize = 6;
/// Threads of the blocking pool: both classes at full load, and four more for the chunked
/// file reads of the results browser.
pub const BLOCKING_THREADS: usize = SLIDER_RUNNING + HEAVY_RUNNING + 4;

/// The two classes of computation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// A slider move of the model page.
    Slider,
    /// The scaling engine and the results analysis.
    Heavy,
}

/// A computation's deadline and stop flag, shared by the request and its blocking job.
#[derive(Debug, Clone)]
pub struct Cancel {
    deadline: Option<Instant>,
    stopped: Arc<AtomicBool>,
}

impl Cancel {
    /// No deadline and never stopped (unit tests).
    #[cfg(test)]
    pub fn none() -> Self {
        Cancel {
            deadline: None,
            stopped: Arc::new(AtomicBool::new(false)),
        }
    }

    fn until(deadline: Instant) -> Self {
        Cancel {
            deadline: Some(deadline),
            stopped: Arc::new(AtomicBool::new(false)),
        }
    }

    /// True once the deadline has passed or the request has gone.
    pub fn should_stop(&self) -> bool {
        self.stopped.load(Ordering::Relaxed) || self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Time left before the deadline (`Duration::MAX` without one).
    pub fn remaining(&self) -> Duration {
        self.deadline.map_or(Duration::MAX, |d| {
            d.saturating_duration_since(Instant::now())
        })
    }

    fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }
}

/// Sets the flag when the request's future ends, answered or dropped (a client that closed
/// its connection): the job then stops at its next check.
struct StopOnDrop(Cancel);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// The permits of both classes and the time limit.
#[derive(Debug)]
pub struct Pools {
    slider: Arc<Semaphore>,
    heavy: Arc<Semaphore>,
    heavy_admitted: Arc<Semaphore>,
    limit: Duration,
}

impl Pools {
    /// Pools with the default sizes and the time limit `limit`.
    pub fn new(limit: Duration) -> Self {
        Pools {
            slider: Arc::new(Semaphore::new(SLIDER_RUNNING)),
            heavy: Arc::new(Semaphore::new(HEAVY_RUNNING)),
            heavy_admitted: Arc::new(Semaphore::new(HEAVY_RUNNING + HEAVY_WAITING)),
            limit,
        }
    }

    /// Runs `f` on the blocking pool in `class` under the time limit; the answer or an
    /// [`ApiError`] (503 when busy or past the deadline, 500 when `f` panicked).
    pub async fn run<F>(&self, class: Class, f: F) -> ApiResult<Value>
    where
        F: FnOnce(&Cancel) -> ApiResult<Value> + Send + 'static,
    {
        let deadline = Instant::now() + self.limit;
        let cancel = Cancel::until(deadline);
        let _stop = StopOnDrop(cancel.clone());
        let (slots, admitted) = match class {
            Class::Slider => (&self.slider, None),
            Class::Heavy => match self.heavy_admitted.clone().try_acquire_owned() {
                Ok(p) => (&self.heavy, Some(p)),
                Err(_) => {
                    return Err(busy(format!(
                        "the server is busy with {} heavy computations and {} more waiting; try again in a few seconds",
                        HEAVY_RUNNING, HEAVY_WAITING
                    )))
                }
            },
        };
        let permit = match tokio::time::timeout_at(deadline, slots.clone().acquire_owned()).await {
            Ok(Ok(p)) => p,
            _ => {
                return Err(busy(format!(
                "no computation slot became free within the {} limit; try again in a few seconds",
                secs(self.limit)
            )))
            }
        };
        let job_cancel = cancel.clone();
        let job = tokio::task::spawn_blocking(move || {
            let _held = (permit, admitted);
            f(&job_cancel)
        });
        match tokio::time::timeout_at(deadline, job).await {
            Ok(Ok(Ok(v))) => Ok(v),
            // A loop that saw the deadline gives up with its own error: the deadline explains it.
            Ok(Ok(Err(_))) if cancel.should_stop() => Err(self.over_time()),
            Ok(Ok(Err(e))) => Err(e),
            Ok(Err(_)) => Err(ApiError {
                status: 500,
                message: "the computation failed unexpectedly; please report the request".into(),
            }),
            Err(_) => {
                cancel.stop();
                Err(self.over_time())
            }
        }
    }

    fn over_time(&self) -> ApiError {
        busy(format!(
            "the computation took longer than the {} limit and was stopped; ask for less (a smaller grid)",
            secs(self.limit)
        ))
    }
}

fn busy(message: String) -> ApiError {
    ApiError {
        status: 503,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .max_blocking_threads(BLOCKING_THREADS)
            .build()
            .unwrap()
    }

    /// A job that loops until told to stop: the request answers 503 at the deadline, the job
    /// sees the flag and ends, and its slot is free for the next request.
    #[test]
    fn a_job_past_its_deadline_is_stopped_and_frees_its_slot() {
        let rt = runtime();
        let pools = Pools::new(Duration::from_millis(200));
        let ended = Arc::new(AtomicUsize::new(0));
        rt.block_on(async {
            let jobs = (0..HEAVY_RUNNING).map(|_| {
                let ended = ended.clone();
                pools.run(Class::Heavy, move |c: &Cancel| {
                    while !c.should_stop() {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    ended.fetch_add(1, Ordering::SeqCst);
                    Err(ApiError::bad("stopped"))
                })
            });
            for r in futures_join(jobs).await {
                let e = r.unwrap_err();
                assert_eq!(e.status, 503, "{}", e.message);
                assert!(e.message.contains("0.2 s limit"), "{}", e.message);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert_eq!(ended.load(Ordering::SeqCst), HEAVY_RUNNING);
            let v = pools
                .run(Class::Heavy, |_| Ok(Value::from(1)))
                .await
                .unwrap();
            assert_eq!(v, Value::from(1));
        });
    }

    /// With every heavy slot taken and the queue full, one more heavy request is turned away at
    /// once, while a slider request still runs.
    #[test]
    fn heavy_requests_beyond_the_queue_are_refused_and_the_slider_still_runs() {
        let rt = runtime();
        let pools = Arc::new(Pools::new(Duration::from_secs(5)));
        rt.block_on(async {
            let release = Arc::new(AtomicBool::new(false));
            let mut held = Vec::new();
            for _ in 0..HEAVY_RUNNING + HEAVY_WAITING {
                let (p, r) = (pools.clone(), release.clone());
                held.push(tokio::spawn(async move {
                    p.run(Class::Heavy, move |_| {
                        while !r.load(Ordering::SeqCst) {
                            std::thread::sleep(Duration::from_millis(2));
                        }
                        Ok(Value::Null)
                    })
                    .await
                }));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            let t = std::time::Instant::now();
            let e = pools
                .run(Class::Heavy, |_| Ok(Value::Null))
                .await
                .unwrap_err();
            assert_eq!(e.status, 503);
            assert!(e.message.contains("busy"), "{}", e.message);
            let v = pools
                .run(Class::Slider, |_| Ok(Value::from(2)))
                .await
                .unwrap();
            assert_eq!(v, Value::from(2));
            assert!(t.elapsed() < Duration::from_secs(1));
            release.store(true, Ordering::SeqCst);
            for h in held {
                assert!(h.await.unwrap().is_ok());
            }
        });
    }

    /// Awaits every future of `futs` concurrently (no futures crate in the tree).
    async fn futures_join<F: std::future::Future>(futs: impl Iterator<Item = F>) -> Vec<F::Output> {
        let mut set = Vec::new();
        for f in futs {
            set.push(Box::pin(f));
        }
        let mut out: Vec<Option<F::Output>> = set.iter().map(|_| None).collect();
        std::future::poll_fn(|cx| {
            let mut done = true;
            for (i, f) in set.iter_mut().enumerate() {
                if out[i].is_none() {
                    match f.as_mut().poll(cx) {
                        std::task::Poll::Ready(v) => out[i] = Some(v),
                        std::task::Poll::Pending => done = false,
                    }
                }
            }
            if done {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
        .await;
        out.into_iter().map(|o| o.unwrap()).collect()
    }
}
