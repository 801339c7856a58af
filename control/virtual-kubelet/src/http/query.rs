//! The kubelet API's paths and query strings, parsed (pure): which pod and container a request
//! names, and the options of a log or an exec. Bad values are errors naming the parameter and
//! the value (the caller answers 400).

use k8s_openapi::jiff::Timestamp;
use kube::api::{AttachParams, LogParams};

/// Why a path or query was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// A parameter's value does not parse or is out of range.
    #[error("invalid value {value:?} of query parameter {name}: {why}")]
    Value {
        /// The parameter.
        name: String,
        /// Its value.
        value: String,
        /// What it should be.
        why: &'static str,
    },
    /// Two parameters that exclude each other.
    #[error("at most one of sinceSeconds and sinceTime may be given")]
    BothSince,
    /// An exec without a command.
    #[error("an exec needs at least one command parameter")]
    NoCommand,
    /// Neither stdin, stdout nor stderr.
    #[error("at least one of stdin, stdout and stderr must be true")]
    NoStream,
    /// A path segment that cannot be a name (empty, or not valid percent-encoding).
    #[error("invalid path segment {0:?}")]
    Segment(String),
}

/// The target of a request: a container of a pod of a local namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The local namespace.
    pub namespace: String,
    /// The pod (the same name on the provider).
    pub pod: String,
    /// The container.
    pub container: String,
    /// The pod's UID, when the path names one (`/exec/{ns}/{pod}/{uid}/{container}`): the
    /// local pod must have it (a re-created pod of the same name is not reached).
    pub uid: Option<String>,
}

/// A route of the kubelet API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/healthz`.
    Healthz,
    /// `/pods`.
    Pods,
    /// `/containerLogs/{ns}/{pod}/{container}`.
    Logs(Target),
    /// `/exec/{ns}/{pod}[/{uid}]/{container}`.
    Exec(Target),
    /// `/attach/{ns}/{pod}[/{uid}]/{container}`.
    Attach(Target),
    /// Anything else.
    NotFound,
}

/// The route of `path` (without its query).
pub fn route(path: &str) -> Result<Route, QueryError> {
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let target = |ns: &str, pod: &str, uid: Option<&str>, c: &str| -> Result<Target, QueryError> {
        Ok(Target {
            namespace: segment(ns)?,
            pod: segment(pod)?,
            container: segment(c)?,
            uid: uid.map(segment).transpose()?,
        })
    };
    Ok(match segs.as_slice() {
        ["healthz"] => Route::Healthz,
        ["pods"] | ["pods", ""] => Route::Pods,
        ["containerLogs", ns, pod, c] => Route::Logs(target(ns, pod, None, c)?),
        ["exec", ns, pod, c] => Route::Exec(target(ns, pod, None, c)?),
        ["exec", ns, pod, uid, c] => Route::Exec(target(ns, pod, Some(*uid), c)?),
        ["attach", ns, pod, c] => Route::Attach(target(ns, pod, None, c)?),
        ["attach", ns, pod, uid, c] => Route::Attach(target(ns, pod, Some(*uid), c)?),
        _ => Route::NotFound,
    })
}

/// A path segment, percent-decoded; never empty, never a `/`.
fn segment(s: &str) -> Result<String, QueryError> {
    match percent_decode(s) {
        Some(out) if !out.is_empty() && !out.contains('/') => Ok(out),
        _ => Err(QueryError::Segment(s.to_owned())),
    }
}

/// `s` percent-decoded; `None` when an escape is cut short or the result is not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hi = bytes.next().and_then(|c| char::from(c).to_digit(16))?;
            let lo = bytes.next().and_then(|c| char::from(c).to_digit(16))?;
            out.push(u8::try_from(hi * 16 + lo).ok()?);
        } else {
            out.push(b);
        }
    }
    String::from_utf8(out).ok()
}

/// The decoded `key=value` pairs of a query string (`+` is a space).
pub fn pairs(query: Option<&str>) -> Vec<(String, String)> {
    let decode = |s: &str| {
        let s = s.replace('+', " ");
        segment_lossy(&s)
    };
    query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(p), String::new()),
        })
        .collect()
}

