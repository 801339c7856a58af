//! The request → route decision: which answer a method, a path, a query and an `Accept` header
//! ask for, with `/call`'s URL and `/append`'s entry already checked (no I/O). `/append` and
//! `/log` exist only when a data directory is configured.

use http::{Method, Uri};

use super::{
    entry::check_entry,
    target::{Target, check_url, query_param},
};
use crate::error::Error;

/// How `/` answers: JSON (the default), or one line of text (`?format=text`, or an `Accept`
/// naming `text/plain` and not `application/json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Json,
    Text,
}

/// What a request asks for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// `GET /`: who served it.
    Hello(Format),
    /// `GET /call?url=…` with a URL that passed the check: call it.
    Call(Target),
    /// `GET /call` whose URL is missing or bad: 400.
    BadCall(String),
    /// `POST /append?entry=…` with an entry that passed the check: append it.
    Append(String),
    /// `POST /append` whose entry is missing or bad: 400.
    BadAppend(String),
    /// `GET /log`: the data directory's log.
    Log,
    /// `GET /healthz`: 200 `ok`.
    Health,
    /// Another method on a known path: 405, with the one method the path allows.
    MethodNotAllowed(&'static str),
    /// Any other path: 404.
    NotFound,
}

impl Route {
    /// Whether this request is counted in `served`: the requests the demo is for (`/`, a checked
    /// `/call`, a checked `/append`, `/log`), also when their I/O then fails; not the probes nor
    /// the requests refused before any I/O.
    pub(crate) fn counts(&self) -> bool {
        matches!(
            self,
            Route::Hello(_) | Route::Call(_) | Route::Append(_) | Route::Log
        )
    }
}

/// The route of a request; `data_dir`: whether a data directory is configured (without one,
/// `/append` and `/log` are unknown paths).
pub(crate) fn route(method: &Method, uri: &Uri, accept: Option<&str>, data_dir: bool) -> Route {
    let query = uri.query().unwrap_or("");
    let allowed = match uri.path() {
        "/" | "/call" | "/healthz" => "GET",
        "/log" if data_dir => "GET",
        "/append" if data_dir => "POST",
        _ => return Route::NotFound,
    };
    if method.as_str() != allowed {
        return Route::MethodNotAllowed(allowed);
    }
    match uri.path() {
        "/" => Route::Hello(format(query, accept)),
        "/call" => match query_param(query, "url") {
            None => Route::BadCall(Error::MissingUrl.to_string()),
            Some(Ok(url)) if url.is_empty() => Route::BadCall(Error::MissingUrl.to_string()),
            Some(Err(reason)) => Route::BadCall(
                Error::BadUrl {
                    url: query.to_owned(),
                    reason,
                }
                .to_string(),
            ),
            Some(Ok(url)) => match check_url(&url) {
                Ok(target) => Route::Call(target),
                Err(e) => Route::BadCall(e.to_string()),
            },
        },
        "/append" => match check_entry(query) {
            Ok(entry) => Route::Append(entry),
            Err(e) => Route::BadAppend(e.to_string()),
        },
        "/log" => Route::Log,
        _ => Route::Health,
    }
}

