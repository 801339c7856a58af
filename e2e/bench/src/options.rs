//! What every bench on the tunnel bed takes: the variants on the gateway-to-gateway leg, the CPU
//! profiles, the options ([`Options`]) and the one error type of the crate ([`BenchError`]).

use std::{fmt, path::PathBuf};

use e2e::lab::{LabError, Prefix};
use serde::{Deserialize, Serialize};

/// What is on the gateway-to-gateway leg.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// Routes only, no tunnel.
    Plain,
    /// Our gateway, `liqo-gateway run`.
    Ours,
    /// `boringtun-cli --threads 1` (crates.io).
    Boringtun,
    /// wireguard-go as Debian packages it.
    #[value(name = "wireguard-go-debian")]
    #[serde(rename = "wireguard-go-debian")]
    WgGoDebian,
    /// wireguard-go built from the latest module on the Go module proxy.
    #[value(name = "wireguard-go-latest")]
    #[serde(rename = "wireguard-go-latest")]
    WgGoLatest,
}

impl Variant {
    /// Every variant, in table order.
    pub const ALL: [Variant; 5] = [
        Variant::Plain,
        Variant::Ours,
        Variant::Boringtun,
        Variant::WgGoDebian,
        Variant::WgGoLatest,
    ];

    /// The name used on the command line and in JSON.
    pub fn key(self) -> &'static str {
        match self {
            Variant::Plain => "plain",
            Variant::Ours => "ours",
            Variant::Boringtun => "boringtun",
            Variant::WgGoDebian => "wireguard-go-debian",
            Variant::WgGoLatest => "wireguard-go-latest",
        }
    }

    /// The name in the table.
    pub fn label(self) -> &'static str {
        match self {
            Variant::Plain => "plain routed",
            Variant::Ours => "ours (liqo-gateway)",
            Variant::Boringtun => "boringtun-cli",
            Variant::WgGoDebian => "wireguard-go Debian",
            Variant::WgGoLatest => "wireguard-go latest",
        }
    }

    /// Whether a tunnel (and so a tunnel MTU) is on the leg.
    pub fn is_tunnel(self) -> bool {
        self != Variant::Plain
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// How the processes share the CPUs.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// No pinning: everything shares every CPU.
    Shared,
    /// gwA's daemon and the iperf3 client on CPU 0, gwB's daemon and the server on CPU 1.
    Split,
}

impl Profile {
    /// Both profiles, in table order.
    pub const ALL: [Profile; 2] = [Profile::Shared, Profile::Split];

    /// The CPU that side A (`true`) or side B runs on, if pinned.
    pub fn cpu(self, side_a: bool) -> Option<u32> {
        match self {
            Profile::Shared => None,
            Profile::Split => Some(if side_a { 0 } else { 1 }),
        }
    }

    /// One line for the table's title.
    pub fn describe(self, cpus: usize) -> String {
        match self {
            Profile::Shared => format!(
                "no pinning: the gateways, the iperf3 client and the server share the {cpus} CPUs"
            ),
            Profile::Split => "gwA's daemon + iperf3 client on CPU 0, gwB's daemon + iperf3 \
                               server on CPU 1"
                .into(),
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Profile::Shared => "shared",
            Profile::Split => "split",
        })
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The lab prefix; everything is named `<prefix>-bench-*`.
    pub prefix: Prefix,
    /// Interleaved repeats (at least [`MIN_REPEATS`] unless `quick`).
    pub repeats: u32,
    /// Seconds per iperf3 test.
    pub seconds: u32,
    /// Variants, in table order.
    pub variants: Vec<Variant>,
    /// CPU profiles.
    pub profiles: Vec<Profile>,
    /// Do not install anything; fail if a binary is missing.
    pub skip_install: bool,
    /// Allow fewer repeats than [`MIN_REPEATS`] (for tests, not for numbers).
    pub quick: bool,
    /// Where built peers are kept (`$LIQO_BENCH_CACHE`, default [`DEFAULT_CACHE`]).
    pub cache: PathBuf,
}

/// The fewest repeats a real run may use.
pub const MIN_REPEATS: u32 = 5;
/// Default cache of built peers.
pub const DEFAULT_CACHE: &str = "/var/cache/liqo-lab/bench";
/// MTU of every tunnel.
pub const TUNNEL_MTU: u32 = 1420;

impl Options {
    /// Checks the numbers and removes duplicates (keeping the table order).
    pub fn validate(self) -> Result<Options, BenchError> {
        self.validate_with(MIN_REPEATS)
    }

