//! What a front end sees of a run while it goes — its [`RunObserver`] — and how it ends, an
//! [`Outcome`]: completed, or stopped early because the observer asked.

use crate::error::{Error, Result};

use super::result::RunResult;

/// A front end's view of a run: progress after every block of steps, and whether to stop.
/// Every method has a silent default.
pub trait RunObserver {
    /// `done` of `total` steps taken (with `sampler.start = "both"`, over both ensembles).
    fn progress(&mut self, _done: usize, _total: usize) {}

    /// Asked after every block of steps: true ends the run as [`Outcome::Interrupted`].
    fn should_stop(&mut self) -> bool {
        false
    }
}

/// The observer of a run nobody watches.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unobserved;

impl RunObserver for Unobserved {}

/// How a run ended.
#[derive(Debug, Clone)]
pub enum Outcome<R = RunResult> {
    /// Every step was taken.
    Completed(R),
    /// The observer asked to stop after step `at` of the `steps` of the ensemble running then.
    Interrupted { at: usize, steps: usize },
}

impl<R> Outcome<R> {
    /// The result of a completed run; an interrupted one as the runtime error "interrupted at
    /// step … of …" (for callers that report an interrupt as a failure, exit code 1).
    pub fn into_result(self) -> Result<R> {
        match self {
            Outcome::Completed(r) => Ok(r),
            Outcome::Interrupted { at, steps } => Err(Error::runtime(format!(
                "interrupted at step {at} of {steps}"
            ))),
        }
    }
}

/// A [`RunObserver`] seen through a step offset: progress `offset + done` of `total` (the
/// second ensemble of compared starts continues the first's count).
pub(crate) struct Offset<'a> {
    pub inner: &'a mut dyn RunObserver,
    pub offset: usize,
    pub total: usize,
}

impl RunObserver for Offset<'_> {
    fn progress(&mut self, done: usize, _total: usize) {
        self.inner.progress(self.offset + done, self.total);
    }

    fn should_stop(&mut self) -> bool {
        self.inner.should_stop()
    }
}