/// Percent-decodes `s`, keeping what does not decode as it is.
fn segment_lossy(s: &str) -> String {
    percent_decode(s).unwrap_or_else(|| s.to_owned())
}

/// A boolean as Go's `strconv.ParseBool` reads it (the apiserver's own conversion).
fn boolean(name: &str, value: &str) -> Result<bool, QueryError> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" | "" => Ok(false),
        _ => Err(QueryError::Value {
            name: name.into(),
            value: value.into(),
            why: "not a boolean",
        }),
    }
}

/// An integer at least `min`.
fn integer(name: &str, value: &str, min: i64) -> Result<i64, QueryError> {
    let why = if min > 0 {
        "not a positive integer"
    } else {
        "not a non-negative integer"
    };
    match value.parse::<i64>() {
        Ok(n) if n >= min => Ok(n),
        _ => Err(QueryError::Value {
            name: name.into(),
            value: value.into(),
            why,
        }),
    }
}

/// The options of `/containerLogs` (unknown parameters are ignored, as the kubelet does).
pub fn log_params(pairs: &[(String, String)], container: &str) -> Result<LogParams, QueryError> {
    let mut lp = LogParams {
        container: Some(container.to_owned()),
        ..LogParams::default()
    };
    for (k, v) in pairs {
        match k.as_str() {
            "follow" => lp.follow = boolean(k, v)?,
            "previous" => lp.previous = boolean(k, v)?,
            "timestamps" => lp.timestamps = boolean(k, v)?,
            "sinceSeconds" => lp.since_seconds = Some(integer(k, v, 1)?),
            "sinceTime" => {
                lp.since_time = Some(v.parse::<Timestamp>().map_err(|_| QueryError::Value {
                    name: k.clone(),
                    value: v.clone(),
                    why: "not an RFC 3339 time",
                })?);
            }
            "tailLines" => lp.tail_lines = Some(integer(k, v, 0)?),
            // The kubelet's older spelling; "all" is no limit.
            "tail" if v == "all" => lp.tail_lines = None,
            "tail" => lp.tail_lines = Some(integer(k, v, 0)?),
            "limitBytes" => lp.limit_bytes = Some(integer(k, v, 1)?),
            _ => {}
        }
    }
    if lp.since_seconds.is_some() && lp.since_time.is_some() {
        return Err(QueryError::BothSince);
    }
    Ok(lp)
}