/// The answer's format: the `format` parameter first, then the `Accept` header.
fn format(query: &str, accept: Option<&str>) -> Format {
    match query_param(query, "format") {
        Some(Ok(f)) if f == "text" => return Format::Text,
        Some(Ok(f)) if f == "json" => return Format::Json,
        _ => {}
    }
    match accept {
        Some(a) if a.contains("text/plain") && !a.contains("application/json") => Format::Text,
        _ => Format::Json,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(uri: &str, accept: Option<&str>) -> Route {
        route(&Method::GET, &uri.parse().unwrap(), accept, false)
    }

    /// A request to a server with a data directory.
    fn with_data(method: Method, uri: &str) -> Route {
        route(&method, &uri.parse().unwrap(), None, true)
    }

    fn bad_append(uri: &str) -> String {
        match with_data(Method::POST, uri) {
            Route::BadAppend(e) => e,
            other => panic!("{uri}: {other:?}"),
        }
    }

    #[test]
    fn root_answers_json_unless_text_is_asked_for() {
        assert_eq!(get("/", None), Route::Hello(Format::Json));
        assert_eq!(get("/", Some("*/*")), Route::Hello(Format::Json));
        assert_eq!(get("/?format=text", None), Route::Hello(Format::Text));
        assert_eq!(get("/", Some("text/plain")), Route::Hello(Format::Text));
        assert_eq!(
            get("/", Some("text/plain, application/json")),
            Route::Hello(Format::Json)
        );
        assert_eq!(
            get("/?format=json", Some("text/plain")),
            Route::Hello(Format::Json)
        );
        assert!(get("/", None).counts());
    }

    #[test]
    fn call_checks_its_url_before_any_io() {
        let Route::Call(t) = get("/call?url=http://back.demo:8080/", None) else {
            panic!("not a call");
        };
        assert_eq!((t.host.as_str(), t.port), ("back.demo", 8080));
        assert!(get("/call?url=http://back.demo:8080/", None).counts());
        for (uri, expect) in [
            ("/call", "needs a url parameter"),
            ("/call?url=", "needs a url parameter"),
            (
                "/call?url=https://back.demo/",
                "bad url \"https://back.demo/\"",
            ),
            ("/call?url=%zz", "bad percent escape"),
        ] {
            match get(uri, None) {
                Route::BadCall(e) => assert!(e.contains(expect), "{uri}: {e}"),
                other => panic!("{uri}: {other:?}"),
            }
        }
        assert!(!get("/call", None).counts());
    }

    #[test]
    fn probes_other_methods_and_unknown_paths() {
        assert_eq!(get("/healthz", None), Route::Health);
        assert!(!Route::Health.counts());
        assert_eq!(get("/nothing", None), Route::NotFound);
        assert_eq!(get("/healthz/", None), Route::NotFound);
        let post = route(&Method::POST, &"/".parse().unwrap(), None, false);
        assert_eq!(post, Route::MethodNotAllowed("GET"));
        let post = route(&Method::POST, &"/elsewhere".parse().unwrap(), None, false);
        assert_eq!(post, Route::NotFound);
        // The other paths are the same with a data directory.
        assert_eq!(with_data(Method::GET, "/healthz"), Route::Health);
        assert_eq!(with_data(Method::GET, "/"), Route::Hello(Format::Json));
        assert_eq!(with_data(Method::GET, "/nothing"), Route::NotFound);
    }

    #[test]
    fn append_checks_its_entry_before_any_io() {
        assert_eq!(
            with_data(Method::POST, "/append?entry=hello"),
            Route::Append("hello".into())
        );
        assert_eq!(
            with_data(Method::POST, "/append?entry=order%20%2342+paid&other=1"),
            Route::Append("order #42 paid".into())
        );
        assert!(with_data(Method::POST, "/append?entry=x").counts());
        assert!(bad_append("/append").contains("needs an entry parameter"));
        assert!(bad_append("/append?entry=").contains("1 to 200 characters, this one has 0"));
        let long = bad_append(&format!("/append?entry={}", "x".repeat(201)));
        assert!(
            long.contains("1 to 200 characters, this one has 201"),
            "{long}"
        );
        let newline = bad_append("/append?entry=a%0Ab");
        assert!(
            newline.starts_with(r#"bad entry "a\nb": "#) && newline.contains("control character"),
            "{newline}"
        );
        assert!(bad_append("/append?entry=%zz").contains("bad percent escape"));
        assert!(!with_data(Method::POST, "/append").counts());
    }

    #[test]
    fn log_and_append_allow_one_method_and_exist_only_with_a_data_dir() {
        assert_eq!(with_data(Method::GET, "/log"), Route::Log);
        assert!(Route::Log.counts());
        assert_eq!(with_data(Method::GET, "/log?x=1"), Route::Log);
        assert_eq!(
            with_data(Method::GET, "/append?entry=x"),
            Route::MethodNotAllowed("POST")
        );
        assert_eq!(
            with_data(Method::POST, "/log"),
            Route::MethodNotAllowed("GET")
        );
        assert_eq!(
            with_data(Method::PUT, "/append?entry=x"),
            Route::MethodNotAllowed("POST")
        );
        assert!(!Route::MethodNotAllowed("POST").counts());
        for (method, uri) in [
            (Method::POST, "/append?entry=x"),
            (Method::POST, "/append"),
            (Method::GET, "/append?entry=x"),
            (Method::GET, "/log"),
            (Method::POST, "/log"),
        ] {
            let r = route(&method, &uri.parse().unwrap(), None, false);
            assert_eq!(r, Route::NotFound, "{method} {uri} without a data dir");
        }
        assert_eq!(with_data(Method::GET, "/log/"), Route::NotFound);
        assert_eq!(with_data(Method::POST, "/append/"), Route::NotFound);
    }
}
