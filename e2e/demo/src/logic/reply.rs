//! The answers, built from their inputs only: who this pod is (its identity), who asked (the
//! peer address as the server saw it) and how many answers it has given; `/call`'s answer from
//! the called service's; `/append`'s and `/log`'s from the store's result; the errors as JSON
//! naming the URL, the entry or the path.

use std::net::SocketAddr;

use serde_json::{Value, json};

use super::route::{Format, Route};
use crate::{error::Error, store::StoreError};

/// Who this pod is: from the downward API's environment, or flags (`unknown` when unset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    pub(crate) pod: String,
    pub(crate) namespace: String,
    pub(crate) node: String,
    pub(crate) cluster: String,
}

/// An answer: its status, its content type and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) content_type: &'static str,
    pub(crate) body: String,
}

const JSON: &str = "application/json";
const TEXT: &str = "text/plain; charset=utf-8";

impl Reply {
    fn json(status: u16, value: &Value) -> Reply {
        Reply {
            status,
            content_type: JSON,
            body: format!("{value}\n"),
        }
    }

    fn text(status: u16, body: impl Into<String>) -> Reply {
        Reply {
            status,
            content_type: TEXT,
            body: body.into(),
        }
    }
}

/// What the called service answered: its status and its body (already limited in size).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Called {
    pub(crate) status: u16,
    pub(crate) body: Vec<u8>,
}

/// `/`'s fields: this pod's identity, the client, the answer's number.
pub(crate) fn hello(id: &Identity, client: SocketAddr, served: u64) -> Value {
    json!({
        "pod": id.pod,
        "namespace": id.namespace,
        "node": id.node,
        "cluster": id.cluster,
        "client": client.to_string(),
        "served": served,
    })
}

/// `/`'s one line of text.
fn hello_line(id: &Identity, client: SocketAddr, served: u64) -> String {
    format!(
        "pod={} namespace={} node={} cluster={} client={client} served={served}\n",
        id.pod, id.namespace, id.node, id.cluster
    )
}

/// The answer of every route but a valid `/call` (which needs the network: see [`called`]),
/// `/append` and `/log` (which need the data directory: see [`appended`] and [`log`]).
pub(crate) fn answer(route: &Route, id: &Identity, client: SocketAddr, served: u64) -> Reply {
    match route {
        Route::Hello(Format::Json) => Reply::json(200, &hello(id, client, served)),
        Route::Hello(Format::Text) => Reply::text(200, hello_line(id, client, served)),
        Route::Call(target) => Reply::json(
            500,
            &json!({"error": format!("{} was not called", target.url)}),
        ),
        Route::BadCall(error) | Route::BadAppend(error) => {
            Reply::json(400, &json!({"error": error}))
        }
        Route::Append(entry) => Reply::json(
            500,
            &json!({"error": format!("{entry:?} was not appended: no data directory")}),
        ),
        Route::Log => Reply::json(500, &json!({"error": "no data directory"})),
        Route::Health => Reply::text(200, "ok\n"),
        Route::MethodNotAllowed(allow) => {
            Reply::text(405, format!("method not allowed: {allow} only\n"))
        }
        Route::NotFound => Reply::text(
            404,
            "not found: GET /, /call?url=…, /healthz (with --data-dir: POST /append?entry=…, \
             GET /log)\n",
        ),
    }
}

/// `/append`'s answer: `via` (this pod's fields), the line appended and the file's line count
/// after it; or the store's error with status 500.
pub(crate) fn appended(via: Value, line: &str, result: Result<u64, StoreError>) -> Reply {
    match result {
        Ok(lines) => Reply::json(200, &json!({"via": via, "appended": line, "lines": lines})),
        Err(e) => Reply::json(500, &json!({"error": e.to_string()})),
    }
}

/// `/log`'s answer: the file's whole content as text (bytes that are not UTF-8, which the demo
/// never writes, shown as U+FFFD); or the store's error with status 500.
pub(crate) fn log(result: Result<Vec<u8>, StoreError>) -> Reply {
    match result {
        Ok(bytes) => Reply::text(200, String::from_utf8_lossy(&bytes)),
        Err(e) => Reply::json(500, &json!({"error": e.to_string()})),
    }
}

