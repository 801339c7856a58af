//! [`Machine`]: what a run ran on (kernel, CPUs, CPU model, memory), read from `/proc`.

use serde::{Deserialize, Serialize};

/// The machine a run measured on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Machine {
    /// `uname -r`.
    pub kernel: String,
    /// CPUs this process may use.
    pub cpus: usize,
    /// The CPU model (`/proc/cpuinfo`).
    pub cpu_model: String,
    /// Total memory (`MemTotal` of `/proc/meminfo`), MiB; 0 if unknown.
    pub memory_mib: u64,
}

impl Machine {
    /// This machine (what cannot be read is left empty or 0, `unknown CPU` for the model).
    pub fn read() -> Machine {
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
        Machine {
            kernel: read("/proc/sys/kernel/osrelease").trim().to_owned(),
            cpus: std::thread::available_parallelism().map_or(1, usize::from),
            cpu_model: cpu_model(&read("/proc/cpuinfo")),
            memory_mib: mem_total_kib(&read("/proc/meminfo")).unwrap_or(0) / 1024,
        }
    }

    /// `kernel 6.1, 2 CPUs (AMD EPYC), 3.8 GiB of memory`.
    pub fn describe(&self) -> String {
        let memory = match self.memory_mib {
            0 => "memory unknown".to_owned(),
            m => format!("{:.1} GiB of memory", m as f64 / 1024.0),
        };
        format!(
            "kernel {}, {} CPUs ({}), {memory}",
            self.kernel, self.cpus, self.cpu_model
        )
    }
}

/// The first `model name` of a `/proc/cpuinfo` text, `unknown CPU` without one.
pub fn cpu_model(cpuinfo: &str) -> String {
    cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, m)| m.trim().to_owned())
        .unwrap_or_else(|| "unknown CPU".into())
}

/// `MemTotal` of a `/proc/meminfo` text, KiB.
pub fn mem_total_kib(meminfo: &str) -> Option<u64> {
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_and_memory_from_proc() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: AuthenticAMD\n\
                       model name\t: AMD EPYC 7B13\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n";
        assert_eq!(cpu_model(cpuinfo), "AMD EPYC 7B13");
        assert_eq!(cpu_model("processor : 0\n"), "unknown CPU");
        let meminfo = "MemTotal:        3996480 kB\nMemFree:          123456 kB\n";
        assert_eq!(mem_total_kib(meminfo), Some(3_996_480));
        assert_eq!(mem_total_kib("MemFree: 1 kB\n"), None);
    }

    #[test]
    fn a_machine_in_one_phrase_and_this_one_readable() {
        let m = Machine {
            kernel: "6.1".into(),
            cpus: 2,
            cpu_model: "AMD EPYC".into(),
            memory_mib: 3902,
        };
        assert_eq!(
            m.describe(),
            "kernel 6.1, 2 CPUs (AMD EPYC), 3.8 GiB of memory"
        );
        let unknown = Machine { memory_mib: 0, ..m };
        assert!(unknown.describe().ends_with("memory unknown"));
        let here = Machine::read();
        assert!(here.cpus >= 1 && !here.cpu_model.is_empty(), "{here:?}");
    }
}