/// The options of `/exec` (the `command` parameters, in order) or `/attach` (`exec = false`:
/// no command).
pub fn attach_params(
    pairs: &[(String, String)],
    container: &str,
    exec: bool,
) -> Result<(AttachParams, Vec<String>), QueryError> {
    let mut ap = AttachParams {
        container: Some(container.to_owned()),
        stdin: false,
        stdout: false,
        stderr: false,
        tty: false,
        ..AttachParams::default()
    };
    let mut command = Vec::new();
    for (k, v) in pairs {
        match k.as_str() {
            "command" => command.push(v.clone()),
            "input" | "stdin" => ap.stdin = boolean(k, v)?,
            "output" | "stdout" => ap.stdout = boolean(k, v)?,
            "error" | "stderr" => ap.stderr = boolean(k, v)?,
            "tty" => ap.tty = boolean(k, v)?,
            _ => {}
        }
    }
    if exec && command.is_empty() {
        return Err(QueryError::NoCommand);
    }
    if !(ap.stdin || ap.stdout || ap.stderr) {
        return Err(QueryError::NoStream);
    }
    if ap.tty {
        // With a TTY the remote side merges stderr into stdout (kube-rs refuses both).
        ap.stderr = false;
    }
    Ok((ap, command))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Vec<(String, String)> {
        pairs(Some(s))
    }

    #[test]
    fn routes_name_their_pod_and_container() {
        let t = |ns: &str, pod: &str, c: &str| Target {
            namespace: ns.into(),
            pod: pod.into(),
            container: c.into(),
            uid: None,
        };
        assert_eq!(
            route("/containerLogs/demo/web-1/nginx"),
            Ok(Route::Logs(t("demo", "web-1", "nginx")))
        );
        assert_eq!(
            route("/exec/demo/web-1/1234-uid/nginx"),
            Ok(Route::Exec(Target {
                uid: Some("1234-uid".into()),
                ..t("demo", "web-1", "nginx")
            }))
        );
        assert_eq!(
            route("/attach/demo/web-1/1234-uid/nginx"),
            Ok(Route::Attach(Target {
                uid: Some("1234-uid".into()),
                ..t("demo", "web-1", "nginx")
            }))
        );
        assert_eq!(
            route("/exec/demo/web-1//nginx"),
            Err(QueryError::Segment(String::new()))
        );
        assert_eq!(
            route("/attach/demo/web-1/nginx"),
            Ok(Route::Attach(t("demo", "web-1", "nginx")))
        );
        assert_eq!(route("/healthz"), Ok(Route::Healthz));
        assert_eq!(route("/pods"), Ok(Route::Pods));
        assert_eq!(route("/containerLogs/demo/web-1"), Ok(Route::NotFound));
        assert_eq!(route("/metrics"), Ok(Route::NotFound));
        assert_eq!(
            route("/containerLogs/demo//nginx"),
            Err(QueryError::Segment(String::new()))
        );
        assert_eq!(
            route("/containerLogs/demo/a%2Fb/nginx"),
            Err(QueryError::Segment("a%2Fb".into()))
        );
    }

    #[test]
    fn log_options_are_read_and_bad_values_named() {
        let lp = log_params(
            &q("follow=true&tailLines=5&timestamps=1&limitBytes=100&sinceSeconds=30&x=y"),
            "c",
        )
        .unwrap();
        assert!(lp.follow && lp.timestamps && !lp.previous);
        assert_eq!(
            (lp.tail_lines, lp.limit_bytes, lp.since_seconds),
            (Some(5), Some(100), Some(30))
        );
        assert_eq!(lp.container.as_deref(), Some("c"));
        let lp = log_params(&q("sinceTime=2026-01-02T03%3A04%3A05Z&tail=all"), "c").unwrap();
        assert_eq!(
            lp.since_time.map(|t| t.to_string()).as_deref(),
            Some("2026-01-02T03:04:05Z")
        );
        assert_eq!(lp.tail_lines, None);

        let err = log_params(&q("tailLines=-1"), "c").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid value \"-1\" of query parameter tailLines: not a non-negative integer"
        );
        let err = log_params(&q("follow=yes"), "c").unwrap_err();
        assert!(err.to_string().contains("\"yes\""), "{err}");
        assert!(log_params(&q("sinceTime=yesterday"), "c").is_err());
        assert!(log_params(&q("limitBytes=0"), "c").is_err());
        assert_eq!(
            log_params(&q("sinceSeconds=1&sinceTime=2026-01-02T03:04:05Z"), "c").unwrap_err(),
            QueryError::BothSince
        );
    }

    #[test]
    fn exec_options_keep_the_command_in_order() {
        let (ap, cmd) = attach_params(
            &q("command=sh&command=-c&command=echo+a%26b+%2Ftmp&output=1&error=1&input=1"),
            "c",
            true,
        )
        .unwrap();
        assert_eq!(cmd, ["sh", "-c", "echo a&b /tmp"]);
        assert!(ap.stdin && ap.stdout && ap.stderr && !ap.tty);
        let (ap, _) = attach_params(&q("command=sh&output=1&error=1&tty=1"), "c", true).unwrap();
        assert!(ap.tty && ap.stdout && !ap.stderr);
        assert_eq!(
            attach_params(&q("output=1"), "c", true).unwrap_err(),
            QueryError::NoCommand
        );
        assert_eq!(
            attach_params(&q("command=ls"), "c", true).unwrap_err(),
            QueryError::NoStream
        );
        assert!(attach_params(&q("output=1"), "c", false).is_ok());
    }
}
