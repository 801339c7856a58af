//! Shared fixture of the lab tests: a lab prefix unique to the test process and call, torn down
//! on drop (even when the test panics).

use std::sync::atomic::{AtomicUsize, Ordering};

use dataplane::netns::require_root;
use e2e::lab::{self, Prefix};

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A lab prefix `<tag><letter><pid>`, removed with everything under it on drop.
pub(crate) struct LabGuard(pub(crate) Prefix);

impl LabGuard {
    pub(crate) fn new(tag: char) -> LabGuard {
        require_root();
        let letter = (b'a' + u8::try_from(NEXT.fetch_add(1, Ordering::Relaxed)).unwrap()) as char;
        LabGuard(
            format!("{tag}{letter}{}", std::process::id() % 10_000_000)
                .parse()
                .unwrap(),
        )
    }
}

impl Drop for LabGuard {
    fn drop(&mut self) {
        let _ = lab::down(&self.0);
    }
}