/// `/call`'s answer: `via` (this pod's fields) and the called service's answer (its JSON, else
/// its text), or the call's error with status 502.
pub(crate) fn called(via: Value, url: &str, result: Result<Called, Error>) -> Reply {
    match result {
        Ok(c) => {
            let answer = serde_json::from_slice::<Value>(&c.body)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&c.body).into_owned()));
            Reply::json(
                200,
                &json!({"via": via, "url": url, "status": c.status, "answer": answer}),
            )
        }
        Err(e) => Reply::json(
            e.status(),
            &json!({"via": via, "url": url, "error": e.to_string()}),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logic::target::check_url;

    fn rome() -> Identity {
        Identity {
            pod: "front-1".into(),
            namespace: "demo".into(),
            node: "rome-worker".into(),
            cluster: "rome".into(),
        }
    }

    fn client() -> SocketAddr {
        "10.1.2.3:40000".parse().unwrap()
    }

    #[test]
    fn hello_names_the_pod_the_client_and_the_count() {
        let r = answer(&Route::Hello(Format::Json), &rome(), client(), 7);
        assert_eq!((r.status, r.content_type), (200, JSON));
        let v: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(
            v,
            json!({"pod": "front-1", "namespace": "demo", "node": "rome-worker",
                   "cluster": "rome", "client": "10.1.2.3:40000", "served": 7})
        );
        let r = answer(&Route::Hello(Format::Text), &rome(), client(), 7);
        assert_eq!(r.content_type, TEXT);
        assert_eq!(
            r.body,
            "pod=front-1 namespace=demo node=rome-worker cluster=rome client=10.1.2.3:40000 \
             served=7\n"
        );
    }

    #[test]
    fn the_other_routes_answer_their_status() {
        let status = |r: Route| answer(&r, &rome(), client(), 0).status;
        assert_eq!(status(Route::Health), 200);
        assert_eq!(answer(&Route::Health, &rome(), client(), 0).body, "ok\n");
        assert_eq!(status(Route::NotFound), 404);
        let not_allowed = answer(&Route::MethodNotAllowed("POST"), &rome(), client(), 0);
        assert_eq!(
            (not_allowed.status, not_allowed.body.as_str()),
            (405, "method not allowed: POST only\n")
        );
        assert_eq!(status(Route::BadAppend("bad entry".into())), 400);
        assert_eq!(status(Route::Append("x".into())), 500);
        assert_eq!(status(Route::Log), 500);
        let bad = answer(
            &Route::BadCall("bad url \"x\"".into()),
            &rome(),
            client(),
            0,
        );
        assert_eq!(bad.status, 400);
        assert!(bad.body.contains(r#"bad url \"x\""#), "{}", bad.body);
        let not_called = Route::Call(check_url("http://a/").unwrap());
        assert_eq!(status(not_called), 500);
    }

    #[test]
    fn a_call_carries_the_called_answer_as_json_or_text() {
        let via = hello(&rome(), client(), 1);
        let back = json!({"pod": "back-1", "cluster": "milan"});
        let ok = Called {
            status: 200,
            body: back.to_string().into_bytes(),
        };
        let r = called(via.clone(), "http://back.demo/", Ok(ok));
        assert_eq!(r.status, 200);
        let v: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(v["via"], via);
        assert_eq!(v["answer"], back);
        assert_eq!(
            (v["status"].as_u64(), v["url"].as_str()),
            (Some(200), Some("http://back.demo/"))
        );

        let text = Called {
            status: 404,
            body: b"not found\n".to_vec(),
        };
        let v: Value = serde_json::from_str(&called(via.clone(), "u", Ok(text)).body).unwrap();
        assert_eq!(
            (v["answer"].as_str(), v["status"].as_u64()),
            (Some("not found\n"), Some(404))
        );
    }

    #[test]
    fn a_failed_call_is_a_502_naming_the_url_and_the_error() {
        let e = Error::Timeout {
            url: "http://back.demo/".into(),
            secs: 5,
        };
        let r = called(hello(&rome(), client(), 1), "http://back.demo/", Err(e));
        assert_eq!(r.status, 502);
        let v: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(v["url"], "http://back.demo/");
        assert_eq!(
            v["error"],
            "calling http://back.demo/: no complete answer within 5 s"
        );
        assert_eq!(v["via"]["cluster"], "rome");
    }

    #[test]
    fn an_append_answers_via_the_line_and_the_count_or_the_store_s_error() {
        let via = hello(&rome(), client(), 3);
        let line = "paid pod=front-1 cluster=rome";
        let r = appended(via.clone(), line, Ok(4));
        assert_eq!((r.status, r.content_type), (200, JSON));
        let v: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(v, json!({"via": via, "appended": line, "lines": 4}));

        let r = appended(via, line, Err(full_disk()));
        assert_eq!((r.status, r.content_type), (500, JSON));
        let v: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(
            v,
            json!({"error": "cannot append to /data/log: No space left on device"})
        );
    }

    fn full_disk() -> StoreError {
        StoreError {
            op: "append to",
            path: "/data/log".into(),
            source: std::io::Error::other("No space left on device"),
        }
    }

    #[test]
    fn the_log_is_its_text_or_the_store_s_error() {
        let r = log(Ok(b"a pod=p cluster=c\nb pod=p cluster=c\n".to_vec()));
        assert_eq!((r.status, r.content_type), (200, TEXT));
        assert_eq!(r.body, "a pod=p cluster=c\nb pod=p cluster=c\n");
        assert_eq!(log(Ok(Vec::new())).body, "");
        let r = log(Err(full_disk()));
        assert_eq!((r.status, r.content_type), (500, JSON));
        assert_eq!(
            r.body,
            "{\"error\":\"cannot append to /data/log: No space left on device\"}\n"
        );
    }
}
