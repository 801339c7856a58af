//! Every API client of ours names its program in `User-Agent` (`liqo-virtual-kubelet/0.1.0`),
//! so that an API server's audit log and metrics tell our components apart even when they
//! share an identity (a virtual kubelet started by the controller-manager runs with its
//! ServiceAccount). Shared by the controller-manager and the virtual kubelet.

use kube::Config;

/// The `User-Agent` of `program` at `version`.
pub fn value(program: &str, version: &str) -> String {
    format!("{program}/{version}")
}

/// Makes every request of clients built from `config` carry `User-Agent: <program>/<version>`
/// (a value that is no valid header is left out: the client then sends none).
pub fn set(config: &mut Config, program: &str, version: &str) {
    let Ok(v) = http::HeaderValue::from_str(&value(program, version)) else {
        tracing::warn!(program, version, "not a header value: no User-Agent set");
        return;
    };
    config
        .headers
        .retain(|(k, _)| k != http::header::USER_AGENT);
    config.headers.push((http::header::USER_AGENT, v));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_names_the_program_once() {
        let mut c = Config::new("https://127.0.0.1:6443".parse().unwrap());
        set(&mut c, "liqo-virtual-kubelet", "0.1.0");
        set(&mut c, "liqo-virtual-kubelet", "0.1.0");
        let ua: Vec<_> = c
            .headers
            .iter()
            .filter(|(k, _)| k == http::header::USER_AGENT)
            .collect();
        assert_eq!(ua.len(), 1);
        assert_eq!(ua[0].1, "liqo-virtual-kubelet/0.1.0");
    }
}