    /// [`Options::validate`] for a bench whose medians need at least `min_repeats`.
    pub fn validate_with(mut self, min_repeats: u32) -> Result<Options, BenchError> {
        let bad = |s: String| Err(BenchError::Options(s));
        if self.repeats < min_repeats && !self.quick {
            return bad(format!(
                "--repeats {} is below {min_repeats}; medians need at least {min_repeats} \
                 (add --quick for a smoke test)",
                self.repeats
            ));
        }
        if self.repeats == 0 {
            return bad("--repeats must be at least 1".into());
        }
        if !(1..=600).contains(&self.seconds) {
            return bad(format!("--seconds {} is outside 1..=600", self.seconds));
        }
        if self.variants.is_empty() || self.profiles.is_empty() {
            return bad("no variant or no profile selected".into());
        }
        self.variants.sort();
        self.variants.dedup();
        self.profiles.sort();
        self.profiles.dedup();
        Ok(self)
    }
}

/// What went wrong in the bench (a variant that passes no traffic is not an error: it is
/// recorded in the report).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Bad options.
    #[error("{0}")]
    Options(String),
    /// Another bench with the same prefix holds the lock.
    #[error(
        "another `liqo-bench` with prefix {0} is running (lock {1}); wait for it or use --prefix"
    )]
    Busy(Prefix, PathBuf),
    /// Installing or finding a peer or tool failed.
    #[error("installing {what}: {detail}")]
    Install {
        /// What.
        what: String,
        /// Why (with the registry's or the tool's own message).
        detail: String,
    },
    /// A required binary is missing and installing is not allowed.
    #[error("{what} is missing ({path}); run without --skip-install to install it")]
    Missing {
        /// What.
        what: String,
        /// Where it was looked for.
        path: String,
    },
    /// Building the topology or a variant, or measuring, failed.
    #[error("{what}: {detail}")]
    Step {
        /// What was being done.
        what: String,
        /// Why.
        detail: String,
    },
    /// Interrupted by a signal (everything was cleaned up).
    #[error("interrupted by {0}; everything the bench created was removed")]
    Interrupted(&'static str),
    /// A lab helper failed.
    #[error(transparent)]
    Lab(#[from] LabError),
    /// A namespace operation failed.
    #[error(transparent)]
    Netns(#[from] dataplane::netns::Error),
}

/// A failed step: what was being done, and why.
pub(crate) fn fail(what: impl Into<String>, detail: impl Into<String>) -> BenchError {
    BenchError::Step {
        what: what.into(),
        detail: detail.into(),
    }
}

impl BenchError {
    /// A failed step, with the whole chain of causes of `e`.
    pub(crate) fn step(
        what: impl Into<String>,
        e: &(dyn std::error::Error + 'static),
    ) -> BenchError {
        BenchError::Step {
            what: what.into(),
            detail: liqo_types::chain(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum;

    use super::*;

    fn opts(repeats: u32, quick: bool) -> Options {
        Options {
            prefix: "lq".parse().unwrap(),
            repeats,
            seconds: 5,
            variants: vec![Variant::Ours, Variant::Plain, Variant::Ours],
            profiles: Profile::ALL.to_vec(),
            skip_install: false,
            quick,
            cache: DEFAULT_CACHE.into(),
        }
    }

    #[test]
    fn at_least_five_repeats_unless_quick() {
        let e = opts(4, false).validate().unwrap_err().to_string();
        assert!(
            e.contains("--repeats 4 is below 5") && e.contains("--quick"),
            "{e}"
        );
        assert!(opts(1, true).validate().is_ok());
        assert!(opts(0, true).validate().is_err());
        let o = opts(5, false).validate().unwrap();
        assert_eq!(
            o.variants,
            vec![Variant::Plain, Variant::Ours],
            "sorted, deduplicated"
        );
        let mut bad = opts(5, false);
        bad.seconds = 0;
        assert!(bad.validate().is_err());
    }

    #[test]
    fn variant_names_agree_on_the_command_line_and_in_json() {
        for v in Variant::ALL {
            let cli = v.to_possible_value().unwrap();
            assert_eq!(cli.get_name(), v.key());
            assert_eq!(
                serde_json::to_string(&v).unwrap(),
                format!("\"{}\"", v.key())
            );
        }
        assert_eq!(Profile::Split.cpu(true), Some(0));
        assert_eq!(Profile::Split.cpu(false), Some(1));
        assert_eq!(Profile::Shared.cpu(true), None);
    }
}
