//! Shared fixture of the lab tests: a lab prefix unique to the test process and call, torn down
//! on drop (even when the test panics).

use std::sync::atomic::{AtomicUsize, Ordering};

use dataplane::netns::require_root;
use e2e::lab::{self, Prefix};

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A lab prefix `<tag><two letters><pid>`, removed with everything under it on drop.
pub(crate) struct LabGuard(pub(crate) Prefix);

impl LabGuard {
    pub(crate) fn new(tag: char) -> LabGuard {
        require_root();
        // Two letters: up to 676 labs per test binary, and at most 8 characters in all.
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(n < 26 * 26, "too many labs in one test binary");
        let letter = |i: usize| char::from(b'a' + u8::try_from(i % 26).unwrap());
        LabGuard(
            format!(
                "{tag}{}{}{}",
                letter(n / 26),
                letter(n),
                std::process::id() % 100_000
            )
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
